"""scheduler.queue under pod churn: a pod whose attempt failed and which is then deleted, bound by
someone else or scheduled again leaves nothing behind in the queue's bookkeeping (the in-flight
records and the deleted-while-in-flight keys), however many pods come and go."""

from __future__ import annotations

from typing import Any

from scheduler.queue import SchedulingQueue
from scheduler.queuedpod import QueuedPodInfo


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": {"containers": [{"name": "c"}]},
    }


def pop(q: SchedulingQueue) -> QueuedPodInfo:
    info = q.pop(timeout=0)
    assert info is not None
    return info


def bookkeeping(q: SchedulingQueue) -> tuple[dict[str, QueuedPodInfo], set[str]]:
    return q._in_flight, q._deleted_in_flight


def test_failed_then_deleted_pods_leave_no_record() -> None:
    q = SchedulingQueue(clock=FakeClock())
    for i in range(500):
        p = pod(f"p{i}")
        q.add(p)
        info = pop(q)
        q.add_unschedulable(info, {"LoadAwareScheduling"} if i % 2 else set())  # parked, or backoff
        assert q.where(p) in ("unschedulable", "backoff")
        q.delete(p)
    assert q.pending() == {"active": 0, "backoff": 0, "unschedulable": 0}
    assert bookkeeping(q) == ({}, set())


def test_failed_then_bound_elsewhere_leaves_no_record() -> None:
    # The informer sees the pod bound: the router deletes it from the queue.
    q = SchedulingQueue(clock=FakeClock())
    for i in range(200):
        p = pod(f"p{i}")
        q.add(p)
        q.add_unschedulable(pop(q), {"P"})
        q.delete(p)
    assert bookkeeping(q) == ({}, set())


def test_deleted_while_in_flight_then_failed_leaves_no_record() -> None:
    q = SchedulingQueue(clock=FakeClock())
    for i in range(200):
        p = pod(f"p{i}")
        q.add(p)
        info = pop(q)
        q.delete(p)  # deleted while its cycle runs: the failure is dropped
        q.add_unschedulable(info, {"P"})
        assert q.where(p) is None
    assert q.pending() == {"active": 0, "backoff": 0, "unschedulable": 0}
    assert bookkeeping(q) == ({}, set())


def test_failed_then_scheduled_leaves_no_record() -> None:
    clock = FakeClock()
    q = SchedulingQueue(clock=clock)
    for i in range(100):
        q.add(pod(f"p{i}"))
        q.add_unschedulable(pop(q), set())  # an error: backoff
        clock.now += 100
        info = pop(q)
        q.done(info.pod)
    assert bookkeeping(q) == ({}, set())


def test_requeued_while_in_flight_still_ends_the_attempt() -> None:
    q = SchedulingQueue(clock=FakeClock())
    q.add(pod("a"))
    info = pop(q)
    q.add(pod("a"))  # re-added by the informer while in flight: the failure is ignored
    q.add_unschedulable(info, {"P"})
    assert q.pending() == {"active": 1, "backoff": 0, "unschedulable": 0}
    assert bookkeeping(q) == ({}, set())
    again = pop(q)
    assert bookkeeping(q)[0] == {"ns/a": again}  # the new attempt is in flight
    q.done(again.pod)
    assert bookkeeping(q) == ({}, set())
