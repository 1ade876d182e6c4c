"""The MetricHub unreachable (docs/architecture.md#the-metrichub-grpc-contract): a koordlet on an emulated
node pushes to a koord-manager's hub every second, and a standalone koord-scheduler watches that hub
(its LoadAwareScheduling expires a node metric after EXPIRY seconds). The manager is SIGKILLed; for
longer than EXPIRY nothing serves the hub port, then a new manager serves it, empty.

- While the hub is down the scheduler keeps scheduling on the node: the hub's copy of the node metric
  has expired, the NodeMetric CR the koordlet still writes is fresher and wins
  (docs/rules/scheduler.md#inputs-per-node).
- The koordlet keeps its newest report and delivers it once the new hub listens
  (docs/rules/koordlet.md#pushing-reports-to-the-metrichub); the scheduler reconnects by itself and
  lists and watches the new hub; nothing restarts, no supervised thread crashed, and a pod created
  afterwards is bound.

Imports: standard library, pytest, kubernetes, apis.constants, koord.localcluster, tests.reliability.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from apis.constants import NODE_METRIC_PLURAL, SLO_GROUP, SLO_VERSION
from koord.localcluster.emulated import EmulatedHost
from koord.localcluster.emunode import EmulatedNode
from tests.reliability.agent_fault_procs import koordlet
from tests.reliability.controlplane_procs import (
    delete_node,
    lease,
    manager,
    node_names,
    pod_manifest,
    scheduler,
    scheduler_config,
    untaint,
)
from tests.reliability.helpers import FreezableControlPlane, sample, scrape, wait_for

pytestmark = pytest.mark.apiserver

EXPIRY = 40
"""LoadAwareScheduling's nodeMetricExpirationSeconds here: longer than the koordlet's CR period (30 s, the
floor of reportIntervalSeconds), shorter than the outage."""
RECONNECT = 15.0
"""The scheduler's hub watcher retries at most every 10 s."""
DELIVERY = 8.0
"""The koordlet pushes every second and reconnects at least every 5 s."""


def _cr_update_time(custom: Any, node: str) -> float:
    nm = custom.get_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, node)
    text = (nm.get("status") or {}).get("updateTime")
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() if text else 0.0


def test_the_hub_down_and_replaced_loses_no_report_and_no_scheduling(
    own_control_plane: FreezableControlPlane, own_kube: Any, own_namespace: str, tmp_path: Path
) -> None:
    cp, ns = own_control_plane.cp, own_namespace
    core, custom = client.CoreV1Api(own_kube), client.CustomObjectsApi(own_kube)
    node = f"hubf-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_config_map(ns, {"metadata": {"name": "slo-controller-config"}, "data": {
        "colocation-config": json.dumps({"enable": True, "metricReportIntervalSeconds": 30}),
    }})  # fmt: skip
    emulated = EmulatedNode(own_kube, node, EmulatedHost(tmp_path / "host")).start()
    untaint(own_kube, node)
    first = manager(cp.kubeconfig_path, tmp_path, ns, node, "--no-enable-scheduler", name="manager-1")
    second = manager(cp.kubeconfig_path, tmp_path, ns, node, "--no-enable-scheduler", hub=first.hub,
                     name="manager-2")  # fmt: skip
    agent = koordlet(node, emulated.host, cp.kubeconfig_path, tmp_path / "koordlet", first.hub)
    config = scheduler_config(tmp_path / "scheduler.json", {
        "filterExpiredNodeMetrics": True, "nodeMetricExpirationSeconds": EXPIRY})  # fmt: skip
    sched = scheduler(cp.kubeconfig_path, tmp_path, ns, "hub-sched", f"--config={config}",
                      f"--hub-addr=127.0.0.1:{first.hub}")  # fmt: skip
    selector = {"kubernetes.io/hostname": node}
    pods: list[str] = []

    def bound(name: str) -> bool:
        return bool(node_names(own_kube, ns, [name])[name])

    def hub(port: int, name: str) -> float:
        return sample(scrape(port), name)

    try:
        first.daemon.start()
        wait_for(lambda: _exists(custom, node), 60, 0.5, "the NodeMetric the manager creates")
        agent.start()
        sched.start()
        wait_for(lambda: hub(first.daemon.port, "koord_manager_hub_nodes") == 1, 30, 0.5, "the first report")
        wait_for(lambda: hub(first.daemon.port, "koord_manager_hub_watchers") == 1, 30, 0.5, "the watch")
        wait_for(lambda: lease(own_kube, ns, "koord-scheduler")[0] == "hub-sched", 30, what="its Lease")
        pods.append("before")
        core.create_namespaced_pod(ns, pod_manifest("before", selector))
        wait_for(lambda: bound("before"), 30, 0.5, "a pod bound while the hub serves")

        first.daemon.kill()  # the hub's port refuses from now on
        down = time.time()
        wait_for(lambda: sample(scrape(agent.port), "koordlet_node_metric_reports_total",
                                target="hub", status="failed") >= 3, 20, 0.5, "failing pushes")  # fmt: skip
        while time.time() < down + EXPIRY + 2:  # the hub's copy of the node metric expires
            assert sched.proc is not None and sched.proc.poll() is None, sched.tail()
            assert agent.proc is not None and agent.proc.poll() is None, agent.tail()
            time.sleep(1.0)
        metrics = scrape(agent.port)
        last_push = sample(metrics, "koordlet_node_metric_last_report_timestamp_seconds", target="hub")
        assert last_push <= down + 1.0, "a push succeeded with no hub"
        assert _cr_update_time(custom, node) > last_push, "no NodeMetric CR written since the last push"
        pods.append("during")
        core.create_namespaced_pod(ns, pod_manifest("during", selector))
        wait_for(lambda: bound("during"), 20, 0.5, "a pod bound on the CR's metric while the hub is down")

        second.daemon.start()
        wait_for(lambda: hub(second.daemon.port, "koord_manager_hub_nodes") == 1, DELIVERY, 0.2,
                 "the koordlet's report in the new hub")  # fmt: skip
        wait_for(lambda: hub(second.daemon.port, "koord_manager_hub_watchers") == 1, RECONNECT, 0.2,
                 "the scheduler's watch on the new hub")  # fmt: skip
        pods.append("after")
        core.create_namespaced_pod(ns, pod_manifest("after", selector))
        wait_for(lambda: bound("after"), 30, 0.5, "a pod bound after the hub is back")

        assert len(agent.starts) == 1 and agent.proc is not None and agent.proc.poll() is None
        assert sched.proc is not None and sched.proc.poll() is None
        assert sample(scrape(sched.port), "koord_scheduler_thread_restarts_total") == 0
        assert "Traceback" not in agent.tail(200_000) + sched.tail(200_000)
    except AssertionError as e:
        logs = "\n".join(f"--- {d.name}:\n{d.tail()}" for d in (first.daemon, second.daemon, agent, sched))
        raise AssertionError(f"{e}\n{_why_pending(core, ns, pods)}\n{logs}") from None
    finally:
        for daemon in (sched, agent, second.daemon, first.daemon):
            daemon.stop()
        for name in pods:
            with contextlib.suppress(client.ApiException):
                core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
        emulated.stop()
        delete_node(own_kube, node)


def _why_pending(core: Any, ns: str, pods: list[str]) -> str:
    out = []
    for name in pods:
        with contextlib.suppress(client.ApiException):
            pod = core.read_namespaced_pod(name, ns)
            for c in pod.status.conditions or []:
                if c.type == "PodScheduled" and c.status == "False":
                    out.append(f"pod {name}: {c.message}")
    return "\n".join(out)


def _exists(custom: Any, node: str) -> bool:
    try:
        custom.get_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, node)
    except client.ApiException:
        return False
    return True
