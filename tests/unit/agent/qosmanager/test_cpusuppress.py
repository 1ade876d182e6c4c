"""CPU suppress ``decide`` (docs/rules/koordlet.md, CPU suppress): order of checks, recovery, cpuset and
cfsQuota policies, write orders, gauges, with fake metric/cgroup views."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from agent.podmeta import PodMeta, pod_meta
from agent.qosmanager.cpusuppress import (
    CPUSuppressConfig,
    CPUSuppressState,
    CPUSuppressStrategy,
    adjust_cfs_quota,
    decide,
    suppress_cpuset,
)
from agent.qosmanager.framework import Snapshot
from agent.system.cgroup import CPU_QUOTA, CPUSET_CPUS, CgroupFile, CgroupVersion
from agent.system.nodeinfo import CpuInfo, NodeTopology
from agent.system.podcgroup import CgroupDriver
from apis.nodeslo import NodeSLOSpec, ResourceThresholdStrategy

NOW = datetime(2026, 1, 1, tzinfo=UTC)
BE_DIR = "kubepods/besteffort/"


class Metrics:
    def __init__(self, values: Mapping[tuple[str, str], float]) -> None:
        self.values = values

    def last(self, kind: str, labels: Mapping[str, str], window_seconds: float) -> float | None:
        return self.values.get((kind, next(iter(labels.values()), "")))

    avg = last


class Cgroups:
    def __init__(self, values: Mapping[tuple[str, str], Any], tree: Mapping[str, Sequence[str]]) -> None:
        self.values = values
        self.tree = tree

    def read(self, spec: CgroupFile[Any], cgroup_dir: str) -> Any | None:
        return self.values.get((spec.name, cgroup_dir))

    def children(self, cgroup_dir: str) -> Sequence[str]:
        return self.tree.get(cgroup_dir, ())


def node(cap: str = "16", ann: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "n", "annotations": dict(ann or {})},
        "status": {"capacity": {"cpu": cap}, "allocatable": {"cpu": cap}},
    }


def pod(uid: str, qos: str | None, req: str | None = None, ann: Mapping[str, str] | None = None) -> PodMeta:
    res = {"requests": {"cpu": req}} if req else {}
    p = {
        "metadata": {
            "uid": uid,
            "name": uid,
            "namespace": "d",
            "labels": {"koordinator.sh/qosClass": qos} if qos else {},
        },
        "spec": {"containers": [{"name": "c", "resources": res}]},
        "status": {
            "phase": "Running",
            "containerStatuses": [{"name": "c", "containerID": f"containerd://{uid}c"}],
        },
    }
    if ann:
        p["metadata"]["annotations"] = dict(ann)  # type: ignore[index]
    return pod_meta(p, CgroupDriver.CGROUPFS)


TOPO = NodeTopology(tuple(CpuInfo(i, i % 8, 0, 0) for i in range(16)), (0,))
LS, BE = pod("ls", "LS", "4"), pod("be", "BE")
TREE = {BE_DIR: [f"{BE_DIR}podbe/"], f"{BE_DIR}podbe/": [f"{BE_DIR}podbe/bec/"]}


def snap(
    threshold: ResourceThresholdStrategy | None = None,
    *,
    slo: bool = True,
    pods: Sequence[PodMeta] = (LS, BE),
    metrics: Mapping[tuple[str, str], float] | None = None,
    cgroups: Mapping[tuple[str, str], Any] | None = None,
    gates: Mapping[str, bool] | None = None,
    node_ann: Mapping[str, str] | None = None,
    topology: NodeTopology | None = TOPO,
    version: CgroupVersion = CgroupVersion.V1,
) -> Snapshot:
    thr = (
        threshold
        if threshold is not None
        else ResourceThresholdStrategy(
            enable=True, cpu_suppress_threshold_percent=65, cpu_suppress_policy="cpuset"
        )
    )
    return Snapshot(
        now=NOW,
        node=node(ann=node_ann),
        node_slo=NodeSLOSpec(resource_used_threshold_with_be=thr) if slo else None,
        pods=pods,
        metrics=Metrics(
            metrics
            if metrics is not None
            else {("node_cpu_usage", ""): 10, ("pod_cpu_usage", "ls"): 4, ("pod_cpu_usage", "be"): 3}
        ),
        cgroups=Cgroups(
            cgroups
            if cgroups is not None
            else {("cpuset_cpus", BE_DIR): list(range(4)), ("cpu_cfs_quota_us", BE_DIR): 100000},
            TREE,
        ),
        cgroup_version=version,
        cgroup_driver=CgroupDriver.CGROUPFS,
        topology=topology,
        gates=dict(gates or {}),
    )


CFG = CPUSuppressConfig()


def writes(d: Any) -> list[tuple[str, str, Any]]:
    return [(w.file.name, w.cgroup_dir, w.value) for w in sorted(d.cgroup_writes, key=lambda w: w.order)]


def test_strategy_identity() -> None:
    s = CPUSuppressStrategy()
    assert (s.name, s.interval_seconds) == ("CPUSuppress", 1.0)


def test_no_nodeslo_skips_everything() -> None:
    d = decide(snap(slo=False), CFG, None)
    assert d.cgroup_writes == () and d.state == CPUSuppressState()


def test_enable_unset_skips() -> None:
    d = decide(snap(ResourceThresholdStrategy()), CFG, None)
    assert d.cgroup_writes == ()


def test_disabled_recovers_quota_once_and_cpuset_every_tick() -> None:
    thr = ResourceThresholdStrategy(enable=False)
    d = decide(snap(thr), CFG, None)
    full = "0-15"
    assert writes(d) == [
        ("cpu_cfs_quota_us", BE_DIR, -1),
        ("cpuset_cpus", BE_DIR, full),
        ("cpuset_cpus", f"{BE_DIR}podbe/", full),
        ("cpuset_cpus", f"{BE_DIR}podbe/bec/", full),
    ]
    assert d.state == CPUSuppressState(cfs_quota_recovered=True)
    assert not d.cgroup_writes[0].cacheable and d.cgroup_writes[1].cacheable
    d2 = decide(snap(thr), CFG, d.state)
    assert [w[0] for w in writes(d2)] == ["cpuset_cpus"] * 3


def test_full_be_set_excludes_reserved_system_and_lse() -> None:
    ann = {
        "node.koordinator.sh/reservation": json.dumps({"reservedCPUs": "0-1"}),
        "node.koordinator.sh/system-qos-resource": json.dumps({"cpuset": "2"}),
    }
    lse = pod("lse", "LSE", "2", {"scheduling.koordinator.sh/resource-status": json.dumps({"cpuset": "3-4"})})
    d = decide(
        snap(ResourceThresholdStrategy(enable=False), node_ann=ann, pods=(LS, BE, lse)),
        CFG,
        CPUSuppressState(True),
    )
    assert writes(d)[0] == ("cpuset_cpus", BE_DIR, "5-15")


def test_non_exclusive_system_cpuset_is_kept() -> None:
    ann = {"node.koordinator.sh/system-qos-resource": json.dumps({"cpuset": "2", "cpusetExclusive": False})}
    d = decide(snap(ResourceThresholdStrategy(enable=False), node_ann=ann), CFG, CPUSuppressState(True))
    assert writes(d)[0] == ("cpuset_cpus", BE_DIR, "0-15")


def test_be_cpu_manager_gate_wins_before_enable() -> None:
    alloc = pod("be2", "BE", None, {"scheduling.koordinator.sh/resource-status": json.dumps({"cpuset": "8"})})
    d = decide(snap(gates={"BECPUManager": True}, pods=(LS, BE, alloc)), CFG, None)
    dirs = [w[1] for w in writes(d)]
    assert writes(d)[0] == ("cpu_cfs_quota_us", BE_DIR, -1)
    assert dirs[1:] == [BE_DIR, BE.cgroup_dir, BE.containers[0].cgroup_dir]


def test_no_pods_or_no_node_sample_skips() -> None:
    assert decide(snap(pods=()), CFG, None).cgroup_writes == ()
    assert decide(snap(metrics={("pod_cpu_usage", "ls"): 4}), CFG, None).cgroup_writes == ()


def test_cpuset_policy_none_manager_union_then_bottom_up() -> None:
    # allowance 3400 → n = 4; current 4 → no growth limit; all 16 CPUs in the LS pool
    d = decide(snap(), CFG, None)
    w = writes(d)
    dirs = [BE_DIR, f"{BE_DIR}podbe/", f"{BE_DIR}podbe/bec/"]
    # one bucket sorted by (core, cpu): [0,8,1,9,...] → pairs (0,8), (1,9)
    assert w[:3] == [("cpuset_cpus", x, "0-3,8-9") for x in dirs]
    assert w[3:6] == [("cpuset_cpus", x, "0-1,8-9") for x in reversed(dirs)]
    assert w[6] == ("cpu_cfs_quota_us", BE_DIR, -1)
    assert d.gauges['be_suppress_cpu_cores{type="cpuset"}'] == 4
    assert d.gauges["be_suppress_ls_used_cpu_cores"] == 4


def test_cpuset_policy_static_manager() -> None:
    ann = {"kubelet.koordinator.sh/cpu-manager-policy": json.dumps({"policy": "static"})}
    d = decide(snap(), CPUSuppressConfig(nrt_annotations=ann), CPUSuppressState(True))
    assert writes(d) == [
        ("cpuset_cpus", BE_DIR, "0-15"),
        ("cpuset_cpus", f"{BE_DIR}podbe/", "0-15"),
        ("cpuset_cpus", f"{BE_DIR}podbe/bec/", "0-1,8-9"),
    ]


def test_cpuset_read_error_skips_adjustment_but_recovers_quota() -> None:
    d = decide(snap(cgroups={}), CFG, None)
    assert writes(d) == [("cpu_cfs_quota_us", BE_DIR, -1)]


def test_suppress_cpuset_min_growth_and_pools() -> None:
    topo = TOPO.cpus
    assert len(suppress_cpuset(-5000, topo, 0, None, []) or []) == 2  # at least 2
    # n = 10 but growth limit ceil(16×0.1) = 2 over current 2 → 4
    assert len(suppress_cpuset(10000, topo, 2, None, []) or []) == 4
    lsr = {
        "metadata": {
            "labels": {"koordinator.sh/qosClass": "LSR"},
            "annotations": {"scheduling.koordinator.sh/resource-status": json.dumps({"cpuset": "0-3,8-11"})},
        }
    }
    # 8 LSR + 8 LS; n = 4 → nLSR = 4×8/16 = 2 from LSR, 2 from LS
    picked = suppress_cpuset(4000, topo, 4, None, [lsr]) or []
    assert set(picked[:2]) <= {0, 1, 2, 3, 8, 9, 10, 11} and set(picked[2:]) <= {4, 5, 6, 7, 12, 13, 14, 15}


def test_suppress_cpuset_both_pools_empty() -> None:
    lse = {
        "metadata": {
            "labels": {"koordinator.sh/qosClass": "LSE"},
            "annotations": {"scheduling.koordinator.sh/resource-status": json.dumps({"cpuset": "0-15"})},
        }
    }
    assert suppress_cpuset(4000, TOPO.cpus, 4, None, [lse]) is None


def test_pool_too_small_contributes_nothing() -> None:
    lsr = {
        "metadata": {
            "labels": {"koordinator.sh/qosClass": "LSR"},
            "annotations": {"scheduling.koordinator.sh/resource-status": json.dumps({"cpuset": "0-13"})},
        }
    }
    # pools: LSR 14, LS 2 (14, 15); n = 16 → nLSR = 14, LS asked 2 → both fit
    assert len(suppress_cpuset(16000, TOPO.cpus, 16, None, [lsr]) or []) == 16
    small = {
        "metadata": {
            "labels": {"koordinator.sh/qosClass": "LSR"},
            "annotations": {"scheduling.koordinator.sh/resource-status": json.dumps({"cpuset": "0"})},
        }
    }
    # pools LSR 1, LS 15; n = 16 → nLSR = 1, LS asked 15 → 16 total; n = 17 impossible for LS (16 asked > 15)
    assert len(suppress_cpuset(17000, TOPO.cpus, 17, None, [small]) or []) == 1


def test_cfs_quota_policy_writes_quota_and_recovers_cpuset() -> None:
    thr = ResourceThresholdStrategy(
        enable=True, cpu_suppress_threshold_percent=65, cpu_suppress_policy="cfsQuota"
    )
    d = decide(snap(thr), CFG, CPUSuppressState(True))
    w = writes(d)
    assert w[0] == ("cpu_cfs_quota_us", BE_DIR, 260000)  # 340000 limited to 100000 + 160000
    assert not d.cgroup_writes[0].cacheable
    assert [x[2] for x in w[1:]] == ["0-15"] * 3
    assert d.state == CPUSuppressState(False)
    assert d.gauges['be_suppress_cpu_cores{type="cfsQuota"}'] == 2.6


def test_cfs_quota_v2_max_reads_as_unlimited() -> None:
    thr = ResourceThresholdStrategy(
        enable=True, cpu_suppress_threshold_percent=65, cpu_suppress_policy="cfsQuota"
    )
    cg = {("cpu_cfs_quota_us", BE_DIR): -1}  # the v2 reader turns "max 100000" into −1
    d = decide(snap(thr, cgroups=cg, version=CgroupVersion.V2), CFG, None)
    assert writes(d)[0] == ("cpu_cfs_quota_us", BE_DIR, 340000)


def test_cfs_quota_negative_allowance_and_read_error() -> None:
    assert adjust_cfs_quota(16, -2600, 2500) == 2000
    thr = ResourceThresholdStrategy(
        enable=True, cpu_suppress_threshold_percent=65, cpu_suppress_policy="cfsQuota"
    )
    d = decide(snap(thr, cgroups={}), CFG, CPUSuppressState(True))
    assert [w[0] for w in writes(d)] == ["cpuset_cpus"] * 3


def test_no_topology_no_cpuset_writes() -> None:
    d = decide(snap(ResourceThresholdStrategy(enable=False), topology=None), CFG, None)
    assert writes(d) == [("cpu_cfs_quota_us", BE_DIR, -1)]


def test_cgroup_file_types() -> None:
    assert CPU_QUOTA.name == "cpu_cfs_quota_us" and CPUSET_CPUS.name == "cpuset_cpus"
