"""koord-scheduler against the real API server: pending pods are bound, never above a node's
load threshold and to the least-loaded feasible node; an unschedulable pod gets PodScheduled=False
and a FailedScheduling Event, and is scheduled once a node fits; a restart loses no pod."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from apis.constants import NODE_METRIC_PLURAL, SLO_GROUP, SLO_VERSION
from scheduler.config import parse_config
from scheduler.main import SchedulerService
from scheduler.registry import KNOWN, default_profile
from tests.helpers.scheduler import RunningScheduler
from tests.integration.podhelpers import make_pod, node_of, wait_for

pytestmark = pytest.mark.apiserver


Running = RunningScheduler


def test_binds_to_least_loaded_feasible_nodes(kube: Any, namespace: str, cluster: dict[str, Any]) -> None:
    core, names = cluster["core"], cluster["names"]
    run = Running(kube)
    try:
        make_pod(core, namespace, "first", selector={"koord-test": cluster["tag"]})
        assert wait_for(lambda: node_of(core, namespace, "first") is not None)
        assert node_of(core, namespace, "first") == names["cool"]
        # As kube-scheduler: a Normal `Scheduled` Event names the pod and its node.
        want = f"Successfully assigned {namespace}/first to {names['cool']}"
        assert wait_for(lambda: any(
            e.reason == "Scheduled" and e.type == "Normal" and e.message == want
            and e.involved_object.name == "first" and e.source.component == "koord-scheduler"
            for e in core.list_namespaced_event(namespace).items
        ))  # fmt: skip
        for k in range(5):
            make_pod(core, namespace, f"p{k}", selector={"koord-test": cluster["tag"]})
        assert wait_for(lambda: all(node_of(core, namespace, f"p{k}") for k in range(5)))
        placed = {node_of(core, namespace, f"p{k}") for k in range(5)}
        assert names["hot"] not in placed  # 70 % > the 65 % cpu threshold
    finally:
        run.close()


def test_two_profiles_share_one_queue_and_cache(kube: Any, namespace: str, cluster: dict[str, Any]) -> None:
    """Pods of each profile are scheduled by it; a pod naming neither stays pending; Events name the
    profile that scheduled the pod."""
    core = cluster["core"]
    doc = {"profiles": [{"schedulerName": "koord-scheduler"}, {"schedulerName": "koord-packed"}]}
    run = Running(kube, parse_config(doc, KNOWN))
    try:
        make_pod(core, namespace, "a", selector={"koord-test": cluster["tag"]})
        make_pod(core, namespace, "b", selector={"koord-test": cluster["tag"]}, scheduler_name="koord-packed")
        make_pod(core, namespace, "c", selector={"koord-test": cluster["tag"]}, scheduler_name="nobody")
        assert wait_for(lambda: node_of(core, namespace, "a") and node_of(core, namespace, "b"))
        assert wait_for(lambda: any(
            e.reason == "Scheduled" and e.involved_object.name == "b" and e.source.component == "koord-packed"
            for e in core.list_namespaced_event(namespace).items
        ))  # fmt: skip
        assert node_of(core, namespace, "c") is None
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
        assert "node(s) didn't match Pod's node affinity" in cond.message
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
    service = SchedulerService(kube, default_profile(), hub_addr=f"127.0.0.1:{port}", bind_workers=2)
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


def test_metrics_are_scraped_from_a_real_endpoint(kube: Any, namespace: str, cluster: dict[str, Any]) -> None:
    import urllib.request

    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.parser import text_string_to_metric_families

    from koord.localcluster.controlplane import free_ports

    core = cluster["core"]
    registry = CollectorRegistry()
    [port] = free_ports(1)
    server, _ = start_http_server(port, addr="127.0.0.1", registry=registry)
    stop = threading.Event()
    service = SchedulerService(kube, default_profile(), registry=registry, bind_workers=2)
    try:
        service.start(stop)
        t = threading.Thread(target=service.run, args=(stop,), daemon=True)
        t.start()
        make_pod(core, namespace, "counted", selector={"koord-test": cluster["tag"]})
        make_pod(core, namespace, "stuck", selector={"koord-test": cluster["tag"], "no": "such-node"})
        assert wait_for(lambda: node_of(core, namespace, "counted") is not None)

        def samples() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                text = resp.read().decode()
            return {
                (s.name, tuple(sorted(s.labels.items()))): s.value
                for fam in text_string_to_metric_families(text)
                for s in fam.samples
            }

        def attempts(result: str) -> float:
            key = ("scheduler_schedule_attempts_total", (("profile", "koord-scheduler"), ("result", result)))
            return samples().get(key, 0.0)

        assert wait_for(lambda: attempts("scheduled") >= 1 and attempts("unschedulable") >= 1)
        got = samples()
        assert got[("scheduler_pending_pods", (("queue", "unschedulable"),))] >= 1
        filt = ("scheduler_plugin_execution_duration_seconds_count",
                (("extension_point", "Filter"), ("plugin", "LoadAwareScheduling")))  # fmt: skip
        assert got[filt] >= 1
    finally:
        stop.set()
        service.close()
        server.shutdown()
        server.server_close()


def test_binds_reuse_pooled_connections(control_plane: Any, kube: Any, namespace: str) -> None:
    """An unread binding response kept its connection out of the pool: every bind paid a TLS handshake."""
    from kubernetes import client

    from kube.client import api_client
    from scheduler.gateway import APIBinder

    core = client.CoreV1Api(kube)
    api = api_client(str(control_plane.kubeconfig_path), connections=4)
    binder = APIBinder(api)
    for k in range(6):
        body = {"metadata": {"name": f"b{k}"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        pod = core.create_namespaced_pod(namespace, body)
        assert binder.bind(kube.sanitize_for_serialization(pod), "some-node").is_success()
    pools = list(api.rest_client.pool_manager.pools._container.values())
    assert sum(p.num_requests for p in pools) == 6
    assert sum(p.num_connections for p in pools) == 1
    assert core.read_namespaced_pod("b5", namespace).spec.node_name == "some-node"


def test_pod_waits_for_load_to_fall_then_schedules(
    kube: Any, namespace: str, cluster: dict[str, Any]
) -> None:
    """Every node above its cpu threshold: the pod is unschedulable; when a NodeMetric reports the
    load fell, that event alone requeues the pod and it is bound there."""
    core, custom, names = cluster["core"], cluster["custom"], cluster["names"]

    def report(name: str, cpu: str) -> None:
        usage = {"nodeUsage": {"resources": {"cpu": cpu, "memory": "8Gi"}}}
        status = {"updateTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "nodeMetric": usage}
        custom.patch_cluster_custom_object_status(
            SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, name, {"status": status}
        )

    for name in names.values():
        report(name, "7000m")  # 87.5 % > 65 %
    run = Running(kube)
    try:
        make_pod(core, namespace, "patient", selector={"koord-test": cluster["tag"]})

        def reported() -> bool:
            conds = core.read_namespaced_pod_status("patient", namespace).status.conditions or []
            return any(
                c.type == "PodScheduled" and c.status == "False" and "usage exceed threshold" in c.message
                for c in conds
            )

        assert wait_for(reported)
        report(names["warm"], "1000m")
        assert wait_for(lambda: node_of(core, namespace, "patient") == names["warm"])
    finally:
        run.close()
