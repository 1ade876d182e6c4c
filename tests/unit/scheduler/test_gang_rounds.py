"""A gang short of room through the real Scheduler and queue (docs/rules/scheduler-coscheduling.md#wiring,
docs/rules/scheduler-coscheduling.md#queue-ordering): every member is attempted in one round; NonStrict
holds the members that fit until NextPod finds none left, then rejects them with `all pending pods is
already been attempted` while the member that did not fit reports its FitError; Strict rejects the held
members as soon as one fails. And an activation that reaches the queue while the activated pod is in
flight (PreEnqueue refusing it, or its attempt failing) is not lost (docs/architecture.md#gated-pods)."""

from __future__ import annotations

from typing import Any

from apis.podgroup import ANNOTATION_GANG_MODE, parse_pod_group
from scheduler.cache import SchedulerCache
from scheduler.framework.interfaces import Pod
from scheduler.framework.runtime import Framework
from scheduler.framework.status import Code, Status
from scheduler.framework.waiting import WaitingPodMap
from scheduler.plugins.coscheduling.decisions import REASON_ALL_PENDING_ATTEMPTED
from scheduler.plugins.coscheduling.plugin import Coscheduling
from scheduler.plugins.noderesources import NodeResourcesFit
from scheduler.queue import SchedulingQueue
from scheduler.scheduler import Scheduler
from tests.unit.scheduler.test_scheduler import RecordingBinder, pod

FIT_ERROR = "0/1 nodes are available: 1 Insufficient cpu."


def _member(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": name,
                     "labels": {"pod-group.scheduling.sigs.k8s.io": "held"}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
    }  # fmt: skip


def _pod_group(mode: str, min_member: int = 3, phase: str = "") -> Any:
    return parse_pod_group({
        "metadata": {"name": "held", "namespace": "ns", "annotations": {ANNOTATION_GANG_MODE: mode}},
        "spec": {"minMember": min_member, "scheduleTimeoutSeconds": 600},
        "status": {"phase": phase} if phase else {},
    })  # fmt: skip


class _World:
    """One 2-CPU node, a 3-member gang of 1-CPU pods, Coscheduling wired as koord-scheduler wires it."""

    def __init__(self, cos: Coscheduling | None = None) -> None:
        self.waiting = WaitingPodMap()
        self.queue = SchedulingQueue(initial_backoff=5, max_backoff=5)  # no retry within a test
        self.cos = cos or Coscheduling(waiting=self.waiting, activate=self.queue.activate)
        self.cos.waiting, self.cos.activate = self.waiting, self.queue.activate
        self.failed: dict[str, Status] = {}
        self.binder = RecordingBinder()
        self.s = Scheduler(
            Framework([NodeResourcesFit(), self.cos]), SchedulerCache(), self.queue, self.binder,
            waiting=self.waiting, on_unschedulable=self._failed,
        )  # fmt: skip
        allocatable = {"cpu": "2", "memory": "8Gi", "pods": "110"}
        self.s.cache.add_node({"metadata": {"name": "n"}, "status": {"allocatable": allocatable}})
        self.pods = [_member(f"held-{i}") for i in range(3)]

    def _failed(self, p: Pod, st: Status) -> None:
        self.failed[p["metadata"]["name"]] = st

    def arrive(self) -> None:
        """As the informer delivers a pod: the gang plugins first, then the queue."""
        for p in self.pods:
            self.cos.on_any_pod_add(p)
            self.queue.add(p)

    def held(self) -> list[str]:
        with self.s.lock:
            return sorted(w.pod["metadata"]["name"] for w in self.waiting.values())

    def close(self) -> None:
        for w in list(self.waiting.values()):
            w.reject("", "test over")
        assert self.s.drain_binds(timeout=5)
        self.s.wait_for_binds()


def _round(world: _World) -> list[list[str]]:
    """Schedules until a cycle pops nothing; the pods held after each cycle."""
    held = []
    while world.s.schedule_one(timeout=0.05):
        held.append(world.held())
    assert world.s.drain_binds(timeout=5)
    return held


def test_nonstrict_attempts_every_member_and_holds_those_that_fit_until_the_round_ends() -> None:
    world = _World()
    world.cos.on_pod_group(None, _pod_group("NonStrict"))
    world.arrive()
    try:
        held = _round(world)
        # held-0 popped, held-1 and held-2 brought by NextPod: two fit and wait, the third fails and
        # AfterPostFilter rejects nothing; the next NextPod finds no member left and rejects the two.
        assert held[:3] == [["held-0"], ["held-0", "held-1"], ["held-0", "held-1"]]
        assert world.held() == [] and world.binder.bound == []
        assert world.failed["held-2"].message() == FIT_ERROR
        assert world.failed["held-2"].code == Code.UNSCHEDULABLE
        for name in ("held-0", "held-1"):
            assert world.failed[name].message() == REASON_ALL_PENDING_ATTEMPTED
        assert world.cos.context is None and not world.s.cache._assumed
        gang = world.cos.cache.get("ns/held")
        assert gang is not None and sorted(gang.pending) == ["ns/held-0", "ns/held-1", "ns/held-2"]
    finally:
        world.close()


def test_strict_rejects_the_held_members_when_one_fails() -> None:
    world = _World()
    world.cos.on_pod_group(None, _pod_group("Strict"))
    world.arrive()
    try:
        held = _round(world)
        assert held[:2] == [["held-0"], ["held-0", "held-1"]]
        assert world.held() == [] and world.binder.bound == []
        assert world.failed["held-2"].message() == FIT_ERROR
        rejection = (
            'GangGroup "ns/held" gets rejected due to member Pod "ns/held-2" is unschedulable with reason '
            f'"{FIT_ERROR}", alreadyWaitForBound: 2'
        )
        for name in ("held-0", "held-1"):
            assert world.failed[name].message() == rejection
    finally:
        world.close()


class _LatePodGroup(Coscheduling):
    """Delivers the PodGroup as the informer may: after PreEnqueue refused a pod (`gang has not init`)
    and before the scheduler parks it gated."""

    def __init__(self) -> None:
        super().__init__()
        self.late: Any = None

    def pre_enqueue(self, p: Pod) -> Status:
        st = super().pre_enqueue(p)
        if self.late is not None and not st.is_success():
            pg, self.late = self.late, None
            self.on_pod_group(None, pg)  # activates a pending member: this very pod, in flight
        return st


def test_a_pod_group_arriving_while_its_pod_is_refused_still_starts_the_round() -> None:
    cos = _LatePodGroup()
    world = _World(cos)
    for p in world.pods:  # the gang cache learns them in order, the queue pops them in reverse
        cos.on_any_pod_add(p)
    for p in reversed(world.pods):
        world.queue.add(p)
    assert world.s.schedule_one(timeout=0.05)  # held-2: gang has not init
    assert world.s.schedule_one(timeout=0.05)  # held-1: likewise
    cos.late = _pod_group("NonStrict")
    assert world.s.schedule_one(timeout=0.05)  # held-0 refused; the PodGroup activates it meanwhile
    assert world.queue.where(world.pods[0]) == "active"  # parked for 300 s without the fix
    try:
        held = _round(world)
        assert held[:2] == [["held-0"], ["held-0", "held-1"]]
        assert world.failed["held-2"].message() == FIT_ERROR
    finally:
        world.close()


def test_an_activation_of_a_pod_in_flight_takes_effect_when_it_comes_back() -> None:
    q = SchedulingQueue(initial_backoff=50, max_backoff=50)
    q.add(pod("a"))
    q.add(pod("b"))
    a, b = q.pop(0), q.pop(0)
    assert a is not None and b is not None
    assert q.activate([pod("a"), pod("b")]) == 0  # both in flight: nothing moves now
    q.gate(a, "Gate")
    q.add_unschedulable(b, {"NodeResourcesFit"})
    assert (q.where(pod("a")), q.where(pod("b"))) == ("active", "active")
    a, b = q.pop(0), q.pop(0)
    assert a is not None and b is not None and not a.activated_in_flight
    q.gate(a, "Gate")  # no activation this time: parked as before
    q.add_unschedulable(b, {"NodeResourcesFit"})
    assert (q.where(pod("a")), q.where(pod("b"))) == ("unschedulable", "unschedulable")


def test_only_a_pod_group_update_that_completes_the_gang_activates_a_member() -> None:
    activated: list[list[str]] = []
    cos = Coscheduling(activate=lambda pods: activated.append([p["metadata"]["name"] for p in pods]))
    pg = _pod_group("NonStrict")
    cos.on_pod_group(None, pg)
    for p in [_member(f"held-{i}") for i in range(3)]:
        cos.on_any_pod_add(p)
    assert activated == [["held-0"]]  # the third pod completed the gang
    status_patched = _pod_group("NonStrict", phase="Scheduling")
    cos.on_pod_group(pg, status_patched)  # the status controller's patch: already worth requeueing
    assert activated == [["held-0"]]
    four = _pod_group("NonStrict", min_member=4, phase="Scheduling")
    cos.on_pod_group(status_patched, four)  # now short of a member
    assert activated == [["held-0"]]
    cos.on_pod_group(four, status_patched)  # back to 3: this update completes it again
    assert activated == [["held-0"], ["held-0"]]
