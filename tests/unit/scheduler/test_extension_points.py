"""The points around the cycle (docs/architecture.md#gated-pods) and held pods
(docs/architecture.md#waiting-pods): PreEnqueue gates popped pods without counting an attempt and
`activate` brings them back; NextPod's pod is taken ahead of the queue's head; BeforePreFilter rejects
like a PreFilter; AfterPostFilter runs whatever PostFilter answered; a pod several Permit plugins hold
waits for each one's allow; and Coscheduling through the real Scheduler binds a gang together with its
bind annotations, or rejects it together."""

from __future__ import annotations

import time
from typing import Any

from apis.podgroup import ANNOTATION_BIND_GANG_MEMBER_COUNT, parse_pod_group
from scheduler.cache import SchedulerCache
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Pod
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.framework.waiting import WaitingPod, WaitingPodMap
from scheduler.plugins.coscheduling.plugin import Coscheduling
from scheduler.plugins.noderesources import NodeResourcesFit
from scheduler.queue import SchedulingQueue
from scheduler.scheduler import Scheduler
from tests.unit.scheduler.test_runtime import node
from tests.unit.scheduler.test_scheduler import RecordingBinder, pod


class Gate:
    """PreEnqueue: refuses pods whose name is in `closed`."""

    name = "Gate"

    def __init__(self) -> None:
        self.closed: set[str] = set()

    def pre_enqueue(self, p: Pod) -> Status:
        if p["metadata"]["name"] in self.closed:
            return Status.unresolvable("gated")
        return Status.success()


def test_a_gated_pod_waits_without_an_attempt_until_activated() -> None:
    gate = Gate()
    gate.closed.add("a")
    s = Scheduler(Framework([gate]), SchedulerCache(), SchedulingQueue(), RecordingBinder(), bind_workers=0)
    s.cache.add_node(node("n"))
    s.queue.add(pod("a"))
    assert s.schedule_one(timeout=1)
    assert s.queue.where(pod("a")) == "unschedulable"
    assert s.queue.pending()["unschedulable"] == 1
    assert s.schedule_one(timeout=0.05) is False  # nothing active: no retry on its own
    gate.closed.clear()
    assert s.queue.activate([pod("a"), pod("unknown")]) == 1
    assert s.schedule_one(timeout=1)
    assert isinstance(s.binder, RecordingBinder) and s.binder.bound == [("a", "n")]


def test_a_gated_pod_is_not_backed_off_when_an_event_moves_it() -> None:
    clock = [100.0]
    q = SchedulingQueue(clock=lambda: clock[0], initial_backoff=50, max_backoff=50)
    q.add(pod("a"))
    info = q.pop(0)
    assert info is not None and info.attempts == 1
    q.gate(info, "Gate")
    assert info.attempts == 0 and info.gated
    from scheduler.framework.interfaces import ClusterEvent

    assert q.move_to_active_or_backoff(ClusterEvent("Node", "Add"), {}) == 1
    assert q.where(pod("a")) == "active"  # not backoffQ, though the backoff is 50 s


class Offer:
    """NextPod: offers the pods of `offers` in order."""

    name = "Offer"

    def __init__(self, *offers: Pod) -> None:
        self.offers = list(offers)

    def next_pod(self) -> Pod | None:
        return self.offers.pop(0) if self.offers else None


def test_next_pod_is_taken_ahead_of_the_head() -> None:
    binder = RecordingBinder()
    s = Scheduler(
        Framework([Offer(pod("late"))]), SchedulerCache(), SchedulingQueue(), binder, bind_workers=0
    )
    s.cache.add_node(node("n"))
    s.queue.add(pod("early"))
    s.queue.add(pod("late"))
    assert s.schedule_one(timeout=1) and s.schedule_one(timeout=1)
    assert binder.bound == [("late", "n"), ("early", "n")]
    assert s.queue.pending() == {"active": 0, "backoff": 0, "unschedulable": 0}


class Around:
    name = "Around"

    def __init__(self) -> None:
        self.after: list[tuple[str, str]] = []

    def before_pre_filter(self, state: CycleState, p: Pod) -> Status:
        return Status.unresolvable("not now") if p["metadata"]["name"] == "no" else Status.success()

    def after_post_filter(self, state: CycleState, p: Pod, fit_error: str) -> Status:
        self.after.append((p["metadata"]["name"], fit_error))
        return Status.unschedulable()


def test_before_pre_filter_rejects_like_a_pre_filter_and_after_post_filter_hears_the_fit_error() -> None:
    around = Around()
    fw = Framework([around])
    snap = Snapshot()
    cache = SchedulerCache()
    cache.add_node(node("n"))
    cache.update_snapshot(snap)
    result = fw.schedule(CycleState(0), pod("no"), snap)
    assert result.node is None
    assert result.status.message() == "0/1 nodes are available: 1 not now."
    assert result.rejections.plugins() == {"Around"}
    assert around.after == [("no", "0/1 nodes are available: 1 not now.")]
    assert fw.schedule(CycleState(0), pod("yes"), snap).node == "n"
    assert len(around.after) == 1  # a pod that found a node never reaches AfterPostFilter


def test_a_pod_held_by_two_plugins_waits_for_both_allows() -> None:
    w = WaitingPod(pod("p"), "n", {"A": 5.0, "B": 5.0})
    w.allow("A")
    assert w.pending_plugins == ["B"]
    w.allow("A")  # a second allow of the same plugin does not count
    assert not w._done.is_set()
    w.allow("B")
    assert w.wait().is_success()
    rejected = WaitingPod(pod("q"), "n", {"A": 5.0, "B": 5.0})
    rejected.allow("A")
    rejected.reject("B", "no room")
    assert (rejected.wait().code, rejected.wait().message(), rejected.wait().plugin) == (
        Code.UNSCHEDULABLE, "no room", "B"
    )  # fmt: skip
    t0 = time.monotonic()
    late = WaitingPod(pod("r"), "n", {"A": 0.05, "B": 5.0})
    st = late.wait()
    assert st.plugin == "A" and "timeout" in st.message() and time.monotonic() - t0 < 2


def _gang_pod(name: str, cpu: str = "1") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": name,
                     "labels": {"pod-group.scheduling.sigs.k8s.io": "g"}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
    }  # fmt: skip


def _gang_world(
    cpus: str, members: int
) -> tuple[Scheduler, Coscheduling, RecordingBinder, list[dict[str, Any]]]:
    waiting = WaitingPodMap()
    queue = SchedulingQueue(initial_backoff=0.01, max_backoff=0.02)
    cos = Coscheduling(waiting=waiting, activate=queue.activate)
    binder = RecordingBinder()
    s = Scheduler(Framework([NodeResourcesFit(), cos]), SchedulerCache(), queue, binder, waiting=waiting)
    s.cache.add_node(
        {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": cpus, "memory": "8Gi", "pods": "110"}}}
    )
    group = {
        "metadata": {"name": "g", "namespace": "ns"},
        "spec": {"minMember": members, "scheduleTimeoutSeconds": 1},
    }
    cos.on_pod_group(None, parse_pod_group(group))
    pods = [_gang_pod(f"g-{i}") for i in range(members)]
    return s, cos, binder, pods


def test_a_gang_binds_together_with_its_annotations() -> None:
    s, cos, binder, pods = _gang_world("3", 3)
    annotated: list[str] = []
    inner = binder.bind

    def bind(p: dict[str, Any], node_name: str) -> Status:
        annotated.append((p["metadata"].get("annotations") or {}).get(ANNOTATION_BIND_GANG_MEMBER_COUNT, ""))
        return inner(p, node_name)

    binder.bind = bind  # type: ignore[method-assign]
    for p in pods[:2]:
        cos.on_any_pod_add(p)
        s.queue.add(p)
    s.schedule_one(timeout=0.2)  # short of members: PreEnqueue gates it
    assert s.queue.pending()["unschedulable"] == 1 and not s.waiting
    cos.on_any_pod_add(pods[2])  # the gang is complete: one member is activated
    s.queue.add(pods[2])
    for _ in range(3):
        assert s.schedule_one(timeout=1)
    assert s.drain_binds(timeout=5)
    assert sorted(b[0] for b in binder.bound) == ["g-0", "g-1", "g-2"]
    assert annotated == ["3", "3", "3"]
    assert not s.waiting and all(
        "annotations" not in p["metadata"] for p in pods
    )  # informer objects untouched
    s.wait_for_binds()


def test_a_gang_without_room_is_rejected_together() -> None:
    s, cos, binder, pods = _gang_world("2", 3)
    for p in pods:
        cos.on_any_pod_add(p)
        s.queue.add(p)
    for _ in range(4):
        s.schedule_one(timeout=0.2)
    assert s.drain_binds(timeout=5)
    assert binder.bound == [] and not s.waiting and not s.cache._assumed
    s.wait_for_binds()
