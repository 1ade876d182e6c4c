"""scheduler.gateway.EventRouter under pod churn: a pod the scheduler assumed (Reserve, bind) that is
deleted before the informer saw it bound (a relist finds it gone, last known pending) leaves nothing
behind: not in the scheduler cache, not in LoadAwareScheduling's assign cache, not in the queue."""

from __future__ import annotations

import threading
from typing import Any

from scheduler.cache import SchedulerCache
from scheduler.framework.runtime import Framework
from scheduler.framework.status import Status
from scheduler.gateway import EventRouter
from scheduler.plugins.loadaware.plugin import LoadAwareScheduling
from scheduler.queue import SchedulingQueue
from scheduler.scheduler import Scheduler

SCHEDULER = "koord-scheduler"


def node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {}},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
    }


def pod(i: int) -> dict[str, Any]:
    meta = {"name": f"soak-{i}", "namespace": "demo", "uid": f"uid-{i}", "resourceVersion": "1"}
    container = {"name": "c", "resources": {"requests": {"cpu": "10m", "memory": "8Mi"}}}
    return {"metadata": meta, "spec": {"schedulerName": SCHEDULER, "containers": [container]}}


class Binder:
    def __init__(self) -> None:
        self.bound: list[str] = []
        self.lock = threading.Lock()

    def bind(self, p: dict[str, Any], node_name: str) -> Status:
        with self.lock:
            self.bound.append(p["metadata"]["name"])
        return Status.success()


def test_assumed_pods_deleted_before_the_informer_saw_them_bound_leave_nothing() -> None:
    plugin = LoadAwareScheduling()
    s = Scheduler(Framework([plugin]), SchedulerCache(), SchedulingQueue(), Binder(), bind_workers=0)
    router = EventRouter(s, SCHEDULER)
    router.node_add(node("n1"))
    for i in range(100):
        p = pod(i)
        router.pod_add(p)  # pending
        assert s.schedule_one(timeout=1)
        assert s.cache.is_assumed(p["metadata"]["namespace"] + "/" + p["metadata"]["name"])
        router.pod_delete(p)  # the last state the informer knew: pending
    assert s.cache.list_pods() == []
    assert plugin.assign.objects == {} and plugin.assign.node_of == {} and plugin.assign.pods == {}
    assert s.queue.pending() == {"active": 0, "backoff": 0, "unschedulable": 0}
    assert s.queue.where(pod(0)) is None


def test_a_recreated_pod_of_the_same_name_is_not_dropped_by_the_old_ones_delete() -> None:
    plugin = LoadAwareScheduling()
    s = Scheduler(Framework([plugin]), SchedulerCache(), SchedulingQueue(), Binder(), bind_workers=0)
    router = EventRouter(s, SCHEDULER)
    router.node_add(node("n1"))
    new = pod(1)
    router.pod_add(new)
    assert s.schedule_one(timeout=1)
    old = pod(1)
    old["metadata"]["uid"] = "uid-of-an-earlier-pod"
    router.pod_delete(old)  # late news about an earlier pod of that name
    assert s.cache.is_assumed("demo/soak-1")
    assert list(plugin.assign.objects) == ["uid-1"]
