"""The JobReservation plugin on koord's gangs, one rule per test (docs/rules/scheduler-jobreservation.md):
the Filter on locked nodes (exact reason, code), the pods it rejected re-activated on release, failed
attempts stamping candidates, elect then reserve per session, resets on ready and gone, the observer's
calls, the koord mapping of pods to Volcano tasks, args, wiring into a profile and into the scheduler's
session loop."""

from __future__ import annotations

import datetime as _dt
from typing import Any, cast

import pytest

from scheduler.cache import SchedulerCache
from scheduler.config import ConfigError, parse_config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import ClusterEvent, FilterAllPlugin, Pod, SessionPlugin
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.jobreservation_events import elected_message, involved, released_message
from scheduler.plugins.coscheduling.plugin import Coscheduling
from scheduler.plugins.jobreservation.args import JobReservationArgs
from scheduler.plugins.jobreservation.jobs import task_status
from scheduler.plugins.jobreservation.plugin import JobRef, JobReservation, reason
from scheduler.queue import SchedulingQueue
from scheduler.registry import KNOWN, build_framework
from scheduler.scheduler import Scheduler

from .._support import make_node
from ..coscheduling._support import gang_pod

T0 = 1_700_000_000.0


class Observer:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def elected(self, job: JobRef) -> None:
        self.calls.append(("elected", job.name, job.pod_group))

    def released(self, job: JobRef, why: str, unlocked: int) -> None:
        self.calls.append(("released", job.name, why, unlocked))

    def locked(self, job: JobRef | None, node: str | None, count: int) -> None:
        self.calls.append(("locked", node, count))


def _pod(name: str, gang: str, min_available: int, *, cpu: str = "1", node: str = "", prio: int = 0) -> Pod:
    pod = gang_pod(name, gang, str(min_available), node=node)
    pod["spec"]["containers"] = [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]
    pod["spec"]["priority"] = prio
    return pod


def _setup() -> tuple[Coscheduling, JobReservation, Observer, list[Pod]]:
    cos = Coscheduling()
    activated: list[Pod] = []
    plugin = JobReservation(JobReservationArgs(), activate=activated.extend)
    plugin.attach(cos)
    observer = Observer()
    plugin.observer = observer
    return cos, plugin, observer, activated


def _snapshot(cpus: dict[str, str]) -> Snapshot:
    return Snapshot.build(
        [make_node(n, allocatable={"cpu": c, "memory": "8Gi", "pods": "110"}) for n, c in cpus.items()]
    )


def _fail(plugin: JobReservation, pod: Pod, at: float) -> None:
    plugin.after_post_filter(CycleState(at), pod, "0/3 nodes are available")


def test_implements_filter_all_session_and_events() -> None:
    plugin = JobReservation()
    assert isinstance(plugin, FilterAllPlugin) and isinstance(plugin, SessionPlugin)
    assert plugin.session_period == 1.0
    assert plugin.events_to_register() == [ClusterEvent("Node", "Add"), ClusterEvent("Pod", "Delete")]


def test_filter_rejects_other_pods_on_locked_nodes_only() -> None:
    _, plugin, _, activated = _setup()
    snap = _snapshot({"a": "4", "b": "4", "c": "4"})
    small, plain, big = (
        _pod("s-0", "small", 1),
        cast(Pod, {"metadata": {"name": "x", "namespace": "default"}}),
        _pod("b-0", "big", 2),
    )
    plugin.target = "default/big"
    assert plugin.filter_all(CycleState(T0), small, snap).passed.all()  # a target, no lock yet
    plugin.locked = frozenset({"b", "gone-node"})
    plugin._version += 1
    for pod in (small, plain):
        res = plugin.filter_all(CycleState(T0), pod, snap)
        assert res.passed.tolist() == [True, False, True]
        st = res.status_of(1)
        assert st.code == Code.UNSCHEDULABLE and st.plugin == "JobReservation"
        assert st.reasons == ('node(s) were reserved for job "default/big"',) == (reason("default/big"),)
    assert plugin.filter_all(CycleState(T0), big, snap).passed.all()
    assert sorted(plugin.rejected) == ["default/s-0", "default/x"]
    plugin.target = None
    plugin._version += 1
    assert plugin.filter_all(CycleState(T0), small, snap).passed.all()
    assert activated == []


def test_first_failed_attempt_stamps_the_gang() -> None:
    _, plugin, _, _ = _setup()
    _fail(plugin, _pod("b-0", "big", 2), T0)
    _fail(plugin, _pod("b-1", "big", 2), T0 + 5)
    _fail(plugin, {"metadata": {"name": "x", "namespace": "default"}}, T0)  # not a gang: nothing
    assert plugin.failed_since == {"default/big": _dt.datetime.fromtimestamp(T0, _dt.UTC)}


def test_session_elects_a_failed_gang_and_locks_one_node_per_session() -> None:
    cos, plugin, observer, _ = _setup()
    for i in range(3):
        cos.on_any_pod_add(_pod(f"b-{i}", "big", 3))
    cos.on_any_pod_add(_pod("w-0", "waiting", 1))  # never failed: not a candidate
    snap = _snapshot({"a": "2", "b": "8", "c": "4"})
    plugin.on_session(snap, T0)
    assert plugin.target is None and observer.calls == [("locked", None, 0)]
    _fail(plugin, _pod("b-0", "big", 3), T0)
    plugin.on_session(snap, T0 + 1)
    assert plugin.target == "default/big" and plugin.locked == {"b"}
    plugin.on_session(snap, T0 + 2)
    plugin.on_session(snap, T0 + 3)
    plugin.on_session(snap, T0 + 4)  # every node locked: nothing more
    assert plugin.locked == {"a", "b", "c"}
    assert observer.calls[1:] == [
        ("elected", "default/big", False), ("locked", "b", 1), ("locked", "c", 2), ("locked", "a", 3),
        ("locked", None, 3),
    ]  # fmt: skip


def test_highest_priority_then_longest_wait_is_elected() -> None:
    cos, plugin, _, _ = _setup()
    for gang, prio in (("low", 1), ("high-late", 5), ("high-early", 5)):
        cos.on_any_pod_add(_pod(f"{gang}-0", gang, 1, prio=0))
        cos.on_any_pod_add(_pod(f"{gang}-1", gang, 1, prio=prio))  # the gang's priority: its highest
    _fail(plugin, _pod("low-0", "low", 1), T0)
    _fail(plugin, _pod("high-late-0", "high-late", 1), T0 + 20)
    _fail(plugin, _pod("high-early-0", "high-early", 1), T0 + 10)
    plugin.on_session(_snapshot({"a": "1"}), T0 + 30)
    assert plugin.target == "default/high-early"


def test_a_gang_with_fewer_pods_than_its_min_is_not_elected() -> None:
    cos, plugin, _, _ = _setup()
    cos.on_any_pod_add(_pod("b-0", "big", 3))
    _fail(plugin, _pod("b-0", "big", 3), T0)
    plugin.on_session(_snapshot({"a": "1"}), T0 + 1)
    assert plugin.target is None


def test_ready_target_is_released_and_rejected_pods_reactivated() -> None:
    cos, plugin, observer, activated = _setup()
    for i in range(2):
        cos.on_any_pod_add(_pod(f"b-{i}", "big", 2))
    _fail(plugin, _pod("b-0", "big", 2), T0)
    snap = _snapshot({"a": "4", "b": "2"})
    plugin.on_session(snap, T0 + 1)
    plugin.on_session(snap, T0 + 2)
    small = _pod("s-0", "small", 1)
    assert not plugin.filter_all(CycleState(T0), small, snap).passed.any()
    for i in range(2):  # bound by the informer: ReadyTaskNum 2 >= 2
        cos.on_any_pod_update(_pod(f"b-{i}", "big", 2), _pod(f"b-{i}", "big", 2, node="a"))
    plugin.on_session(snap, T0 + 3)
    assert plugin.target is None and plugin.locked == frozenset()
    assert ("released", "default/big", "ready", 2) in observer.calls
    assert activated == [small] and plugin.rejected == {}
    assert "default/big" not in plugin.failed_since  # ready: the stamp is dropped
    assert plugin.filter_all(CycleState(T0), small, snap).passed.all()


def test_gone_target_is_released() -> None:
    cos, plugin, observer, _ = _setup()
    pods = [_pod(f"b-{i}", "big", 2) for i in range(2)]
    for pod in pods:
        cos.on_any_pod_add(pod)
    _fail(plugin, pods[0], T0)
    snap = _snapshot({"a": "4"})
    plugin.on_session(snap, T0 + 1)
    assert plugin.locked == {"a"}
    for pod in pods:
        cos.on_any_pod_delete(pod)
    plugin.on_session(snap, T0 + 2)
    assert plugin.target is None and plugin.locked == frozenset()
    assert observer.calls[-2:] == [("released", "default/big", "gone", 1), ("locked", None, 0)]
    assert plugin.failed_since == {}


def test_pending_pod_without_requests_counts_as_ready() -> None:
    cos, plugin, observer, _ = _setup()
    cos.on_any_pod_add(_pod("b-0", "big", 2, node="a"))
    cos.on_any_pod_add(_pod("b-1", "big", 2, cpu="5m"))  # pending, empty InitResreq (cpu < 10m)
    plugin.target = "default/big"
    plugin.on_session(_snapshot({"a": "4"}), T0)
    assert plugin.target is None and observer.calls[0][:3] == ("released", "default/big", "ready")


@pytest.mark.parametrize(
    ("phase", "bound", "waiting", "want"),
    [
        ("Succeeded", True, False, "Succeeded"),
        ("Failed", False, False, "Failed"),
        ("Running", True, False, "Running"),
        ("Pending", True, False, "Bound"),
        ("", False, True, "Allocated"),
        ("", False, False, "Pending"),
    ],
)
def test_task_status_of_a_gang_pod(phase: str, bound: bool, waiting: bool, want: str) -> None:
    pod: Pod = {"metadata": {"name": "p"}, "status": {"phase": phase}}
    assert task_status(pod, bound, waiting) == want


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"sessionPeriodSeconds": 0}, "sessionPeriodSeconds=0: must be in the range"),
        ({"sessionPeriodSeconds": "1s"}, "sessionPeriodSeconds='1s': must be a number"),
        ({"sessionPeriodSeconds": True}, "sessionPeriodSeconds=True"),
        ({"sessionPeriodSeconds": float("inf")}, "sessionPeriodSeconds=inf"),
        ({"period": 1}, "period=1: unknown field"),
    ],
)
def test_bad_args_are_named(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        JobReservationArgs.from_args(args)
    assert JobReservationArgs.from_args({"sessionPeriodSeconds": 0.5}).session_period_seconds == 0.5


def _profile(plugins: dict[str, Any], args: dict[str, Any] | None = None) -> Any:
    profile: dict[str, Any] = {"schedulerName": "s", "plugins": plugins}
    if args is not None:
        profile["pluginConfig"] = [{"name": "JobReservation", "args": args}]
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [profile],
    }
    return parse_config(doc, KNOWN).profiles[0]


def test_enabling_it_without_coscheduling_is_a_config_error() -> None:
    assert "JobReservation" in KNOWN
    with pytest.raises(ConfigError, match="plugin 'JobReservation' needs 'Coscheduling'"):
        build_framework(_profile({"filter": {"enabled": [{"name": "JobReservation"}]}}))
    with pytest.raises(ConfigError, match=r"pluginConfig JobReservation\.args: .*sessionPeriodSeconds=-1"):
        build_framework(
            _profile({"filter": {"enabled": [{"name": "JobReservation"}]}}, {"sessionPeriodSeconds": -1})
        )


def test_wired_with_coscheduling_in_a_profile() -> None:
    plugins = {
        "filter": {"enabled": [{"name": "JobReservation"}]},
        "permit": {"enabled": [{"name": "Coscheduling"}]},
    }
    fw = build_framework(_profile(plugins, {"sessionPeriodSeconds": 2}))
    jr = next(p for p in fw.plugins if isinstance(p, JobReservation))
    cos = next(p for p in fw.plugins if isinstance(p, Coscheduling))
    assert jr.gangs is cos.cache and jr.session_period == 2
    assert fw.sessions == [jr] and jr in fw.filters and jr in fw.after_post_filters


class _Binder:
    def bind(self, pod: Pod, node: str) -> Status:
        return Status.success()


def test_the_scheduler_runs_sessions_once_per_period() -> None:
    cos = Coscheduling()
    jr = JobReservation(JobReservationArgs(3600.0))
    jr.attach(cos)
    sched = Scheduler(Framework([cos, jr]), SchedulerCache(), SchedulingQueue(), _Binder(), bind_workers=0)
    try:
        assert sched.run_sessions() == 1
        assert sched.run_sessions() == 0  # the next one is an hour away
        assert jr.sessions == 1
    finally:
        sched.wait_for_binds()


def test_events_go_to_the_pod_group_or_the_pods() -> None:
    pod = _pod("b-0", "big", 2)
    assert involved(JobRef("ns/big", True, (pod,))) == [
        {
            "kind": "PodGroup",
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "metadata": {"namespace": "ns", "name": "big"},
        }
    ]
    assert involved(JobRef("default/big", False, (pod,))) == [{"kind": "Pod", "apiVersion": "v1", **pod}]
    assert elected_message("ns/big") == 'job "ns/big" elected for node reservation'
    assert (
        released_message("ns/big", "ready", 3)
        == 'node reservation for job "ns/big" released (ready), 3 node(s) unlocked'
    )


def test_a_target_below_its_min_of_valid_pods_is_gone() -> None:
    """Volcano's JobValid: fewer valid (not Failed) tasks than minAvailable drops the job from the session."""
    cos, plugin, observer, _ = _setup()
    pods = [_pod(f"b-{i}", "big", 3) for i in range(3)]
    for pod in pods:
        cos.on_any_pod_add(pod)
    _fail(plugin, pods[0], T0)
    snap = _snapshot({"a": "4", "b": "4"})
    plugin.on_session(snap, T0 + 1)
    assert plugin.target == "default/big"
    failed = _pod("b-2", "big", 3)
    failed["status"] = {"phase": "Failed"}
    cos.on_any_pod_add(failed)  # the cache keeps it; as a Failed task it is not valid
    plugin.on_session(snap, T0 + 2)
    assert plugin.target is None and ("released", "default/big", "gone", 1) in observer.calls
    plugin.on_session(snap, T0 + 3)  # still stamped, but not a job: not elected again
    assert plugin.target is None
