"""The QoS runner end to end on a fake host: metric cache → snapshot → CPU suppress decide → the real
resource executor writes the BE cpuset (v1 and v2) and audits it; gauges reach Prometheus; a dry run
audits and writes nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from agent.metriccache import MetricCache, Sample
from agent.metrics import AgentMetrics
from agent.podmeta import pod_meta
from agent.qosmanager.cpusuppress import CPUSuppressConfig, CPUSuppressStrategy
from agent.qosmanager.framework import Snapshot
from agent.qosmanager.runner import CacheMetricView, HostCgroupView, QoSManager, StrategyEntry
from agent.resourceexecutor.audit import AuditLog
from agent.resourceexecutor.executor import ResourceExecutor
from agent.system.cgroup import CPUSET_CPUS, CgroupVersion, parse_cpuset_list, read_cgroup
from agent.system.nodeinfo import CpuInfo, NodeTopology
from agent.system.podcgroup import CgroupDriver, KubeQOS, qos_cgroup_dir
from apis.nodeslo import NodeSLOSpec
from apis.nodeslo_defaults import merge_node_slo_spec
from tests.fixtures.hosttree import HostTree
from tests.unit.agent.qosmanager.fakeclock import FakeClock

NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
NOW_MS = int(NOW.timestamp() * 1000)


def _pod(name: str, uid: str, qos: str, be_label: bool) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid,
                     "labels": {"koordinator.sh/qosClass": "BE"} if be_label else {}},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"qosClass": qos, "phase": "Running",
                   "containerStatuses": [{"name": "c", "containerID": f"containerd://{uid}c"}]},
    }  # fmt: skip


@pytest.mark.parametrize("version", list(CgroupVersion), ids=lambda v: v.value)
@pytest.mark.parametrize("dry_run", [False, True], ids=["write", "dry-run"])
def test_suppress_shrinks_the_be_cpuset(tmp_path: Path, version: CgroupVersion, dry_run: bool) -> None:
    host = HostTree(tmp_path / "host", version, CgroupDriver.CGROUPFS)
    be_dir = qos_cgroup_dir(CgroupDriver.CGROUPFS, KubeQOS.BESTEFFORT)
    be = pod_meta(_pod("be", "u-be", "BestEffort", True), CgroupDriver.CGROUPFS)
    ls = pod_meta(_pod("ls", "u-ls", "Burstable", False), CgroupDriver.CGROUPFS)
    for d in (be_dir, be.cgroup_dir, be.containers[0].cgroup_dir):
        host.mkdir(d)
        host.set_cpuset(d, "0-3")
    cache = MetricCache()
    cache.append([
        Sample("node_cpu_usage", {}, NOW_MS - 500, 3.0),
        Sample("pod_cpu_usage", {"pod_uid": "u-ls"}, NOW_MS - 500, 2.5),
        Sample("pod_cpu_usage", {"pod_uid": "u-be"}, NOW_MS - 500, 0.3),
    ])  # fmt: skip
    node = {"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "4"}}}
    slo = merge_node_slo_spec(
        NodeSLOSpec.from_dict(
            {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 65}}
        )
    )
    topology = NodeTopology(tuple(CpuInfo(c, c, 0, 0) for c in range(4)), (0,))

    def snapshot(now: datetime) -> Snapshot:
        return Snapshot(
            now=now, node=node, node_slo=slo, pods=[be, ls],
            metrics=CacheMetricView(cache, int(now.timestamp() * 1000)),
            cgroups=HostCgroupView(host.paths, version), cgroup_version=version,
            cgroup_driver=CgroupDriver.CGROUPFS, topology=topology,
        )  # fmt: skip

    registry = CollectorRegistry()
    metrics = AgentMetrics("n1", registry)
    audit_path = tmp_path / "audit.log"
    with AuditLog(audit_path) as audit:
        executor = ResourceExecutor(
            host.paths, version, "n1", audit=audit, dry_run=dry_run, clock=lambda: NOW
        )
        manager = QoSManager(
            [StrategyEntry(CPUSuppressStrategy(), CPUSuppressConfig)], snapshot, executor, None,
            on_gauges=metrics.on_qos_gauges, clock=FakeClock(NOW),
        )  # fmt: skip
        decision = manager.tick(manager.entries[0])
    # allowance = 4000 × 65 % − 2500 (LS) − 200 (system: 3.0 − 2.8) = −100 milli → the floor of 2 CPUs.
    assert decision.cgroup_writes
    if version is CgroupVersion.V1:
        got = read_cgroup(host.paths.cgroup_root, version, CPUSET_CPUS, be_dir)
    else:  # the fake tree has no kernel to propagate cpuset.cpus into cpuset.cpus.effective
        got = parse_cpuset_list((host.paths.cgroup_root / be_dir / "cpuset.cpus").read_text())
    lines = [json.loads(line) for line in audit_path.read_text().splitlines()]
    if dry_run:
        assert got == [0, 1, 2, 3]
        assert lines and all(line["dry_run"] for line in lines)
    else:
        assert len(got) == 2
        assert any(line["file"].endswith("cpuset.cpus") and not line["dry_run"] for line in lines)
    assert (
        registry.get_sample_value("koordlet_be_suppress_cpu_cores", {"node": "n1", "type": "cpuset"}) == 2.0
    )
