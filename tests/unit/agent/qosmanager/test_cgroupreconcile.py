"""Batch resources → BE cgroups and memory QoS (docs/rules/koordlet.md): hand-computed shares / quotas /
limits from the pure decide, and the runner writing them leveled through the executor on the fake tree (v1
and v2)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent.podmeta import PodMeta, pod_meta
from agent.qosmanager.cgroupreconcile import (
    BatchResourceStrategy,
    decide_batch,
    decide_memory_qos,
    milli_cpu_to_quota,
    milli_cpu_to_shares,
)
from agent.qosmanager.framework import Snapshot
from agent.qosmanager.runner import HostCgroupView, QoSManager, StrategyEntry
from agent.resourceexecutor.executor import ResourceExecutor
from agent.system.cgroup import CPU_QUOTA, CPU_SHARES, MEMORY_LIMIT, CgroupVersion, read_cgroup
from agent.system.podcgroup import CgroupDriver
from apis.nodeslo import NodeSLOSpec
from apis.nodeslo_defaults import merge_node_slo_spec
from tests.fixtures.hosttree import HostTree
from tests.unit.agent.qosmanager.fakeclock import FakeClock

NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
GI = 1 << 30


def test_conversions() -> None:
    assert [milli_cpu_to_quota(m) for m in (0, -5, 5, 1500)] == [-1, -1, 1000, 150000]
    assert [milli_cpu_to_shares(m) for m in (0, 1, 1000, 500000)] == [2, 2, 1024, 262144]


def _be_pod() -> dict[str, Any]:
    return {
        "metadata": {"name": "be", "namespace": "ns", "uid": "u-be",
                     "labels": {"koordinator.sh/qosClass": "BE"}},
        "spec": {"containers": [
            {"name": "c1", "resources": {
                "requests": {"kubernetes.io/batch-cpu": "1500", "kubernetes.io/batch-memory": "1Gi"},
                "limits": {"kubernetes.io/batch-cpu": "2500", "kubernetes.io/batch-memory": "2Gi"}}},
            {"name": "c2", "resources": {
                "requests": {"kubernetes.io/batch-cpu": "500"},
                "limits": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "1Gi"}}},
            {"name": "plain"},
        ]},
        "status": {"qosClass": "BestEffort", "phase": "Running", "containerStatuses": [
            {"name": n, "containerID": f"containerd://id{n}"} for n in ("c1", "c2", "plain")]},
    }  # fmt: skip


def _snapshot(
    pods: list[PodMeta],
    slo: NodeSLOSpec | None,
    node: Any = None,
    view: Any = None,
    version: CgroupVersion = CgroupVersion.V1,
) -> Snapshot:
    return Snapshot(
        now=NOW, node=node, node_slo=slo, pods=pods, metrics=None,  # type: ignore[arg-type]
        cgroups=view, cgroup_version=version, cgroup_driver=CgroupDriver.CGROUPFS, topology=None,
    )  # fmt: skip


def _values(levels: Any) -> list[list[tuple[str, str, int]]]:
    return [
        [(w.cgroup_dir.rstrip("/").rsplit("/", 1)[-1], w.file.name, w.value) for w in lv] for lv in levels
    ]


def test_batch_pod_and_containers() -> None:
    pod = pod_meta(_be_pod(), CgroupDriver.CGROUPFS)
    d = decide_batch(_snapshot([pod], None))
    assert _values(d.leveled_writes) == [
        # shares (1500+500)×1024/1000; quota (2500+500)×100; memory 2Gi+1Gi
        [("podu-be", "cpu_shares", 2048), ("podu-be", "cpu_cfs_quota_us", 300000),
         ("podu-be", "memory_limit_bytes", 3 * GI)],
        [("idc1", "cpu_shares", 1536), ("idc1", "cpu_cfs_quota_us", 250000),
         ("idc1", "memory_limit_bytes", 2 * GI),
         ("idc2", "cpu_shares", 512), ("idc2", "cpu_cfs_quota_us", 50000),
         ("idc2", "memory_limit_bytes", 1 * GI)],
    ]  # fmt: skip


def test_batch_suppress_and_normalization() -> None:
    pod = pod_meta(_be_pod(), CgroupDriver.CGROUPFS)
    slo = NodeSLOSpec.from_dict(
        {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}}
    )
    quotas = [
        w.value
        for lv in decide_batch(_snapshot([pod], slo)).leveled_writes
        for w in lv
        if w.file is CPU_QUOTA
    ]
    assert quotas == [-1, -1, -1]
    node = {"metadata": {"annotations": {"node.koordinator.sh/cpu-normalization-ratio": "1.5"}}}
    quotas = [
        w.value
        for lv in decide_batch(_snapshot([pod], None, node)).leveled_writes
        for w in lv
        if w.file is CPU_QUOTA
    ]
    assert quotas == [200000, 166667, 33334]  # ceil(q / 1.5)


def test_batch_skips_non_be_and_unlisted() -> None:
    raw = _be_pod()
    raw["metadata"]["labels"] = {}
    assert decide_batch(_snapshot([pod_meta(raw, CgroupDriver.CGROUPFS)], None)).leveled_writes == ()
    raw = _be_pod()
    raw["spec"]["containers"][1]["resources"]["limits"].pop("kubernetes.io/batch-cpu")
    d = decide_batch(_snapshot([pod_meta(raw, CgroupDriver.CGROUPFS)], None))
    assert [w.value for w in d.leveled_writes[0] if w.file is CPU_QUOTA] == [
        -1
    ]  # a listed container is unlimited


def test_memory_qos_pod_and_container() -> None:
    raw = _be_pod()
    raw["metadata"]["annotations"] = {
        "koordinator.sh/memoryQOS": '{"minLimitPercent": 50, "lowLimitPercent": 20}'
    }
    slo = merge_node_slo_spec(NodeSLOSpec.from_dict(
        {"resourceQOSStrategy": {"beClass": {"memoryQOS": {"enable": True, "throttlingPercent": 50}}}}
    ))  # fmt: skip
    d = decide_memory_qos(_snapshot([pod_meta(raw, CgroupDriver.CGROUPFS)], slo))
    vals = _values(d.leveled_writes)
    # pod request Σ batch-memory requests = 1Gi: min 512Mi, low 20 % = 204.8Mi → raised to min? no: 0<low<min
    assert vals[0] == [("podu-be", "memory_min", GI // 2), ("podu-be", "memory_low", GI // 2)]
    # c1: req 1Gi, limit 2Gi, throttling 50 % → high = 1.5Gi (page aligned)
    assert ("idc1", "memory_high", 3 * GI // 2) in vals[1]
    # c2: no batch-memory request → 0; high = (0 + 1Gi × 50 %) = 512Mi
    assert ("idc2", "memory_min", 0) in vals[1] and ("idc2", "memory_high", GI // 2) in vals[1]


@pytest.mark.parametrize("version", list(CgroupVersion), ids=lambda v: v.value)
def test_runner_writes_batch_cgroups(tmp_path: Path, version: CgroupVersion) -> None:
    host = HostTree(tmp_path / "host", version, CgroupDriver.CGROUPFS)
    pod = pod_meta(_be_pod(), CgroupDriver.CGROUPFS)
    for d in (pod.cgroup_dir, *(ctr.cgroup_dir for ctr in pod.containers)):
        host.mkdir(d)
        host.set_cpu_limit(d, 100000)
        host.set_cpu_shares(d, 2)
        host.set_memory_limit(d, -1)

    def snapshot(now: datetime) -> Snapshot:
        return _snapshot([pod], None, None, HostCgroupView(host.paths, version), version)

    executor = ResourceExecutor(host.paths, version, "n1")
    entry = StrategyEntry(BatchResourceStrategy(), lambda: None)
    QoSManager([entry], snapshot, executor, None, clock=FakeClock(NOW)).tick(entry)
    root = host.paths.cgroup_root

    def rd(f: Any, d: str) -> Any:
        if f is CPU_QUOTA and version is CgroupVersion.V2:  # the fake cpu.max keeps the quota written alone
            return int(host.path_of(f, d).read_text().split()[0])
        return read_cgroup(root, version, f, d)

    c1 = pod.containers[0].cgroup_dir
    assert rd(CPU_QUOTA, pod.cgroup_dir) == 300000 and rd(CPU_QUOTA, c1) == 250000
    assert rd(MEMORY_LIMIT, pod.cgroup_dir) == 3 * GI and rd(MEMORY_LIMIT, c1) == 2 * GI
    if version is CgroupVersion.V1:
        assert rd(CPU_SHARES, pod.cgroup_dir) == 2048
    else:  # weight = 1 + (2048 − 2) × 9999 / 262142 = 79
        assert host.path_of(CPU_SHARES, pod.cgroup_dir).read_text().strip() == "79"
    # the pod quota was loosened first (merge phase) then set; "plain" has no batch resources: untouched
    quota_files = ("cpu.cfs_quota_us", "cpu.max")
    assert next(r.phase for r in entry.last_results if r.path.endswith(quota_files)) == "merge"
    assert rd(CPU_QUOTA, pod.containers[2].cgroup_dir) == 100000
