"""Supervisor: a raising task is restarted with backoff, more than CRASH_LIMIT crashes in the window make it
unhealthy (injected clock), a dead thread is unhealthy, join returns. Every wait is bounded."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from agent import supervisor as sup
from agent.supervisor import CRASH_LIMIT, CRASH_WINDOW_SECONDS, Supervisor
from tests.helpers.polling import eventually


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sup, "BACKOFF_INITIAL", 0.001)
    monkeypatch.setattr(sup, "BACKOFF_MAX", 0.004)


def crashing(times: int, calls: list[int]) -> Callable[[threading.Event], None]:
    """Raises on the first ``times`` calls, then runs until stopped."""

    def target(stop: threading.Event) -> None:
        calls.append(1)
        if len(calls) <= times:
            raise RuntimeError(f"boom {len(calls)}")
        stop.wait(10.0)

    return target


def test_raising_task_is_restarted(stop: threading.Event) -> None:
    calls: list[int] = []
    s = Supervisor(stop, clock=Clock())
    s.spawn("flaky", crashing(2, calls))
    assert eventually(lambda: len(calls) == 3)
    ok, detail = s.healthy()
    assert ok, detail  # 2 crashes ≤ CRASH_LIMIT
    assert detail == "1 tasks running"


def test_unhealthy_after_more_than_crash_limit_in_window(stop: threading.Event) -> None:
    clock = Clock()
    calls: list[int] = []
    s = Supervisor(stop, clock=clock)
    s.spawn("looper", crashing(CRASH_LIMIT + 1, calls))
    assert eventually(lambda: len(calls) == CRASH_LIMIT + 2)  # crashed 6 times, now running
    ok, detail = s.healthy()
    assert not ok
    assert f"looper crashed {CRASH_LIMIT + 1} times" in detail
    assert "RuntimeError: boom 6" in detail
    clock.now += CRASH_WINDOW_SECONDS - 0.5
    assert s.healthy()[0] is False  # still inside the window
    clock.now += 0.5  # the crashes are now exactly one window old
    ok, detail = s.healthy()
    assert ok, detail


def test_exactly_crash_limit_is_still_healthy(stop: threading.Event) -> None:
    calls: list[int] = []
    s = Supervisor(stop, clock=Clock())
    s.spawn("edge", crashing(CRASH_LIMIT, calls))
    assert eventually(lambda: len(calls) == CRASH_LIMIT + 1)
    ok, detail = s.healthy()
    assert ok, detail


def test_crashes_outside_window_are_forgotten(stop: threading.Event) -> None:
    clock = Clock()
    calls: list[int] = []
    gate = threading.Event()

    def target(stop_event: threading.Event) -> None:
        calls.append(1)
        if len(calls) == 4:
            gate.wait(5.0)  # pause so the test can move the clock between two bursts
        if len(calls) <= 7:
            raise RuntimeError("boom")
        stop_event.wait(10.0)

    s = Supervisor(stop, clock=clock)
    s.spawn("bursts", target)
    assert eventually(lambda: len(calls) == 4)
    clock.now += CRASH_WINDOW_SECONDS + 1  # the first 3 crashes age out
    gate.set()
    assert eventually(lambda: len(calls) == 8)
    ok, detail = s.healthy()
    assert ok, detail  # 4 recent crashes, not 7


def test_task_returning_normally_is_finished_and_healthy(stop: threading.Event) -> None:
    done = threading.Event()

    def target(_stop: threading.Event) -> None:
        done.set()

    s = Supervisor(stop, clock=Clock())
    s.spawn("oneshot", target)
    assert done.wait(5.0)
    assert s.join(5.0) == []
    ok, detail = s.healthy()
    assert ok, detail


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_dead_thread_is_unhealthy(stop: threading.Event) -> None:
    def target(_stop: threading.Event) -> None:
        raise SystemExit(3)  # not an Exception: the supervisor does not restart it

    s = Supervisor(stop, clock=Clock())
    s.spawn("doomed", target)
    assert s.join(5.0) == []
    ok, detail = s.healthy()
    assert not ok
    assert "doomed thread is dead" in detail


def test_duplicate_name_rejected(stop: threading.Event) -> None:
    s = Supervisor(stop, clock=Clock())
    s.spawn("a", lambda e: None)
    with pytest.raises(ValueError, match="'a' already exists"):
        s.spawn("a", lambda e: None)


def test_join_returns_after_stop(stop: threading.Event) -> None:
    started = threading.Barrier(3, timeout=5.0)

    def worker(stop_event: threading.Event) -> None:
        started.wait()
        stop_event.wait(10.0)

    s = Supervisor(stop, clock=time.monotonic)
    s.spawn("w1", worker)
    s.spawn("w2", worker)
    started.wait()
    t0 = time.monotonic()
    stop.set()
    assert s.join(5.0) == []
    assert time.monotonic() - t0 < 5.0
    ok, _ = s.healthy()
    assert ok  # stopped threads are not "dead"


def test_join_reports_threads_still_running(stop: threading.Event) -> None:
    release = threading.Event()

    def stubborn(_stop: threading.Event) -> None:
        release.wait(10.0)  # ignores stop

    s = Supervisor(stop, clock=time.monotonic)
    s.spawn("stubborn", stubborn)
    stop.set()
    try:
        assert s.join(0.05) == ["stubborn"]
    finally:
        release.set()
    assert s.join(5.0) == []


def test_stop_during_backoff_ends_the_restart_loop(
    monkeypatch: pytest.MonkeyPatch, stop: threading.Event
) -> None:
    monkeypatch.setattr(sup, "BACKOFF_INITIAL", 30.0)  # would wait 30 s if stop were not honoured
    calls: list[int] = []
    s = Supervisor(stop, clock=Clock())
    s.spawn("slow", crashing(100, calls))
    assert eventually(lambda: len(calls) == 1)
    stop.set()
    assert s.join(5.0) == []
    assert len(calls) == 1
