"""koord-scheduler against the real API server: pending pods are bound, never above a node's
load threshold and to the least-loaded feasible node; an unschedulable pod gets PodScheduled=False
and a FailedScheduling Event, and is scheduled once a node fits; a restart loses no pod."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client

from apis.constants import NODE_METRIC_PLURAL, SLO_GROUP, SLO_VERSION
from scheduler.config import Profile
from scheduler.main import SchedulerService

pytestmark = pytest.mark.apiserver


def wait_for(cond: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return False


@pytest.fixture()
def cluster(kube: Any, namespace: str) -> Iterator[dict[str, Any]]:
    """Three nodes (8 cpu, 32Gi) with NodeMetrics at 70 %, 20 % and 40 % cpu."""
    core = client.CoreV1Api(kube)
    custom = client.CustomObjectsApi(kube)
    tag = uuid.uuid4().hex[:6]
    names = {"hot": f"hot-{tag}", "cool": f"cool-{tag}", "warm": f"warm-{tag}"}
    usage = {"hot": "5600m", "cool": "1600m", "warm": "3200m"}
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for key, name in names.items():
        core.create_node({
            "metadata": {"name": name, "labels": {"koord-test": tag, "tier": key}},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                       "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
        })  # fmt: skip
        # Admission taints a new node not-ready; with no node lifecycle controller here, clear it as
        # that controller would for a Ready node.
        core.patch_node(name, {"spec": {"taints": None}})
        custom.create_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, {
            "apiVersion": f"{SLO_GROUP}/{SLO_VERSION}", "kind": "NodeMetric", "metadata": {"name": name},
            "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
        })  # fmt: skip
        status = {
            "updateTime": now,
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": usage[key], "memory": "8Gi"}}},
        }
        custom.patch_cluster_custom_object_status(
            SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, name, {"status": status}
        )
    try:
        yield {"names": names, "tag": tag, "core": core, "custom": custom}
    finally:
        for name in names.values():
            core.delete_node(name)
            custom.delete_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, name)


def make_pod(
    core: Any, ns: str, name: str, cpu: str = "500m", selector: dict[str, str] | None = None
) -> None:
    spec: dict[str, Any] = {
        "schedulerName": "koord-scheduler",
        "containers": [
            {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}
        ],
    }
    if selector:
        spec["nodeSelector"] = selector
    core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": spec})


def node_of(core: Any, ns: str, name: str) -> str | None:
    return core.read_namespaced_pod(name, ns).spec.node_name  # type: ignore[no-any-return]


class Running:
    def __init__(self, kube: Any) -> None:
        self.stop = threading.Event()
        self.service = SchedulerService(kube, Profile(), bind_workers=4)
        self.service.start(self.stop)
        self.thread = threading.Thread(target=self.service.run, args=(self.stop,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        self.service.close()


def test_binds_to_least_loaded_feasible_nodes(kube: Any, namespace: str, cluster: dict[str, Any]) -> None:
    core, names = cluster["core"], cluster["names"]
    run = Running(kube)
    try:
        make_pod(core, namespace, "first", selector={"koord-test": cluster["tag"]})
        assert wait_for(lambda: node_of(core, namespace, "first") is not None)
        assert node_of(core, namespace, "first") == names["cool"]
        for k in range(5):
            make_pod(core, namespace, f"p{k}", selector={"koord-test": cluster["tag"]})
        assert wait_for(lambda: all(node_of(core, namespace, f"p{k}") for k in range(5)))
        placed = {node_of(core, namespace, f"p{k}") for k in range(5)}
        assert names["hot"] not in placed  # 70 % > the 65 % cpu threshold
    finally:
        run.close()


def test_unschedulable_pod_is_reported_then_scheduled(
    kube: Any, namespace: str, cluster: dict[str, Any]
) -> None:
    core, names = cluster["core"], cluster["names"]
    run = Running(kube)
    try:
        make_pod(core, namespace, "picky", selector={"koord-test": cluster["tag"], "disk": "ssd"})

        def reported() -> bool:
            conds = core.read_namespaced_pod_status("picky", namespace).status.conditions or []
            return any(
                c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
                for c in conds
            )

        assert wait_for(reported)
        cond = next(c for c in core.read_namespaced_pod_status("picky", namespace).status.conditions
                    if c.type == "PodScheduled")  # fmt: skip
        assert "node(s) didn't match Pod's node affinity/selector" in cond.message
        assert wait_for(lambda: any(
            e.reason == "FailedScheduling" and e.involved_object.name == "picky"
            for e in core.list_namespaced_event(namespace).items
        ))  # fmt: skip
        core.patch_node(names["warm"], {"metadata": {"labels": {"disk": "ssd"}}})
        assert wait_for(lambda: node_of(core, namespace, "picky") == names["warm"])
    finally:
        run.close()


def test_a_restart_loses_no_pod(kube: Any, namespace: str, cluster: dict[str, Any]) -> None:
    core = cluster["core"]
    run = Running(kube)
    make_pod(core, namespace, "before", selector={"koord-test": cluster["tag"]})
    assert wait_for(lambda: node_of(core, namespace, "before") is not None)
    run.close()
    for k in range(3):
        make_pod(core, namespace, f"while-down-{k}", selector={"koord-test": cluster["tag"]})
    time.sleep(0.5)
    assert all(node_of(core, namespace, f"while-down-{k}") is None for k in range(3))
    run = Running(kube)
    try:
        assert wait_for(lambda: all(node_of(core, namespace, f"while-down-{k}") for k in range(3)))
    finally:
        run.close()


def test_metrics_from_the_hub_steer_placement(kube: Any, namespace: str, cluster: dict[str, Any]) -> None:
    """The NodeMetric CRs say "cool" is least loaded; the fresher hub reports say it is the hottest."""
    from apis.convert import nodemetric_dict_to_report
    from manager.metrichub.server import serve
    from manager.metrichub.store import HubStore

    core, names = cluster["core"], cluster["names"]
    store = HubStore()
    time.sleep(1.1)  # the hub's reports must be strictly newer than the CRs' (second precision)
    for key, cpu in (("cool", "6000m"), ("warm", "1000m"), ("hot", "5600m")):
        usage = {"nodeMetric": {"nodeUsage": {"resources": {"cpu": cpu, "memory": "8Gi"}}}}
        report = nodemetric_dict_to_report({"metadata": {"name": names[key]}, "status": usage})
        report.status.update_time.GetCurrentTime()
        store.put(report)
    server, port = serve(store, "127.0.0.1:0")
    stop = threading.Event()
    service = SchedulerService(kube, Profile(), hub_addr=f"127.0.0.1:{port}", bind_workers=2)
    try:
        service.start(stop)
        assert service.hub is not None and service.hub.synced.wait(10)
        t = threading.Thread(target=service.run, args=(stop,), daemon=True)
        t.start()
        make_pod(core, namespace, "steered", selector={"koord-test": cluster["tag"]})
        assert wait_for(lambda: node_of(core, namespace, "steered") is not None)
        assert node_of(core, namespace, "steered") == names["warm"]
    finally:
        stop.set()
        service.close()
        server.stop(grace=None)
