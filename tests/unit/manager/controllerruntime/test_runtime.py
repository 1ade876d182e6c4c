"""The controller runtime: results and requeues, failures counted and backed off, workers, resync,
ControllerManager start/stop and leader hooks, metrics."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from manager.controllerruntime.queue import ItemExponentialFailureRateLimiter
from manager.controllerruntime.runtime import Controller, ControllerManager
from manager.metrics import ManagerMetrics
from tests.helpers import polling


def wait_for(cond: Callable[[], Any], timeout: float = 5.0) -> Any:
    return polling.wait_for(cond, timeout, 0.005)


def sample(m: ManagerMetrics, name: str, **labels: str) -> float:
    return m.registry.get_sample_value(name, labels) or 0.0


def test_process_success_forgets_backoff() -> None:
    m = ManagerMetrics()
    c = Controller("t", lambda key: None, metrics=m)
    c.queue.rate_limiter.when("k")
    assert c.process("k") == "success"
    assert c.queue.num_requeues("k") == 0
    assert sample(m, "koord_manager_reconcile_total", controller="t", result="success") == 1
    assert sample(m, "koord_manager_reconcile_duration_seconds_count", controller="t") == 1


def test_exception_is_counted_and_requeued_with_growing_backoff() -> None:
    m = ManagerMetrics()

    def boom(key: str) -> float | None:
        raise RuntimeError("panic in reconcile")

    c = Controller("t", boom, metrics=m, rate_limiter=ItemExponentialFailureRateLimiter(10.0, 100.0))
    assert c.process("k") == "error"
    assert c.process("k") == "error"
    assert c.queue.num_requeues("k") == 2
    assert c.queue.pending() == 1
    assert sample(m, "koord_manager_reconcile_total", controller="t", result="error") == 2
    assert sample(m, "koord_manager_workqueue_retries_total", controller="t") == 2


def test_float_result_requeues_after_and_nonpositive_rate_limits() -> None:
    c = Controller("t", lambda key: 30.0, rate_limiter=ItemExponentialFailureRateLimiter(1.0, 10.0))
    assert c.process("k") == "requeue_after"
    assert c.queue.pending() == 1 and c.queue.num_requeues("k") == 0
    c2 = Controller("t2", lambda key: 0.0, rate_limiter=ItemExponentialFailureRateLimiter(1.0, 10.0))
    assert c2.process("k") == "requeue"
    assert c2.queue.num_requeues("k") == 1


def test_run_processes_keys_and_requeue_after_comes_back() -> None:
    seen: list[str] = []
    lock = threading.Lock()

    def reconcile(key: str) -> float | None:
        with lock:
            seen.append(key)
            return 0.05 if key == "again" and seen.count("again") < 3 else None

    c = Controller("t", reconcile, workers=2, list_keys=lambda: ["x", "y"])
    stop = threading.Event()
    t = threading.Thread(target=c.run, args=(stop,))
    c.enqueue("early")  # before run: kept and processed once running
    t.start()
    c.enqueue("again")
    try:
        wait_for(lambda: seen.count("again") == 3)
        assert {"x", "y", "early"} <= set(seen)
    finally:
        stop.set()
        t.join(5)
    assert not t.is_alive()


def test_failing_key_is_retried_until_it_succeeds() -> None:
    calls: list[str] = []

    def reconcile(key: str) -> float | None:
        calls.append(key)
        if len(calls) < 4:
            raise ValueError("not yet")
        return None

    m = ManagerMetrics()
    c = Controller("t", reconcile, metrics=m)
    stop = threading.Event()
    t = threading.Thread(target=c.run, args=(stop,))
    t.start()
    c.enqueue("k")
    try:
        wait_for(lambda: sample(m, "koord_manager_reconcile_total", controller="t", result="success") == 1)
    finally:
        stop.set()
        t.join(5)
    assert len(calls) == 4
    assert sample(m, "koord_manager_reconcile_total", controller="t", result="error") == 3


def test_periodic_resync_enqueues_all_keys() -> None:
    seen: list[str] = []
    c = Controller("t", lambda k: seen.append(k), list_keys=lambda: ["a", "b"], resync_seconds=0.05)
    stop = threading.Event()
    t = threading.Thread(target=c.run, args=(stop,))
    t.start()
    try:
        wait_for(lambda: seen.count("a") >= 3 and seen.count("b") >= 3)
    finally:
        stop.set()
        t.join(5)


def test_same_key_never_reconciled_concurrently() -> None:
    active: set[str] = set()
    overlaps: list[str] = []
    done = threading.Event()
    count = [0]
    lock = threading.Lock()

    def reconcile(key: str) -> None:
        with lock:
            if key in active:
                overlaps.append(key)
            active.add(key)
        time.sleep(0.01)
        with lock:
            active.discard(key)
            count[0] += 1
            if count[0] >= 10:
                done.set()

    c = Controller("t", reconcile, workers=4)
    stop = threading.Event()
    t = threading.Thread(target=c.run, args=(stop,))
    t.start()
    try:
        for _ in range(40):
            c.enqueue("same")
            time.sleep(0.003)
        assert done.wait(5)
    finally:
        stop.set()
        t.join(5)
    assert overlaps == []


def test_run_twice_at_once_is_refused() -> None:
    c = Controller("t", lambda k: None)
    stop = threading.Event()
    t = threading.Thread(target=c.run, args=(stop,))
    t.start()
    try:
        wait_for(lambda: c._running.locked())
        with pytest.raises(RuntimeError):
            c.run(stop)
    finally:
        stop.set()
        t.join(5)


def test_controller_manager_runs_only_between_leader_hooks() -> None:
    m = ManagerMetrics()
    seen: list[str] = []
    c = Controller("t", lambda k: seen.append(k), metrics=m)
    parent = threading.Event()
    mgr = ControllerManager([c], metrics=m, identity="me", stop=parent)
    c.enqueue("a")
    time.sleep(0.05)
    assert seen == []  # not leading: nothing runs
    mgr.on_started_leading()
    try:
        wait_for(lambda: seen == ["a"])
        assert mgr.running
        assert sample(m, "koord_manager_leader", identity="me") == 1
        assert sample(m, "koordinator_manager_is_leader") == 1
        mgr.on_stopped_leading()
        wait_for(lambda: not mgr.running and not c._running.locked())
        wait_for(lambda: sample(m, "koord_manager_leader", identity="me") == 0)
        c.enqueue("b")
        time.sleep(0.05)
        assert seen == ["a"]  # stopped: queued, not processed
        mgr.start()  # a new term picks up the queued key
        wait_for(lambda: seen == ["a", "b"])
    finally:
        parent.set()
        wait_for(lambda: not c._running.locked())
        mgr.stop()


def test_controller_manager_follows_the_parent_stop() -> None:
    c = Controller("t", lambda k: None)
    parent = threading.Event()
    mgr = ControllerManager([c])
    mgr.start(parent)
    wait_for(lambda: c._running.locked())
    parent.set()
    wait_for(lambda: not c._running.locked())
    mgr.stop()
    assert not mgr.running
    with pytest.raises(ValueError):
        Controller("bad", lambda k: None, workers=0)


def test_controller_manager_runs_term_after_term() -> None:
    seen: list[str] = []
    c = Controller("t", lambda k: seen.append(k))
    mgr = ControllerManager([c])
    try:
        for term in range(3):
            expected = [f"k{i}" for i in range(term + 1)]
            c.enqueue(expected[-1])
            mgr.on_started_leading()
            wait_for(lambda: seen == expected)  # noqa: B023 (called at once)
            assert mgr.running and mgr.is_leading()
            mgr.on_stopped_leading()  # returns at once; the loop ends on its own
            assert not mgr.running and not mgr.is_leading()
            wait_for(lambda: not c._running.locked())
    finally:
        mgr.stop()


def test_a_new_term_waits_for_the_old_terms_reconcile_and_never_overlaps() -> None:
    release = threading.Event()
    active: list[str] = []
    overlaps: list[str] = []
    seen: list[str] = []

    def reconcile(key: str) -> None:
        if active:
            overlaps.append(key)
        active.append(key)
        if key == "slow":
            release.wait(5)
        seen.append(key)
        active.remove(key)

    crashes: list[BaseException | None] = []
    old_hook = threading.excepthook
    threading.excepthook = lambda args: crashes.append(args.exc_value)
    c = Controller("t", reconcile)
    mgr = ControllerManager([c])
    try:
        c.enqueue("slow")
        mgr.on_started_leading()
        wait_for(lambda: active == ["slow"])
        mgr.on_stopped_leading()
        mgr.on_started_leading()  # leading again at once, while the old term is mid-reconcile
        c.enqueue("next")
        time.sleep(0.3)
        assert seen == []  # the new term waits for the old loop
        release.set()
        wait_for(lambda: seen == ["slow", "next"])
        assert overlaps == [] and crashes == []
    finally:
        release.set()
        mgr.stop()
        threading.excepthook = old_hook


def test_the_gate_stops_reconciles_within_a_term() -> None:
    seen: list[str] = []
    lease_holds = threading.Event()
    c = Controller("t", lambda k: seen.append(k))
    mgr = ControllerManager([c], leading=lease_holds.is_set)
    try:
        mgr.on_started_leading()
        c.enqueue("a")
        time.sleep(0.5)
        assert seen == [] and not mgr.is_leading()  # the elector's clock says the lease may be gone
        lease_holds.set()
        wait_for(lambda: seen == ["a"])
        lease_holds.clear()
        time.sleep(0.5)  # a worker idle on the queue sees the gate before its next key
        c.enqueue("b")
        time.sleep(0.5)
        assert seen == ["a"]
        mgr.gate(lambda: True)
        wait_for(lambda: seen == ["a", "b"])
    finally:
        mgr.stop()
