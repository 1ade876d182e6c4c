"""kube.supervise: a raising target is logged, counted through on_crash and restarted with a doubling,
capped backoff; it starts over from the initial backoff after a long healthy run; stop ends it, also
during a backoff; a broken crash hook does not end the supervision. Every wait is bounded."""

from __future__ import annotations

import itertools
import threading
import time

from kube.supervise import SupervisedThread, Supervisor, restart_delay, supervise
from tests.helpers.polling import eventually


def test_a_crashing_target_is_counted_and_restarted(stop: threading.Event) -> None:
    calls: list[float] = []
    crashes: list[tuple[str, str]] = []

    def target(stop_event: threading.Event) -> None:
        calls.append(time.monotonic())
        if len(calls) <= 3:
            raise RecursionError(f"bad entry {len(calls)}")
        stop_event.wait(10.0)

    t = supervise(
        "watcher", target, stop, backoff_initial=0.01, backoff_max=0.04,
        on_crash=lambda name, e: crashes.append((name, str(e))),
    )  # fmt: skip
    assert eventually(lambda: len(calls) == 4)
    assert crashes == [("watcher", "bad entry 1"), ("watcher", "bad entry 2"), ("watcher", "bad entry 3")]
    assert t.restarts == 3 and t.last_error == "RecursionError: bad entry 3"
    gaps = [b - a for a, b in itertools.pairwise(calls)]
    assert gaps[1] >= 0.02 - 0.005 and gaps[2] >= 0.04 - 0.005  # doubled, then capped
    stop.set()
    assert t.join(5.0)


def test_stop_during_the_backoff_ends_it(stop: threading.Event) -> None:
    calls: list[int] = []

    def target(_stop: threading.Event) -> None:
        calls.append(1)
        raise ValueError("boom")

    t = supervise("slow", target, stop, backoff_initial=30.0)
    assert eventually(lambda: len(calls) == 1)
    stop.set()
    assert t.join(5.0)
    assert len(calls) == 1 and t.restarts == 0


def test_the_backoff_starts_over_after_a_long_healthy_run() -> None:
    assert restart_delay(8.0, ran=0.5, initial=1.0, cap=30.0) == 8.0  # a crash loop keeps its backoff
    assert restart_delay(30.0, ran=30.0, initial=1.0, cap=30.0) == 30.0
    assert restart_delay(30.0, ran=31.0, initial=1.0, cap=30.0) == 1.0  # it worked for a while


def test_a_broken_hook_does_not_end_the_supervision(stop: threading.Event) -> None:
    calls: list[int] = []

    def target(stop_event: threading.Event) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("boom")
        stop_event.wait(10.0)

    def hook(_name: str, _e: BaseException) -> None:
        raise RuntimeError("hook broke")

    t = supervise("w", target, stop, backoff_initial=0.01, on_crash=hook)
    assert eventually(lambda: len(calls) == 2)
    stop.set()
    assert t.join(5.0)


def test_a_supervisor_reports_health_and_joins(stop: threading.Event) -> None:
    now = [100.0]
    s = Supervisor(stop, lambda: now[0], backoff_initial=0.001, backoff_max=0.002, crash_limit=2)
    calls: list[int] = []

    def target(stop_event: threading.Event) -> None:
        calls.append(1)
        if len(calls) <= 3:
            raise ValueError(f"boom {len(calls)}")
        stop_event.wait(10.0)

    task = s.spawn("looper", target)
    assert isinstance(task, SupervisedThread)
    assert eventually(lambda: len(calls) == 4)
    ok, detail = s.healthy()
    assert not ok and "looper crashed 3 times" in detail and "boom 3" in detail
    now[0] += 301.0
    assert s.healthy() == (True, "1 tasks running")
    stop.set()
    assert s.join(5.0) == []
