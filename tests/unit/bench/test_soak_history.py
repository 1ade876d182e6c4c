"""bench/soak.py's accounting of the MetricHub history: koord-manager's RSS growth with the history's bytes
taken out of each sample, so a history still filling up is told apart from a leak; the thread count."""

from __future__ import annotations

import os

import pytest

from bench.soak import slope_per_hour, threads, without


def test_growth_without_a_filling_history_is_flat() -> None:
    # The history fills by 1 KiB/s and RSS grows by exactly that: nothing else grows.
    history = [(float(t), 1024.0 * t) for t in range(0, 600, 30)]
    rss = [(float(t), 100_000 + t) for t in range(0, 600, 10)]
    rest = without(rss, history)
    assert [t for t, _ in rest] == [t for t, _ in history]  # only the paired samples
    assert slope_per_hour(rss) == pytest.approx(3600 / 1024)
    assert abs(slope_per_hour(rest)) < 0.01


def test_growth_beyond_the_history_stays_visible() -> None:
    history = [(float(t), 512.0 * t) for t in range(0, 600, 30)]
    rss = [(float(t), 100_000 + t) for t in range(0, 600, 10)]  # 1 KiB/s, the history only half of it
    assert slope_per_hour(without(rss, history)) == pytest.approx(3600 / 1024 / 2)


def test_threads_of_this_process_and_of_none() -> None:
    n = threads(os.getpid())
    assert n is not None and n >= 1
    assert threads(None) is None
