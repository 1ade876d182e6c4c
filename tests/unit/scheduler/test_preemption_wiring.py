"""DefaultPreemption and nominated pods wired into koord-scheduler
(docs/rules/scheduler-preemption.md#nominated-pods): the registry builds and attaches the plugin from
the handle; the event router keeps NominatedPods current and every Filter counts them; the Preemptor
nominates at once and withdraws the nomination when a victim cannot be deleted."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from scheduler.cache import SchedulerCache
from scheduler.config import ConfigError, parse_config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.nominated import NominatedPods
from scheduler.framework.runtime import ScheduleResult
from scheduler.framework.status import Status
from scheduler.gateway import EventRouter, Preemptor
from scheduler.plugins.defaultpreemption import DefaultPreemption, InMemoryPreemptionAPI, PreemptionResult
from scheduler.queue import SchedulingQueue
from scheduler.registry import KNOWN, Handle, build_framework, default_profile
from scheduler.scheduler import Scheduler

NOW = 1000.0


def _node(name: str, cpu: str) -> Any:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}, "spec": {},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}}  # fmt: skip


def _pod(name: str, cpu: str, prio: int, node: str = "", **status: str) -> Any:
    spec: dict[str, Any] = {
        "schedulerName": "default-scheduler",
        "priority": prio,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
    }
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "ns", "uid": name}, "spec": spec, "status": dict(status)}


class _Binder:
    def __init__(self) -> None:
        self.bound: dict[str, str] = {}

    def bind(self, pod: dict[str, Any], node: str) -> Status:
        self.bound[pod["metadata"]["name"]] = node
        return Status.success()


def _queue() -> SchedulingQueue:
    """No backoff: a parked pod moved back is popped again at once under the fixed clock."""
    return SchedulingQueue(clock=lambda: NOW, initial_backoff=0, max_backoff=0)


def _world(*nodes: dict[str, Any]) -> tuple[Scheduler, EventRouter, _Binder]:
    handle = Handle(clock=lambda: NOW, nominated=NominatedPods(), rng=random.Random(0))
    fw = build_framework(default_profile(), handle)
    binder = _Binder()
    sched = Scheduler(fw, SchedulerCache(clock=lambda: NOW), _queue(), binder,
                      clock=lambda: NOW, bind_workers=0)  # fmt: skip
    router = EventRouter(sched, "default-scheduler")
    for n in nodes:
        router.node_add(n)
    return sched, router, binder


def test_the_registry_builds_and_attaches_default_preemption() -> None:
    nominated = NominatedPods()
    fw = build_framework(default_profile(), Handle(nominated=nominated))
    found = [p for p in fw.post_filters if isinstance(p, DefaultPreemption)]
    assert len(found) == 1 and found[0].framework is fw and found[0].nominated is nominated
    assert fw.nominated is nominated
    doc = {"profiles": [{"schedulerName": "s", "pluginConfig": [
        {"name": "DefaultPreemption", "args": {"minCandidateNodesPercentage": 200}}]}]}  # fmt: skip
    with pytest.raises(ConfigError, match=r"DefaultPreemption\.args: .*minCandidateNodesPercentage=200"):
        build_framework(parse_config(doc, KNOWN).profiles[0])


def test_nominated_pods_follow_the_pod_events_and_count_in_filters() -> None:
    sched, router, binder = _world(_node("a", "2"))
    high = _pod("high", "1500m", 100, nominatedNodeName="a")
    router.pod_add(high)
    assert sched.nominated.for_node("a") == [high]
    low = _pod("low", "1", 0)
    router.pod_add(low)
    sched.queue.delete(high)  # only low is attempted
    assert sched.schedule_one(timeout=0)
    assert "low" not in binder.bound  # high's 1.5 cpu on a leave 0.5
    assert sched.queue.pending()  # parked, not lost
    # high bound elsewhere (by the informer): the nomination goes, low fits
    router.pod_update(high, {**high, "spec": {**high["spec"], "nodeName": "a"}})
    assert len(sched.nominated) == 0
    router.pod_delete({**high, "spec": {**high["spec"], "nodeName": "a"}})
    sched.queue.flush_unschedulable(max_age=-1)
    assert sched.schedule_one(timeout=0) and binder.bound == {"low": "a"}


def test_a_pending_pod_deleted_or_updated_keeps_nominations_current() -> None:
    sched, router, _ = _world(_node("a", "2"))
    p = _pod("p", "1", 5, nominatedNodeName="a")
    router.pod_add(p)
    moved = {**p, "status": {"nominatedNodeName": "b"}}
    router.pod_update(p, moved)
    assert sched.nominated.nodes() == ["b"]
    router.pod_delete(moved)
    assert len(sched.nominated) == 0


def _preempting(sched: Scheduler) -> tuple[Any, CycleState]:
    victim = _pod("victim", "2", 0, "a")
    state = CycleState(NOW)
    state.write("DefaultPreemption/result", PreemptionResult("a", (victim,)))
    return _pod("high", "2", 100), state


def test_the_preemptor_nominates_at_once_and_deletes_off_thread() -> None:
    sched, _, _ = _world(_node("a", "2"))
    api = InMemoryPreemptionAPI()
    with ThreadPoolExecutor(1) as pool:
        pre = Preemptor(sched, api, pool)
        pod, state = _preempting(sched)
        pre(pod, state, ScheduleResult(None, Status.unschedulable("x")))
        assert sched.nominated.for_node("a") == [pod]  # before the API calls
    assert api.deleted == ["ns/victim"] and api.nominations == [("ns/high", "a")]
    assert pre.nominated == {"ns/high": "a"} and len(sched.nominated) == 1


def test_a_failed_victim_deletion_withdraws_the_nomination() -> None:
    sched, _, _ = _world(_node("a", "2"))
    api = InMemoryPreemptionAPI(fail_delete={"ns/victim"})
    pre = Preemptor(sched, api)
    pod, state = _preempting(sched)
    pre(pod, state, ScheduleResult(None, Status.unschedulable("x")))
    assert len(sched.nominated) == 0 and pre.nominated == {"ns/high": None} and api.nominations == []
