"""The scheduling loop with the real queue and cache: bind, unschedulable then rescued by an event,
a failed or raising bind rolled back and retried, and a pod bound by someone else after the pop skipped."""

from __future__ import annotations

import threading
from typing import Any

from scheduler.cache import SchedulerCache
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import ClusterEvent
from scheduler.framework.runtime import Framework
from scheduler.framework.status import Code, Status
from scheduler.queue import SchedulingQueue
from scheduler.scheduler import Decision, Scheduler
from tests.unit.scheduler.test_runtime import CPUScore, NeedsLabel, node


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": name}, "spec": {"containers": []}}


class RecordingBinder:
    def __init__(self, fail_first: int = 0) -> None:
        self.bound: list[tuple[str, str]] = []
        self.fail_left = fail_first
        self.lock = threading.Lock()

    def bind(self, p: dict[str, Any], node_name: str) -> Status:
        with self.lock:
            if self.fail_left > 0:
                self.fail_left -= 1
                return Status.error("apiserver said no", plugin="DefaultBinder")
            self.bound.append((p["metadata"]["name"], node_name))
        return Status.success()


class ReserveLog:
    def __init__(self) -> None:
        self.log: list[str] = []

    @property
    def name(self) -> str:
        return "ReserveLog"

    def reserve(self, state: CycleState, p: dict[str, Any], node_name: str) -> Status:
        self.log.append(f"+{p['metadata']['name']}@{node_name}")
        return Status.success()

    def unreserve(self, state: CycleState, p: dict[str, Any], node_name: str) -> None:
        self.log.append(f"-{p['metadata']['name']}@{node_name}")


def make(binder: RecordingBinder, *plugins: Any) -> tuple[Scheduler, list[Decision], list[str]]:
    decisions: list[Decision] = []
    unsched: list[str] = []
    cache = SchedulerCache()
    queue = SchedulingQueue(initial_backoff=0.01, max_backoff=0.02)
    s = Scheduler(
        Framework(list(plugins)), cache, queue, binder,
        on_decision=decisions.append, on_unschedulable=lambda p, st: unsched.append(st.message()),
    )  # fmt: skip
    return s, decisions, unsched


def test_pods_are_scheduled_bound_and_assumed() -> None:
    binder = RecordingBinder()
    s, decisions, _ = make(binder, CPUScore())
    s.cache.add_node(node("small", "2"))
    s.cache.add_node(node("big", "16"))
    for k in range(3):
        s.queue.add(pod(f"p{k}"))
    for _ in range(3):
        assert s.schedule_one(timeout=1)
    s.wait_for_binds()
    assert sorted(binder.bound) == [("p0", "big"), ("p1", "big"), ("p2", "big")]
    assert [d.node for d in decisions] == ["big"] * 3
    assert all(s.cache.is_assumed(pod(f"p{k}") | {"spec": {"nodeName": "big"}}) for k in range(3))


def test_unschedulable_pod_waits_for_a_relevant_event() -> None:
    binder = RecordingBinder()
    s, _, unsched = make(binder, NeedsLabel("gpu", name="NeedsGPU"))
    s.cache.add_node(node("a"))
    s.queue.add(pod("p"))
    assert s.schedule_one(timeout=1)
    assert unsched == ["0/1 nodes are available: 1 node(s) lack label gpu."]
    assert s.queue.pending()["unschedulable"] == 1
    s.cache.add_node(node("b", labels={"gpu": "1"}))
    s.on_event(ClusterEvent("Node", "Add"))
    assert s.schedule_one(timeout=2)
    s.wait_for_binds()
    assert binder.bound == [("p", "b")]


def test_a_failed_bind_is_rolled_back_and_retried() -> None:
    binder = RecordingBinder(fail_first=1)
    log = ReserveLog()
    s, decisions, _ = make(binder, CPUScore(), log)
    s.cache.add_node(node("a"))
    s.queue.add(pod("p"))
    assert s.schedule_one(timeout=1)
    assert s.drain_binds(timeout=5)  # let the failing bind finish before the retry
    assert decisions[0].node is None and decisions[0].status.plugin == "DefaultBinder"
    assert log.log == ["+p@a", "-p@a"]
    assert not s.cache.is_assumed(pod("p") | {"spec": {"nodeName": "a"}})
    assert s.schedule_one(timeout=2)  # back from backoff
    s.wait_for_binds()
    assert binder.bound == [("p", "a")]
    assert log.log == ["+p@a", "-p@a", "+p@a"]


def test_inline_binding_for_in_process_binders() -> None:
    binder = RecordingBinder()
    s = Scheduler(Framework([CPUScore()]), SchedulerCache(), SchedulingQueue(), binder, bind_workers=0)
    s.cache.add_node(node("a"))
    s.queue.add(pod("p"))
    assert s.schedule_one(timeout=1)
    assert binder.bound == [("p", "a")]  # bound before schedule_one returned


class Gate:
    """Permit plugin: WAIT for pods named wait-*, reject pods named no-*, allow the rest."""

    @property
    def name(self) -> str:
        return "Gate"

    def permit(self, state: CycleState, p: dict[str, Any], node_name: str) -> tuple[Status, float]:
        name = p["metadata"]["name"]
        if name.startswith("wait-"):
            return Status(Code.WAIT), 0.3
        if name.startswith("no-"):
            return Status.unschedulable("gate closed"), 0.0
        return Status.success(), 0.0


def test_permit_wait_allow_timeout_and_reject() -> None:
    binder = RecordingBinder()
    log = ReserveLog()
    s, decisions, _ = make(binder, CPUScore(), log, Gate())
    s.cache.add_node(node("a"))
    for name in ("wait-allowed", "wait-timeout", "no-entry"):
        s.queue.add(pod(name))
    for _ in range(3):
        assert s.schedule_one(timeout=1)
    assert set(s.waiting) == {"ns/wait-allowed", "ns/wait-timeout"}
    s.waiting["ns/wait-allowed"].allow()
    assert s.drain_binds(timeout=5)
    assert binder.bound == [("wait-allowed", "a")]
    assert not s.waiting
    by_pod = {d.pod: d for d in decisions}
    assert "timeout" in by_pod["ns/wait-timeout"].status.message()
    assert by_pod["ns/no-entry"].status.message() == "gate closed"
    assert sorted(x for x in log.log if x.startswith("-")) == ["-no-entry@a", "-wait-timeout@a"]
    assert s.queue.pending()["unschedulable"] == 2


class Nominator:
    @property
    def name(self) -> str:
        return "Nominator"

    def post_filter(
        self, state: CycleState, p: dict[str, Any], snapshot: Any, statuses: dict[str, Status]
    ) -> Status:
        return Status(Code.SUCCESS, (sorted(statuses)[0],))


def test_post_filter_runs_when_nothing_fits() -> None:
    from scheduler.framework.snapshot import Snapshot

    fw = Framework([NeedsLabel("x"), Nominator()])
    res = fw.schedule(CycleState(0), pod("p"), Snapshot.build([node("b"), node("a")]))
    assert res.node is None and res.nominated == "a"


def test_a_pod_bound_by_someone_else_after_the_pop_is_skipped() -> None:
    binder = RecordingBinder()
    log = ReserveLog()
    s, decisions, unsched = make(binder, CPUScore(), log)
    s.cache.add_node(node("a"))
    s.cache.add_node(node("b", "16"))
    s.queue.add(pod("p"))
    qpi = s.queue.pop(timeout=1)
    assert qpi is not None
    bound = pod("p") | {"spec": {"containers": [], "nodeName": "a"}}
    s.queue.delete(pod("p"))  # what the informer does when it sees the pod bound
    s.cache.add_pod(bound)
    s.schedule_pod(qpi)  # would assume it on b (more room): the cache already has it on a
    assert s.drain_binds(timeout=5)
    assert binder.bound == [] and unsched == []
    assert decisions[0].node is None and "already in the scheduler cache" in decisions[0].status.message()
    assert log.log == ["+p@b", "-p@b"]
    assert s.cache.get_pod(bound) == bound and not s.cache.is_assumed(bound)
    assert s.queue.where(pod("p")) is None


class RaisingBinder(RecordingBinder):
    """Raises on its first bind, as the API binder's client does when the API server refuses."""

    def bind(self, p: dict[str, Any], node_name: str) -> Status:
        if not self.bound and self.fail_left > 0:
            self.fail_left -= 1
            raise ConnectionRefusedError("[Errno 111] Connection refused")
        return super().bind(p, node_name)


def test_a_bind_that_raises_is_rolled_back_and_retried() -> None:
    binder = RaisingBinder(fail_first=1)
    log = ReserveLog()
    s, decisions, _ = make(binder, CPUScore(), log)
    s.cache.add_node(node("a"))
    s.queue.add(pod("p"))
    assert s.schedule_one(timeout=1)
    assert s.drain_binds(timeout=5)
    assert decisions[0].node is None and "Connection refused" in decisions[0].status.message()
    assert log.log == ["+p@a", "-p@a"]  # not lost: rolled back and queued again
    assert s.queue.where(pod("p")) == "backoff"
    assert s.schedule_one(timeout=2)
    s.wait_for_binds()
    assert binder.bound == [("p", "a")]
