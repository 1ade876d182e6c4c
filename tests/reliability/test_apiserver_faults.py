"""The API server gone for OUTAGE seconds, twice, under running daemons: koord-manager (the embedded
scheduler, the MetricHub, the SLO controllers; leader-elected) and a koordlet reading an emulated
node's host tree and pushing to that hub. Nothing is restarted; each time everything recovers by itself.

1. Killed (SIGKILL: connections reset, the port refuses), then a new kube-apiserver on the same port over
   the same etcd data. Before it dies the node is busy (80 % CPU): its batch resources are 0 and the
   pods waiting for it are unschedulable (cpu usage over the threshold). While it is down the node's
   load drops; the koordlet measures it and the hub gets it (no API server involved), the scheduler's
   binds fail. Once it is back the manager leads again (docs/architecture.md#leader-election), every
   waiting pod is bound exactly once, the node's batch resources follow the load measured during the
   outage, a ConfigMap edit reaches the NodeSLO and the NodeMetric spec, and the koordlet's NodeMetric
   status is written again.
2. Frozen (SIGSTOP: connections open, nothing answered), then resumed: the same recovery, a new pod
   bound, another edit applied, the status written again.

Throughout both outages the processes stay up and their /healthz answers 200.

Imports: standard library, pytest, kubernetes, apis.constants, koord.localcluster, tests.reliability.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from apis.constants import BATCH_CPU, NODE_METRIC_PLURAL, NODE_SLO_PLURAL, SLO_GROUP, SLO_VERSION
from koord.localcluster.emulated import EmulatedHost
from koord.localcluster.emunode import EmulatedNode
from tests.reliability.agent_fault_procs import Daemon, koordlet
from tests.reliability.controlplane_procs import (
    apiserver_binds,
    lease,
    manager,
    node_names,
    pod_manifest,
    untaint,
)
from tests.reliability.helpers import (
    FreezableControlPlane,
    apiserver_down,
    http_get,
    sample,
    scrape,
    wait_for,
)

pytestmark = pytest.mark.apiserver

OUTAGE = 30.0
LEASE_DURATION, RENEW_DEADLINE = 15.0, 10.0  # koord-manager's (docs/architecture.md#leader-election)
RECOVERY = LEASE_DURATION + 30.0
"""After the API server is back: a full lease observed unchanged, then the backed-off work retried."""
CR_PERIOD = 30.0  # the floor of reportIntervalSeconds (docs/rules/koordlet.md#reporter)
WAITING = 4


def _config(threshold: int, aggregate: int) -> dict[str, str]:
    return {
        "colocation-config": json.dumps({"enable": True, "metricReportIntervalSeconds": 30,
                                         "metricAggregateDurationSeconds": aggregate}),
        "resource-threshold-config": json.dumps(
            {"clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": threshold}}),
    }  # fmt: skip


class Rig:
    """What the test reads: the node's koord objects and the daemons' endpoints."""

    def __init__(self, kube: Any, ns: str, node: str, mgr: Daemon, agent: Daemon) -> None:
        self.core, self.custom = client.CoreV1Api(kube), client.CustomObjectsApi(kube)
        self.kube, self.ns, self.node, self.mgr, self.agent = kube, ns, node, mgr, agent

    def spec(self, plural: str) -> dict[str, Any]:
        try:
            obj: Any = self.custom.get_cluster_custom_object(SLO_GROUP, SLO_VERSION, plural, self.node)
        except client.ApiException:
            return {}
        return dict(obj.get("spec") or {})

    def threshold(self) -> int | None:
        value = (
            self.spec(NODE_SLO_PLURAL)
            .get("resourceUsedThresholdWithBE", {})
            .get("cpuSuppressThresholdPercent")
        )
        return None if value is None else int(value)

    def aggregate(self) -> int | None:
        value = self.spec(NODE_METRIC_PLURAL).get("metricCollectPolicy", {}).get("aggregateDurationSeconds")
        return None if value is None else int(value)

    def batch_cpu(self) -> int | None:
        value = (self.core.read_node(self.node).status.allocatable or {}).get(BATCH_CPU)
        return None if value is None else int(value)

    def status_time(self) -> float:
        """When the koordlet built the NodeMetric status it wrote last (0 before its first write)."""
        nm: Any = self.custom.get_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, self.node)
        text = (nm.get("status") or {}).get("updateTime")
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() if text else 0.0

    def edit(self, threshold: int, aggregate: int) -> None:
        self.core.patch_namespaced_config_map(
            "slo-controller-config", self.ns, {"data": _config(threshold, aggregate)}
        )

    def scheduled(self) -> float:
        return sample(scrape(self.mgr.port), "scheduler_schedule_attempts_total", result="scheduled")

    def unschedulable_because(self, pod: str) -> str:
        for c in self.core.read_namespaced_pod(pod, self.ns).status.conditions or []:
            if c.type == "PodScheduled" and c.status == "False":
                return str(c.message or "")
        return ""

    def too_busy_for(self, pod: str) -> bool:
        return "cpu usage exceed threshold" in self.unschedulable_because(pod)

    def diagnose(self, pods: list[str]) -> str:
        """Why pods wait, and the embedded scheduler's view of them."""
        try:
            return self._diagnose(pods)
        except Exception as e:  # reported with the failure it explains, never instead of it
            return f"(no diagnosis: {e})"

    def _diagnose(self, pods: list[str]) -> str:
        lines = [
            f"pod {p}: {node or self.unschedulable_because(p)}"
            for p, node in node_names(self.kube, self.ns, pods).items()
        ]
        metrics = scrape(self.mgr.port)
        lines += [
            f"{n} {dict(ls)} {v}"
            for (n, ls), v in sorted(metrics.items())
            if n.startswith(("scheduler_schedule", "scheduler_pending"))
        ]
        return "\n".join(lines)

    def hold(self, seconds: float) -> None:
        """For ``seconds``: both processes run and answer /healthz."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for d in (self.mgr, self.agent):
                assert d.proc is not None and d.proc.poll() is None, f"{d.name} exited"
                assert http_get(d.port, "/healthz")[0] == 200, f"{d.name}: /healthz stopped answering 200"
            time.sleep(1.0)


def _recovered(rig: Rig, holder: str, transitions: int, since: float, edit: tuple[int, int]) -> None:
    """The manager leads again as a new term, applies a ConfigMap edit, and the koordlet's NodeMetric
    status is written again (built after ``since``, when no write could succeed)."""
    wait_for(lambda: lease(rig.kube, rig.ns, "koordinator-manager") == (holder, transitions + 1), RECOVERY,
             0.5, "the manager to take its Lease back")  # fmt: skip
    rig.edit(*edit)
    wait_for(lambda: rig.threshold() == edit[0], 30, 0.5, "the NodeSLO edit applied")
    wait_for(lambda: rig.aggregate() == edit[1], 30, 0.5, "the NodeMetric edit applied")
    wait_for(lambda: rig.status_time() > since, CR_PERIOD + 15, 1.0, "the koordlet's NodeMetric status again")


def test_killed_then_frozen_api_server_loses_nothing_and_every_daemon_recovers(
    own_control_plane: FreezableControlPlane,
    own_kube: Any,
    own_namespace: str,
    session_processes: list[Callable[[], list[int]]],
    tmp_path: Path,
) -> None:
    plane, ns, kubeconfig = own_control_plane, own_namespace, own_control_plane.cp.kubeconfig_path
    session_processes.append(lambda: [plane.apiserver_pid])  # the restarted API server is the plane's
    core = client.CoreV1Api(own_kube)
    prefix = f"apif-{uuid.uuid4().hex[:6]}-"
    node = f"{prefix}n"
    core.create_namespaced_config_map(ns, {"metadata": {"name": "slo-controller-config"},
                                           "data": _config(60, 60)})  # fmt: skip
    host = EmulatedHost(tmp_path / "host", base_load=0.8)
    emulated = EmulatedNode(own_kube, node, host).start()
    untaint(own_kube, node)
    started = manager(kubeconfig, tmp_path, ns, prefix)
    mgr = started.daemon
    agent = koordlet(node, host, kubeconfig, tmp_path / "koordlet", started.hub)
    pods = [f"waiting-{i}" for i in range(WAITING)]
    rig = Rig(own_kube, ns, node, mgr, agent)
    try:
        mgr.start()
        wait_for(lambda: rig.threshold() == 60 and rig.aggregate() == 60, 60, 0.5, "NodeSLO and NodeMetric")
        agent.start()
        wait_for(lambda: rig.batch_cpu() == 0, 60, 0.5, "no batch-cpu on the busy node")
        holder, transitions = lease(own_kube, ns, "koordinator-manager")
        # The embedded scheduler hears of the load through its own watch, which may trail the manager's
        # batch computation: wait until it turns a probe pod away (a probe bound before it knew is removed).
        for attempt in range(10):
            probe = f"probe-{attempt}"
            core.create_namespaced_pod(ns, pod_manifest(probe, {"kubernetes.io/hostname": node}))
            wait_for(lambda p=probe: rig.too_busy_for(p) or node_names(own_kube, ns, [p])[p], 30, 0.5,
                     f"{probe} decided")  # fmt: skip
            busy = rig.too_busy_for(probe)
            core.delete_namespaced_pod(probe, ns, grace_period_seconds=0)
            if busy:
                break
        else:
            raise AssertionError("the scheduler never saw the busy node's load")
        for name in pods:
            core.create_namespaced_pod(ns, pod_manifest(name, {"kubernetes.io/hostname": node}))
        for name in pods:
            wait_for(partial(rig.too_busy_for, name), 30, 0.5, f"{name} unschedulable on the busy node")
        scheduled = rig.scheduled()

        # 1. Killed: the load drops while nothing can be written.
        with apiserver_down(plane):
            killed = time.time()
            host.base_load = 0.3
            rig.hold(OUTAGE)
        _recovered(rig, holder, transitions, killed, (55, 120))
        bound = wait_for(lambda: all((b := node_names(own_kube, ns, pods)).values()) and b, 30, 0.5,
                         "every waiting pod bound")  # fmt: skip
        assert set(bound.values()) == {node}
        # Each bound once: one successful Binding each, all answered by the new API server process.
        assert rig.scheduled() - scheduled == WAITING
        assert apiserver_binds(plane.cp).get("201", 0.0) == WAITING
        wait_for(lambda: (rig.batch_cpu() or 0) > 0, 30, 0.5, "batch-cpu from the load measured meanwhile")

        # 2. Frozen.
        with plane.frozen():
            frozen = time.time()
            rig.hold(OUTAGE)
        _recovered(rig, holder, transitions + 1, frozen, (50, 60))
        pods.append("after")
        core.create_namespaced_pod(ns, pod_manifest("after", {"kubernetes.io/hostname": node}))
        wait_for(lambda: node_names(own_kube, ns, ["after"])["after"] == node, 30, 0.5, "a pod bound after")

        assert len(mgr.starts) == 1 and len(agent.starts) == 1
        assert mgr.proc is not None and mgr.proc.poll() is None
        assert agent.proc is not None and agent.proc.poll() is None
    except AssertionError as e:
        logs = f"--- koord-manager:\n{mgr.tail()}\n--- koordlet:\n{agent.tail()}"
        raise AssertionError(f"{e}\n{rig.diagnose(pods)}\n{logs}") from None
    finally:
        with contextlib.suppress(ProcessLookupError):
            plane.resume()
        agent.stop()
        mgr.stop()
        for name in pods:
            with contextlib.suppress(client.ApiException):
                core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
        emulated.stop()
        for plural in (NODE_SLO_PLURAL, NODE_METRIC_PLURAL):
            with contextlib.suppress(client.ApiException):
                client.CustomObjectsApi(own_kube).delete_cluster_custom_object(
                    SLO_GROUP, SLO_VERSION, plural, node
                )
