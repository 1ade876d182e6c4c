"""Tests for scheduler.queue: activeQ order, backoff timing, parking and moving on cluster events, the
moveRequestCycle rule, flushing, blocking pop and close."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from scheduler.framework.interfaces import ClusterEvent
from scheduler.queue import SchedulingQueue
from scheduler.queuedpod import QueuedPodInfo, is_pod_updated

NODE_ADD = ClusterEvent("Node", "Add")
POD_DELETE = ClusterEvent("Pod", "Delete")


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def pod(name: str, priority: int | None = None, **spec: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"containers": [{"name": "c"}], **spec}
    if priority is not None:
        s["priority"] = priority
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": "1"}, "spec": s}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def q(clock: FakeClock) -> SchedulingQueue:
    return SchedulingQueue(clock=clock)


def pop(q: SchedulingQueue) -> QueuedPodInfo:
    info = q.pop(timeout=0)
    assert info is not None
    return info


def drain(q: SchedulingQueue) -> list[str]:
    out = []
    while (info := q.pop(timeout=0)) is not None:
        out.append(info.pod["metadata"]["name"])
    return out


def park(q: SchedulingQueue, name: str, rejected_by: set[str], priority: int | None = None) -> QueuedPodInfo:
    q.add(pod(name, priority))
    info = pop(q)
    q.add_unschedulable(info, rejected_by)
    q.done(info.pod)
    return info


# --- activeQ order -------------------------------------------------------------------------------


def test_priority_then_fifo(q: SchedulingQueue) -> None:
    for name, prio in [("a", None), ("b", 10), ("c", 0), ("d", 10), ("e", -5), ("f", 100)]:
        q.add(pod(name, prio))
    assert q.pending() == {"active": 6, "backoff": 0, "unschedulable": 0}
    assert drain(q) == ["f", "b", "d", "a", "c", "e"]


def test_fifo_follows_arrival_time(q: SchedulingQueue, clock: FakeClock) -> None:
    for i in range(20):
        clock.now += 0.5 if i % 3 == 0 else 0.0
        q.add(pod(f"p{i:02d}"))
    assert drain(q) == [f"p{i:02d}" for i in range(20)]


def test_update_in_active_reorders_on_priority_change_only(q: SchedulingQueue) -> None:
    q.add(pod("a", 1))
    q.add(pod("b", 1))
    q.add(pod("c", 1))
    q.update(pod("a", 1), {**pod("a", 1), "metadata": {"name": "a", "namespace": "ns", "labels": {"x": "y"}}})
    q.update(pod("c", 1), pod("c", 50))
    assert drain(q) == ["c", "a", "b"]


def test_pop_sets_attempts_and_cycle(q: SchedulingQueue, clock: FakeClock) -> None:
    q.add(pod("a"))
    info = pop(q)
    assert (info.attempts, info.cycle, info.initial_attempt_timestamp) == (1, 1, clock.now)
    assert info.key == "ns/a"
    assert q.where(info.pod) == "in_flight"
    q.done(info.pod)
    assert q.where(info.pod) is None


# --- backoff ---------------------------------------------------------------------------------------


def test_backoff_durations() -> None:
    q = SchedulingQueue(clock=FakeClock())
    assert [q.backoff_duration(a) for a in range(0, 8)] == [0, 1, 2, 4, 8, 10, 10, 10]
    q2 = SchedulingQueue(clock=FakeClock(), initial_backoff=0.5, max_backoff=3)
    assert [q2.backoff_duration(a) for a in range(1, 6)] == [0.5, 1, 2, 3, 3]


def test_backoff_timing_doubles_to_cap(q: SchedulingQueue, clock: FakeClock) -> None:
    q.add(pod("a"))
    waits = []
    for _ in range(6):
        info = pop(q)
        q.add_unschedulable(info, set())  # an error (no rejecting plugin): straight to backoffQ
        q.done(info.pod)
        assert q.pending()["backoff"] == 1
        start, step = clock.now, 0.25
        while q.flush_backoff() == 0:
            clock.now += step
        waits.append(clock.now - start)
        assert q.pending() == {"active": 1, "backoff": 0, "unschedulable": 0}
    assert waits == [1, 2, 4, 8, 10, 10]


def test_pop_flushes_expired_backoff(q: SchedulingQueue, clock: FakeClock) -> None:
    q.add(pod("a"))
    q.add_unschedulable(pop(q), set())
    assert q.pop(timeout=0.01) is None
    clock.now += 1
    assert pop(q).attempts == 2


def test_backoff_ordered_by_expiry(q: SchedulingQueue, clock: FakeClock) -> None:
    q.add(pod("a"))
    a = pop(q)
    q.add_unschedulable(a, set())
    q.add(a.pod)  # re-added: attempts kept, so the next failure backs off 2 s
    q.add_unschedulable(pop(q), set())
    q.add(pod("b", priority=-1))
    clock.now += 0.5
    q.add_unschedulable(pop(q), set())  # b fails 0.5 s later, backs off 1 s -> expires before a
    clock.now += 1.0
    assert q.flush_backoff() == 1
    assert drain(q) == ["b"]
    clock.now += 0.5
    assert q.flush_backoff() == 1
    assert drain(q) == ["a"]


# --- parking and moving on events ---------------------------------------------------------------------


def test_parked_until_interesting_event(q: SchedulingQueue, clock: FakeClock) -> None:
    park(q, "a", {"NodeResourcesFit"})
    park(q, "b", {"PodAffinity"})
    park(q, "c", {"NodeResourcesFit", "Other"})
    interested = {"NodeResourcesFit": {NODE_ADD}, "PodAffinity": {POD_DELETE}, "Other": set()}
    assert q.pending() == {"active": 0, "backoff": 0, "unschedulable": 3}
    assert q.move_to_active_or_backoff(ClusterEvent("NodeMetric", "Update"), interested) == 0
    clock.now += 1.0  # backoff of a first attempt expired
    assert q.move_to_active_or_backoff(NODE_ADD, interested) == 2
    assert q.pending() == {"active": 2, "backoff": 0, "unschedulable": 1}
    assert sorted(drain(q)) == ["a", "c"]
    assert q.move_to_active_or_backoff(POD_DELETE, interested) == 1
    assert drain(q) == ["b"]


def test_move_while_backing_off_goes_to_backoff(q: SchedulingQueue, clock: FakeClock) -> None:
    info = park(q, "a", {"P"})
    assert info.unschedulable_plugins == {"P"}
    clock.now += 0.5
    assert q.move_to_active_or_backoff(NODE_ADD, {"P": {NODE_ADD}}) == 1
    assert q.pending() == {"active": 0, "backoff": 1, "unschedulable": 0}
    assert q.pop(timeout=0) is None
    clock.now += 0.5
    assert drain(q) == ["a"]


def test_wildcard_events_and_unregistered_plugins(q: SchedulingQueue, clock: FakeClock) -> None:
    park(q, "a", {"P"})
    park(q, "b", {"Q"})
    clock.now += 10
    assert q.move_to_active_or_backoff(NODE_ADD, {"P": {ClusterEvent("Node", "*")}, "Q": set()}) == 1
    assert drain(q) == ["a"]
    park(q, "c", {"Unregistered"})
    clock.now += 10
    assert q.move_to_active_or_backoff(NODE_ADD, {"Q": set()}) == 1  # no registration: all events
    assert drain(q) == ["c"]
    assert q.move_to_active_or_backoff(ClusterEvent("*", "*"), {"Q": set()}) == 1
    assert drain(q) == ["b"]


def test_update_of_parked_pod(q: SchedulingQueue, clock: FakeClock) -> None:
    info = park(q, "a", {"P"})
    old = info.pod
    status_only = {**old, "status": {"conditions": [{"type": "PodScheduled", "status": "False"}]}}
    status_only["metadata"] = {**old["metadata"], "resourceVersion": "2"}
    q.update(old, status_only)
    assert q.where(old) == "unschedulable"
    labelled = {**status_only, "metadata": {**status_only["metadata"], "labels": {"k": "v"}}}
    assert is_pod_updated(status_only, labelled) and not is_pod_updated(old, status_only)
    q.update(status_only, labelled)  # still backing off (1 s): backoffQ
    assert q.pending() == {"active": 0, "backoff": 1, "unschedulable": 0}
    clock.now += 1
    got = pop(q)
    assert got.pod is labelled and got.attempts == 2
    info = park(q, "b", {"P"})
    clock.now += 5
    q.update(info.pod, pod("b", 3))
    assert q.pending()["active"] == 1


def test_update_of_unknown_pod_adds_it(q: SchedulingQueue) -> None:
    q.update(None, pod("a"))
    assert drain(q) == ["a"]


def test_flush_unschedulable_after_max_age(q: SchedulingQueue, clock: FakeClock) -> None:
    park(q, "old", {"P"})
    clock.now += 200
    park(q, "young", {"P"})
    clock.now += 100
    assert q.flush_unschedulable() == 0  # parked exactly 300 s: not older than max_age
    clock.now += 0.1
    assert q.flush_unschedulable() == 1
    assert q.pending() == {"active": 1, "backoff": 0, "unschedulable": 1}
    assert drain(q) == ["old"]
    assert q.flush_unschedulable(max_age=50) == 1
    assert drain(q) == ["young"]


# --- the moveRequestCycle rule ---------------------------------------------------------------------


def test_move_request_while_in_flight_sends_to_backoff(q: SchedulingQueue, clock: FakeClock) -> None:
    q.add(pod("a"))
    q.add(pod("b"))
    a = pop(q)
    q.move_to_active_or_backoff(NODE_ADD, {})  # e.g. a node arrived while "a" was being scheduled
    q.add_unschedulable(a, {"P"})
    assert q.where(a.pod) == "backoff"
    b = pop(q)  # popped after the move request: parked normally
    q.add_unschedulable(b, {"P"})
    assert q.where(b.pod) == "unschedulable"
    clock.now += 1
    assert drain(q) == ["a"]


def test_move_request_before_pop_does_not_count(q: SchedulingQueue) -> None:
    q.add(pod("a"))
    q.move_to_active_or_backoff(NODE_ADD, {})
    info = pop(q)
    q.add_unschedulable(info, {"P"})
    assert q.where(info.pod) == "unschedulable"


def test_update_while_in_flight_sends_to_backoff(q: SchedulingQueue) -> None:
    q.add(pod("a"))
    info = pop(q)
    new = pod("a", 7)
    q.update(info.pod, new)
    assert q.pending() == {"active": 0, "backoff": 0, "unschedulable": 0}  # no duplicate
    q.add_unschedulable(info, {"P"})
    assert q.where(new) == "backoff" and info.pod is new


def test_delete(q: SchedulingQueue) -> None:
    park(q, "b", {"P"})
    q.add(pod("a"))
    q.add(pod("c"))
    c = q.pop(timeout=0)
    assert c is not None and c.key == "ns/a"
    c = pop(q)
    q.delete(pod("c"))  # deleted while in flight: its failure is dropped
    q.add_unschedulable(c, {"P"})
    q.delete(pod("b"))
    q.add(pod("d"))
    q.delete(pod("d"))
    assert q.pending() == {"active": 0, "backoff": 0, "unschedulable": 0}
    q.add(pod("c"))  # re-created under the same name
    assert drain(q) == ["c"]


def test_add_unschedulable_when_already_queued_is_ignored(q: SchedulingQueue) -> None:
    q.add(pod("a"))
    info = pop(q)
    q.add(pod("a"))  # re-added by the informer while in flight
    q.add_unschedulable(info, {"P"})
    assert q.pending() == {"active": 1, "backoff": 0, "unschedulable": 0}


def test_add_moves_parked_pod_to_active(q: SchedulingQueue) -> None:
    info = park(q, "a", {"P"})
    q.add(info.pod)
    got = pop(q)
    assert got.attempts == 2 and got.initial_attempt_timestamp == info.initial_attempt_timestamp


# --- blocking pop and close ---------------------------------------------------------------------------


def test_pop_timeout() -> None:
    q = SchedulingQueue()
    start = time.monotonic()
    assert q.pop(timeout=0.05) is None
    assert time.monotonic() - start >= 0.05


def test_pop_timeout_with_frozen_fake_clock(q: SchedulingQueue) -> None:
    q.add(pod("a"))
    q.add_unschedulable(pop(q), set())  # backing off forever under the frozen clock
    start = time.monotonic()
    assert q.pop(timeout=0.05) is None
    assert time.monotonic() - start < 2


def test_blocking_pop_wakes_on_add() -> None:
    q = SchedulingQueue()
    got: list[QueuedPodInfo | None] = []
    t = threading.Thread(target=lambda: got.append(q.pop(timeout=5)))
    t.start()
    time.sleep(0.05)
    q.add(pod("a"))
    t.join(5)
    assert not t.is_alive() and got[0] is not None and got[0].key == "ns/a"


def test_blocking_pop_wakes_on_backoff_expiry() -> None:
    q = SchedulingQueue(initial_backoff=0.05)
    q.add(pod("a"))
    info = q.pop(timeout=0)
    assert info is not None
    q.add_unschedulable(info, set())
    start = time.monotonic()
    again = q.pop(timeout=5)
    assert again is not None and 0.03 <= time.monotonic() - start < 1


def test_close_wakes_pop() -> None:
    q = SchedulingQueue()
    got: list[object] = ["unset"]

    def run() -> None:
        got[0] = q.pop(None)

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.05)
    q.close()
    t.join(5)
    assert not t.is_alive() and got[0] is None
    q.add(pod("a"))
    assert q.closed and q.pop(timeout=0) is None


def test_concurrent_producers_and_consumers() -> None:
    q = SchedulingQueue()
    popped: list[str] = []
    lock = threading.Lock()

    def consume() -> None:
        while (info := q.pop(timeout=2)) is not None:
            with lock:
                popped.append(info.key)
            q.done(info.pod)

    def produce(base: int) -> None:
        for i in range(200):
            q.add(pod(f"p{base}-{i}", priority=i % 3))

    consumers = [threading.Thread(target=consume) for _ in range(4)]
    producers = [threading.Thread(target=produce, args=(b,)) for b in range(4)]
    for t in consumers + producers:
        t.start()
    for t in producers:
        t.join()
    deadline = time.monotonic() + 10
    while len(popped) < 800 and time.monotonic() < deadline:
        time.sleep(0.01)
    q.close()
    for t in consumers:
        t.join(5)
    assert sorted(popped) == sorted(f"ns/p{b}-{i}" for b in range(4) for i in range(200))
