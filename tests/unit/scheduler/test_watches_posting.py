"""scheduler.watches wires the informers as docs/architecture.md#informer-mailbox says: while another
thread holds the scheduler's lock (a cycle), the pod, node and NodeMetric informers' handlers return at
once instead of waiting, and what they delivered is applied, in order, when the holder lets go."""

from __future__ import annotations

import threading
from typing import Any

from kubernetes import client

from scheduler.cache import SchedulerCache
from scheduler.framework.runtime import Framework
from scheduler.framework.status import Status
from scheduler.gateway import EventRouter
from scheduler.plugins.loadaware.plugin import LoadAwareScheduling
from scheduler.queue import SchedulingQueue
from scheduler.scheduler import Scheduler
from scheduler.watches import informers

SCHEDULER = "koord-scheduler"


class Binder:
    def bind(self, p: dict[str, Any], node_name: str) -> Status:
        return Status.success()


def node(name: str) -> dict[str, Any]:
    allocatable = {"cpu": "8", "memory": "16Gi", "pods": "110"}
    return {"metadata": {"name": name}, "status": {"allocatable": allocatable}}


def pod(name: str, node_name: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": SCHEDULER, "containers": [{"name": "c"}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"}, "spec": spec}


def nodemetric(name: str) -> dict[str, Any]:
    usage = {"resources": {"cpu": "1", "memory": "1Gi"}}
    return {
        "metadata": {"name": name},
        "status": {"updateTime": "2026-11-28T00:00:00Z", "nodeMetric": {"nodeUsage": usage}},
    }


def test_informer_handlers_never_wait_for_a_cycle_and_apply_in_order_after_it() -> None:
    plugin = LoadAwareScheduling()
    s = Scheduler(Framework([plugin]), SchedulerCache(), SchedulingQueue(), Binder(), bind_workers=0)
    router = EventRouter(s, SCHEDULER)
    by_name = {inf.name: inf for inf in informers(router, client.ApiClient())}
    nodes, pods, metrics = by_name["nodes"], by_name["pods"], by_name["nodemetrics"]

    delivered = threading.Event()

    def informer_thread() -> None:
        nodes._on_add(node("n1"))
        pods._on_add(pod("bound", "n1"))
        pods._on_add(pod("pending"))
        metrics._on_add(nodemetric("n1"))
        delivered.set()

    with s.lock:  # a scheduling cycle in progress
        t = threading.Thread(target=informer_thread)
        t.start()
        assert delivered.wait(10), "an informer handler waited for the scheduler's lock"
        # Nothing applied inside the cycle.
        assert s.cache.list_nodes() == [] and s.queue.pending()["active"] == 0
        assert plugin.metrics.get("n1") is None
    t.join(10)
    assert [n["metadata"]["name"] for n in s.cache.list_nodes()] == ["n1"]
    assert [p["metadata"]["name"] for p in s.cache.list_pods()] == ["bound"]
    assert s.queue.pending()["active"] == 1
    assert plugin.metrics.get("n1") is not None  # decoded on the informer's thread, applied after
