"""A stopped koordlet: its node's metrics go stale, koord-scheduler's LoadAwareScheduling filters the node
as expired (docs/rules/scheduler.md#filter) and koord-manager removes the node's batch resources after
``degradeTimeMinutes`` (docs/rules/manager.md#degrade); both recover by themselves once the agent
reports again.

- The rules over time, as ``koord simulate`` evaluates them, on the status the koordlet's own reporter
  builds: fresh, one second before and at each limit, and after the agent's next report.
- Real processes on the real API server: koord-manager (with the embedded scheduler and the MetricHub)
  and a koordlet reading an emulated node's host tree, with the shortest limits the configuration allows
  (``degradeTimeMinutes: 1``, the minimum, for this node only; ``nodeMetricExpirationSeconds: 20``).
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from agent.metriccache import MetricCache, Sample
from agent.reporter.build import ReportInputs, build_status
from apis.nodemetric import NodeMetricCollectPolicy
from koord.localcluster.controlplane import ControlPlane, free_ports
from koord.localcluster.emulated import EmulatedHost
from koord.localcluster.emunode import EmulatedNode
from koord.simulate import simulate_scenario
from tests.reliability.agent_fault_procs import ENTRY, Daemon, koordlet, wait_for

T0 = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
BATCH_CPU = "kubernetes.io/batch-cpu"
CONFIG_NS, CONFIG_NAME = "koordinator-system", "slo-controller-config"


# --- the rules over time -------------------------------------------------------------------------------


def _agent_report(at: datetime, busy_cores: float) -> dict[str, Any]:
    """The NodeMetric status the koordlet's reporter builds at ``at`` from ten minutes of samples: the node
    busy with ``busy_cores``, a tenth of it outside pods."""
    cache = MetricCache()
    end = int(at.timestamp() * 1000)
    samples: list[Sample] = []
    for ms in range(end - 600_000, end + 1, 1000):
        samples += [
            Sample("node_cpu_usage", {}, ms, busy_cores),
            Sample("node_memory_usage", {}, ms, 16.0 * (1 << 30)),
            Sample("sys_cpu_usage", {}, ms, busy_cores / 10),
            Sample("sys_memory_usage", {}, ms, 1.0 * (1 << 30)),
        ]
    cache.append(samples)
    policy = NodeMetricCollectPolicy().with_defaults()
    status = build_status(ReportInputs(cache, at, policy, pods=[], host_apps=[], clock=lambda: at))
    return status.to_dict()


def _node() -> dict[str, Any]:
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    return {"metadata": {"name": "n1"}, "status": {"capacity": resources, "allocatable": resources}}


def _filter(status: dict[str, Any], now: datetime) -> tuple[bool, str | None]:
    requests = {"cpu": "1", "memory": "1Gi"}
    pod = {"metadata": {"namespace": "default", "name": "p"},
           "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}}  # fmt: skip
    result = simulate_scenario({
        "kind": "LoadAwareScheduling", "now": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "args": {},
        "nodes": [_node()], "nodeMetrics": [{"metadata": {"name": "n1"}, "status": status}],
        "pods": [], "pod": pod,
    })  # fmt: skip
    return bool(result["filter"]["n1"]), result.get("filterReason", {}).get("n1")


def _batch(status: dict[str, Any], now: datetime) -> dict[str, Any]:
    return simulate_scenario({
        "kind": "BatchResource", "now": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "config": {}, "node": _node(),
        "nodeMetric": {"metadata": {"name": "n1"}, "status": status}, "pods": [],
    })  # fmt: skip


def test_stale_metrics_over_time_filter_then_degrade_then_recover() -> None:
    before = _agent_report(T0, busy_cores=4.0)  # the agent's last report before it stopped
    assert before["updateTime"] == "2026-11-22T12:00:00Z"
    assert _filter(before, T0 + timedelta(seconds=10)) == (True, None)
    batch = _batch(before, T0 + timedelta(seconds=10))
    assert batch["degraded"] is False and batch[BATCH_CPU]

    # The agent stopped. LoadAwareScheduling: expired from nodeMetricExpirationSeconds (180 s) on.
    assert _filter(before, T0 + timedelta(seconds=179))[0] is True
    assert _filter(before, T0 + timedelta(seconds=180)) == (False, "node(s) nodeMetric expired")
    # The manager: batch resources kept up to degradeTimeMinutes (15), removed strictly after.
    assert _batch(before, T0 + timedelta(minutes=15))[BATCH_CPU] == batch[BATCH_CPU]
    stale = _batch(before, T0 + timedelta(minutes=15, seconds=1))
    assert stale["degraded"] is True and stale[BATCH_CPU] is None
    assert stale["explain"]["batch"]["reason"] == "degradedByBatchResource"

    # The agent is back: its next report makes the node schedulable and its batch resources return.
    t1 = T0 + timedelta(minutes=20)
    after = _agent_report(t1, busy_cores=4.0)
    assert _filter(after, t1 + timedelta(seconds=1)) == (True, None)
    recovered = _batch(after, t1 + timedelta(seconds=1))
    assert recovered["degraded"] is False and recovered[BATCH_CPU] == batch[BATCH_CPU]


# --- real processes --------------------------------------------------------------------------------------

SCHEDULER_CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [{"schedulerName": "koord-scheduler", "pluginConfig": [{
        "name": "LoadAwareScheduling",
        "args": {"filterExpiredNodeMetrics": True, "nodeMetricExpirationSeconds": 20},
    }]}],
}  # fmt: skip


@pytest.fixture()
def fast_degrade(kube: Any) -> Iterator[str]:
    """slo-controller-config with ``degradeTimeMinutes: 1`` (the minimum: >0 minutes) for nodes labelled
    with the returned selector value only; the previous data restored afterwards."""
    core = client.CoreV1Api(kube)
    tag = uuid.uuid4().hex[:8]
    before = core.read_namespaced_config_map(CONFIG_NAME, CONFIG_NS).data or {}
    colocation = json.loads(before.get("colocation-config") or "{}")
    colocation["enable"] = True
    colocation["nodeConfigs"] = [*colocation.get("nodeConfigs", []), {
        "name": f"faults-{tag}", "nodeSelector": {"matchLabels": {"koord-faults": tag}},
        "degradeTimeMinutes": 1,
    }]  # fmt: skip
    core.patch_namespaced_config_map(
        CONFIG_NAME, CONFIG_NS, {"data": {"colocation-config": json.dumps(colocation)}}
    )
    try:
        yield tag
    finally:
        meta = client.V1ObjectMeta(name=CONFIG_NAME, namespace=CONFIG_NS)
        core.replace_namespaced_config_map(
            CONFIG_NAME, CONFIG_NS, client.V1ConfigMap(metadata=meta, data=before)
        )


def _manager(kubeconfig: Path, state: Path, node_prefix: str) -> tuple[Daemon, int]:
    """koord-manager as `koord up` runs it, leading alone (no Lease: the other tests of this control plane
    elect their own), managing only the nodes named ``node_prefix…``; returns it and its hub port."""
    state.mkdir(parents=True, exist_ok=True)
    config = state / "scheduler.json"
    config.write_text(json.dumps(SCHEDULER_CONFIG))
    hub, metrics, probe = free_ports(3)
    argv = [
        sys.executable, "-c", ENTRY["koord-manager"], f"--kubeconfig={kubeconfig}",
        f"--hub-addr=127.0.0.1:{hub}", f"--metrics-addr=127.0.0.1:{metrics}",
        f"--health-probe-addr=127.0.0.1:{probe}", "--hub-auth=none", "--no-enable-leader-election",
        f"--scheduler-config={config}", f"--node-name-prefix={node_prefix}",
    ]  # fmt: skip
    return Daemon("koord-manager", argv, state / "koord-manager.log", probe), hub


def _batch_cpu(core: Any, name: str) -> str | None:
    allocatable = core.read_node(name).status.allocatable or {}
    value = allocatable.get(BATCH_CPU)
    return str(value) if value is not None else None


def _probe(core: Any, ns: str, name: str, node: str) -> None:
    core.create_namespaced_pod(ns, {
        "metadata": {"name": name},
        "spec": {"schedulerName": "koord-scheduler", "nodeSelector": {"kubernetes.io/hostname": node},
                 "containers": [{"name": "c", "image": "busybox",
                                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
    })  # fmt: skip


def _scheduled(core: Any, ns: str, name: str) -> bool:
    return bool(core.read_namespaced_pod(name, ns).spec.node_name)


def _wait_scheduled(core: Any, ns: str, name: str, manager: Daemon, timeout: float = 60.0) -> None:
    try:
        wait_for(lambda: _scheduled(core, ns, name), timeout, 0.5, f"pod {name} scheduled")
    except AssertionError as e:
        why = _unschedulable_reason(core, ns, name)
        raise AssertionError(
            f"{e}: {why or 'no PodScheduled condition'}; koord-manager:\n{manager.tail()}"
        ) from None


def _unschedulable_reason(core: Any, ns: str, name: str) -> str:
    conditions = core.read_namespaced_pod(name, ns).status.conditions or []
    return next((c.message or "" for c in conditions if c.type == "PodScheduled" and c.status == "False"), "")


@pytest.mark.apiserver
def test_stopped_koordlet_node_expires_and_degrades_then_recovers(
    control_plane: ControlPlane,
    kube: Any,
    namespace: str,
    fast_degrade: str,
    tmp_path: Path,
) -> None:
    core = client.CoreV1Api(kube)
    ns = namespace
    name = f"stale-{uuid.uuid4().hex[:6]}"
    kubeconfig = control_plane.kubeconfig_path
    emulated = EmulatedNode(kube, name, EmulatedHost(tmp_path / "host")).start()
    manager, hub_port = _manager(kubeconfig, tmp_path / "manager", name)
    agent = koordlet(name, emulated.host, kubeconfig, tmp_path / "koordlet", hub_port)
    try:
        # No node lifecycle controller on this control plane: lift the not-ready taint admission put on
        # the new node, as it would for a Ready one.
        core.patch_node(
            name, {"metadata": {"labels": {"koord-faults": fast_degrade}}, "spec": {"taints": None}}
        )
        manager.start()
        agent.start()
        wait_for(lambda: _batch_cpu(core, name), 90, 0.5, f"batch-cpu on {name} ({manager.tail()})")
        _probe(core, ns, "before", name)
        _wait_scheduled(core, ns, "before", manager)

        assert agent.stop() == 0
        stopped = time.monotonic()
        # LoadAwareScheduling: 20 s after the last report the node is expired, a new pod waits.
        time.sleep(23.0)
        _probe(core, ns, "during", name)
        reason = wait_for(lambda: _unschedulable_reason(core, ns, "during"), 30, 0.5, "FailedScheduling")
        assert "nodeMetric expired" in reason, reason
        # The manager: one minute after the last report (strictly after), batch resources go.
        wait_for(lambda: _batch_cpu(core, name) is None, 100, 1.0, "batch-cpu removed (degraded)")
        assert time.monotonic() - stopped > 60.0
        degraded: Any = core.read_node(name)
        explain = json.loads(degraded.metadata.annotations["node.koordinator.sh/batch-resource-explain"])
        assert explain.get("degraded") is True, explain
        assert not _scheduled(core, ns, "during")

        # The agent reports again: both recover by themselves, within seconds.
        back = time.monotonic()
        agent.start()
        wait_for(lambda: _batch_cpu(core, name), 60, 0.5, "batch-cpu back")
        _wait_scheduled(core, ns, "during", manager)
        assert time.monotonic() - back < 60.0
    finally:
        agent.stop()
        manager.stop()
        for pod in ("before", "during"):
            with contextlib.suppress(client.ApiException):
                core.delete_namespaced_pod(pod, ns, grace_period_seconds=0)
        emulated.stop()
