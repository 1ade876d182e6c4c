"""The CPUSetAllocator reconcile strategy (docs/rules/koordlet-cpuset.md#reconcile): the pure decide over
share pools and the container rule, the leveled writes (a v1 pod dir widened before its container), CFS
quota lifted for cpuset pods, the split with CPU suppress, and the runner writing through the executor on
the fake host tree (v1 and v2): drift re-asserted, a deleted LSR pod's CPUs back in the LS pool."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest

from agent.podmeta import PodMeta, pod_meta
from agent.qosmanager import cpusuppress
from agent.qosmanager.cpusetalloc import CPUSetAllocatorConfig, CPUSetAllocatorStrategy, decide_cpuset
from agent.qosmanager.cpusuppress import CPUSuppressConfig
from agent.qosmanager.framework import Snapshot
from agent.qosmanager.registry import REGISTRY, StrategyDeps, build_entries
from agent.qosmanager.runner import HostCgroupView, QoSManager, StrategyEntry
from agent.resourceexecutor.executor import ResourceExecutor
from agent.system.cgroup import CPU_QUOTA, CPUSET_CPUS, CgroupFile, CgroupVersion
from agent.system.nodeinfo import CpuInfo, NodeTopology
from agent.system.podcgroup import CgroupDriver
from apis.kubeobjects import Pod
from apis.nodeslo import NodeSLOSpec, ResourceThresholdStrategy
from tests.fixtures.hosttree import HostTree
from tests.unit.agent.qosmanager.fakeclock import FakeClock

NOW = datetime(2026, 11, 27, 12, 0, 0, tzinfo=UTC)
# NUMA node 0 = CPUs 0-3 (socket 0), node 1 = CPUs 4-7 (socket 1)
TOPO = NodeTopology(tuple(CpuInfo(c, c % 4, c // 4, c // 4) for c in range(8)), (0, 1))
KUBE_QOS = {"g": "Guaranteed", "b": "Burstable", "be": "BestEffort"}
CFG = CPUSetAllocatorConfig()


def pod(name: str, kube: str, qos: str | None = None, status: Any = None, **spec: Any) -> PodMeta:
    labels = {"koordinator.sh/qosClass": qos} if qos else {}
    ann = {"scheduling.koordinator.sh/resource-status": json.dumps(status)} if status is not None else {}
    obj: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}",
                     "labels": labels, "annotations": ann},
        "spec": {"containers": [{"name": "c"}], **spec},
        "status": {"qosClass": KUBE_QOS[kube], "phase": "Running",
                   "containerStatuses": [{"name": "c", "containerID": f"containerd://{name}-c"}]},
    }  # fmt: skip
    return pod_meta(cast(Pod, obj), CgroupDriver.CGROUPFS)


LSR = pod("lsr", "g", "LSR", {"cpuset": "0-1"})
LSE = pod("lse", "g", "LSE", {"cpuset": "4"})
LS = pod("ls", "b", "LS")
PLAIN = pod("plain", "b")
BE = pod("be", "be", "BE")


class View:
    """Current cpusets by dir (missing: all CPUs)."""

    def __init__(self, cpusets: Mapping[str, list[int]] | None = None) -> None:
        self.cpusets = cpusets or {}

    def read(self, spec: CgroupFile[Any], cgroup_dir: str) -> Any | None:
        return self.cpusets.get(cgroup_dir, list(range(8))) if spec is CPUSET_CPUS else None

    def children(self, cgroup_dir: str) -> list[str]:
        return []


def snap(
    pods: list[PodMeta],
    *,
    node: Any = None,
    view: Any = None,
    gates: Mapping[str, bool] | None = None,
    version: CgroupVersion = CgroupVersion.V1,
    topology: NodeTopology | None = TOPO,
) -> Snapshot:
    return Snapshot(
        now=NOW, node=node, node_slo=None, pods=pods, metrics=None,  # type: ignore[arg-type]
        cgroups=view if view is not None else View(), cgroup_version=version,
        cgroup_driver=CgroupDriver.CGROUPFS, topology=topology, gates=gates or {},
    )  # fmt: skip


def writes(s: Snapshot, cfg: CPUSetAllocatorConfig = CFG) -> list[list[tuple[str, str, Any]]]:
    d = decide_cpuset(s, cfg)
    name = {id(CPUSET_CPUS): "cpuset.cpus", id(CPU_QUOTA): "cpu.cfs_quota_us"}
    return [[(w.cgroup_dir, name[id(w.file)], w.value) for w in level] for level in d.leveled_writes]


def cdir(p: PodMeta) -> str:
    return p.containers[0].cgroup_dir


def test_rule_per_container_and_quota_for_the_cpuset_pod() -> None:
    # LS pool = 0-7 minus LSR's 0-1 and LSE's 4 = 2-3,5-7; BE pool = 0-7 minus LSE's 4.
    pods, ctrs = writes(snap([LSR, LSE, LS, PLAIN, BE]))
    ls_pool = [2, 3, 5, 6, 7]
    assert ctrs == [
        (cdir(LSR), "cpuset.cpus", [0, 1]),
        (cdir(LSR), "cpu.cfs_quota_us", -1),
        (cdir(LSE), "cpuset.cpus", [4]),
        (cdir(LSE), "cpu.cfs_quota_us", -1),
        (cdir(LS), "cpuset.cpus", ls_pool),
        (cdir(PLAIN), "cpuset.cpus", ls_pool),
    ]  # BE below besteffort: "" → no write
    assert pods == [(LSR.cgroup_dir, "cpu.cfs_quota_us", -1), (LSE.cgroup_dir, "cpu.cfs_quota_us", -1)]


def test_v1_pod_dir_widened_only_when_it_lacks_cpus() -> None:
    # LS pool = 0-7 minus LSR's 0-1 = 2-7: the LS pod dir 2-8 holds it, the LSR pod dir 4-7 lacks 0-1
    view = View({LSR.cgroup_dir: [4, 5, 6, 7], LS.cgroup_dir: [2, 3, 4, 5, 6, 7, 8]})
    pods, _ = writes(snap([LSR, LS], view=view))
    assert (LSR.cgroup_dir, "cpuset.cpus", [0, 1, 4, 5, 6, 7]) in pods
    assert not any(d == LS.cgroup_dir for d, _, _ in pods)
    pods_v2, _ = writes(snap([LSR, LS], view=view, version=CgroupVersion.V2))
    assert [f for _, f, _ in pods_v2] == ["cpu.cfs_quota_us"]


def test_node_annotations_reservation_system_qos_and_static_policy() -> None:
    node = {"metadata": {"annotations": {
        "node.koordinator.sh/reservation": json.dumps({"reservedCPUs": "7"}),
        "node.koordinator.sh/system-qos-resource": json.dumps({"cpuset": "6"}),
        "kubelet.koordinator.sh/cpu-manager-policy": json.dumps({"policy": "static"}),
    }}}  # fmt: skip
    system = pod("sys", "b", "SYSTEM")
    _, ctrs = writes(snap([LS, PLAIN, system], node=node))
    # LS pool: 0-7 minus reserved 7 minus exclusive SYSTEM 6 = 0-5; PLAIN under static: untouched
    assert ctrs == [(cdir(LS), "cpuset.cpus", [0, 1, 2, 3, 4, 5]), (cdir(system), "cpuset.cpus", [6])]
    # the NRT annotations, when configured, are read instead of the node's
    cfg = CPUSetAllocatorConfig(
        nrt_annotations={"kubelet.koordinator.sh/cpu-manager-policy": '{"policy":"none"}'}
    )
    _, ctrs = writes(snap([LS, PLAIN], node=node), cfg)
    assert [v for _, _, v in ctrs] == [list(range(8)), list(range(8))]


def test_kubelet_static_cpus_only_under_static_policy() -> None:
    cfg = CPUSetAllocatorConfig(kubelet_static_assigned=frozenset({0, 1}))
    assert writes(snap([LS]), cfg)[1] == [(cdir(LS), "cpuset.cpus", list(range(8)))]
    static = {
        "metadata": {"annotations": {"kubelet.koordinator.sh/cpu-manager-policy": '{"policy":"static"}'}}
    }
    assert writes(snap([LS], node=static), cfg)[1] == [(cdir(LS), "cpuset.cpus", list(range(2, 8)))]


def test_kubelet_allocs_from_the_nrt_under_static_policy() -> None:
    allocs = [
        {"uid": "k1", "cpuset": "6-7", "managedByKubelet": True},
        {"uid": "k2", "cpuset": "5", "managedByKubelet": False},
        {"uid": "k3", "cpuset": "x", "managedByKubelet": True},
    ]
    nrt = {"node.koordinator.sh/pod-cpu-allocs": json.dumps(allocs)}
    policy = {"kubelet.koordinator.sh/cpu-manager-policy": '{"policy":"static"}'}
    # static: the kubelet's 6-7 leave the LS pool (the entry not managed by the kubelet and "x" name none)
    cfg = CPUSetAllocatorConfig(nrt_annotations={**nrt, **policy})
    assert writes(snap([LS]), cfg)[1] == [(cdir(LS), "cpuset.cpus", [0, 1, 2, 3, 4, 5])]
    # policy none: pod-cpu-allocs is not read
    assert writes(snap([LS]), CPUSetAllocatorConfig(nrt_annotations=nrt))[1] == [
        (cdir(LS), "cpuset.cpus", list(range(8)))
    ]


def test_no_topology_only_own_cpusets_and_quota_can_be_left() -> None:
    _, ctrs = writes(snap([LSR, LS], topology=None))
    assert [(d, f) for d, f, _ in ctrs] == [(cdir(LSR), "cpuset.cpus"), (cdir(LSR), "cpu.cfs_quota_us")]
    pods, ctrs = writes(snap([LSR]), CPUSetAllocatorConfig(unset_cfs_quota=False))
    assert pods == [] and ctrs == [(cdir(LSR), "cpuset.cpus", [0, 1])]


def test_kata_pod_keeps_pod_quota_only() -> None:
    kata = pod("k", "g", "LSR", {"cpuset": "2"}, runtimeClassName="kata")
    assert writes(snap([kata])) == [[(kata.cgroup_dir, "cpu.cfs_quota_us", -1)], []]


def test_cpu_suppress_owns_besteffort_pods() -> None:
    numa_be = pod(
        "nbe",
        "be",
        "BE",
        {"numaNodeResources": [{"node": 1, "resources": {"kubernetes.io/batch-cpu": "1000"}}]},
    )
    ls_be = pod("lsbe", "be", "LS")
    # suppress off: the LS-labelled pod below besteffort gets the LS pool; the BE NUMA pod (gate off): ""
    assert writes(snap([ls_be, numa_be]))[1] == [(cdir(ls_be), "cpuset.cpus", list(range(8)))]
    # suppress on: every besteffort pod is CPU suppress's
    assert writes(snap([ls_be, numa_be], gates={"BECPUSuppress": True})) == []
    # suppress on with BECPUManager: the pod with a CPU allocation is ours (node 1's BE pool)
    gates = {"BECPUSuppress": True, "BECPUManager": True}
    assert writes(snap([ls_be, numa_be], gates=gates)) == [[], [(cdir(numa_be), "cpuset.cpus", [4, 5, 6, 7])]]


def test_undecodable_status_skips_the_container() -> None:
    bad = pod("bad", "b", "LS")
    bad.pod["metadata"]["annotations"]["scheduling.koordinator.sh/resource-status"] = "{"
    assert writes(snap([bad, LS]))[1] == [(cdir(LS), "cpuset.cpus", list(range(8)))]


# --- through the runner and the executor, on the fake host tree -------------------------------------
def _host(tmp_path: Path, version: CgroupVersion, pods: list[PodMeta]) -> HostTree:
    host = HostTree(tmp_path / "host", version, CgroupDriver.CGROUPFS)
    for p in pods:
        for d in (p.cgroup_dir, cdir(p)):
            host.mkdir(d)
            host.set_cpuset(d, "0-7")
            host.set_cpu_limit(d, 200000)
    return host


def _cpus(host: HostTree, d: str) -> str:
    # v2: what was written is cpuset.cpus (the fake tree's cpuset.cpus.effective is not recomputed)
    path = host.paths.cgroup_root / ("cpuset" if host.version is CgroupVersion.V1 else "") / d / "cpuset.cpus"
    return path.read_text().strip()


def _quota(host: HostTree, d: str) -> str:
    return host.path_of(CPU_QUOTA, d).read_text().split()[0]


@pytest.mark.parametrize("version", list(CgroupVersion), ids=lambda v: v.value)
def test_runner_applies_reasserts_and_frees(tmp_path: Path, version: CgroupVersion) -> None:
    host = _host(tmp_path, version, [LSR, LS])
    pods = [LSR, LS]

    def snapshot(now: datetime) -> Snapshot:
        return snap(list(pods), view=HostCgroupView(host.paths, version), version=version)

    executor = ResourceExecutor(host.paths, version, "n1")
    entry = StrategyEntry(CPUSetAllocatorStrategy(), CPUSetAllocatorConfig)
    mgr = QoSManager([entry], snapshot, executor, None, clock=FakeClock(NOW))
    assert entry.strategy.interval_seconds == 10.0
    mgr.tick(entry)
    assert _cpus(host, cdir(LSR)) == "0-1" and _cpus(host, cdir(LS)) == "2-7"
    assert _cpus(host, LSR.cgroup_dir) == "0-7"  # never narrowed
    assert _quota(host, LSR.cgroup_dir) in ("-1", "max") and _quota(host, cdir(LSR)) in ("-1", "max")
    assert _quota(host, cdir(LS)) == "200000"
    # drift: someone widens the LSR container again → re-asserted on the next tick
    host.set_cpuset(cdir(LSR), "0-7")
    mgr.tick(entry)
    assert _cpus(host, cdir(LSR)) == "0-1"
    assert any(r.drift for r in entry.last_results if r.path.endswith("cpuset.cpus"))
    # the LSR pod is deleted: its CPUs are back in the LS pool on the next tick
    pods.remove(LSR)
    mgr.tick(entry)
    assert _cpus(host, cdir(LS)) == "0-7"


def test_runner_v1_widens_the_pod_dir_before_the_container(tmp_path: Path) -> None:
    version = CgroupVersion.V1
    host = _host(tmp_path, version, [LSR])
    host.set_cpuset(LSR.cgroup_dir, "4-7")
    host.set_cpuset(cdir(LSR), "4-7")
    executor = ResourceExecutor(host.paths, version, "n1")
    entry = StrategyEntry(CPUSetAllocatorStrategy(), CPUSetAllocatorConfig)
    view = HostCgroupView(host.paths, version)
    QoSManager([entry], lambda now: snap([LSR], view=view), executor, None, clock=FakeClock(NOW)).tick(entry)
    order = [
        (r.path.rsplit("/", 2)[-2], r.phase, r.new)
        for r in entry.last_results
        if r.path.endswith("cpuset.cpus")
    ]
    pod_leaf, ctr_leaf = (
        LSR.cgroup_dir.rstrip("/").rsplit("/", 1)[-1],
        cdir(LSR).rstrip("/").rsplit("/", 1)[-1],
    )
    # merge phase top-down (pod widened first, container loosened to the union), then final bottom-up
    assert order == [
        (pod_leaf, "merge", "0-1,4-7"),
        (ctr_leaf, "merge", "0-1,4-7"),
        (ctr_leaf, "final", "0-1"),
        (pod_leaf, "final", "0-1,4-7"),
    ]
    assert _cpus(host, LSR.cgroup_dir) == "0-1,4-7" and _cpus(host, cdir(LSR)) == "0-1"


def test_registration_default_on_and_reads_the_nrt_each_tick() -> None:
    reg = next(r for r in REGISTRY if r.name == "CPUSetAllocator")
    assert (reg.gates, reg.default_enabled) == (("CPUSetAllocator",), True)
    assert [e.strategy.name for e in build_entries({"BatchResource": False})] == ["CPUSetAllocator"]
    assert build_entries({"CPUSetAllocator": False, "BatchResource": False}) == []
    current: list[dict[str, str] | None] = [None]
    (entry,) = build_entries({"BatchResource": False}, StrategyDeps(nrt_annotations=lambda: current[0]))
    assert entry.config() == CPUSetAllocatorConfig()
    current[0] = {"kubelet.koordinator.sh/cpu-manager-policy": '{"policy":"static"}'}
    assert entry.config().nrt_annotations == current[0]


@pytest.mark.parametrize("be_manager", [False, True])
def test_never_the_same_file_as_cpu_suppress(tmp_path: Path, be_manager: bool) -> None:
    """docs/rules/koordlet-cpuset.md#with-cpu-suppress: CPU suppress (here its recovery, which walks every
    dir below besteffort, or its BECPUManager path) and CPUSetAllocator over one tree write disjoint files,
    and between them every container below besteffort that has a CPU allocation is written by one of them."""
    numa_be = pod("nbe", "be", "BE", {"numaNodeResources": [{"node": 1, "resources": {"cpu": "1"}}]})
    ls_be = pod("lsbe", "be", "LS")
    pods = [LSR, LS, PLAIN, BE, ls_be, numa_be]
    host = _host(tmp_path, CgroupVersion.V1, pods)
    gates = {"BECPUSuppress": True, "BECPUManager": be_manager}
    s = snap(pods, view=HostCgroupView(host.paths, CgroupVersion.V1), gates=gates)
    s = replace(
        s, node_slo=NodeSLOSpec(resource_used_threshold_with_be=ResourceThresholdStrategy(enable=False))
    )
    ours = decide_cpuset(s, CFG)
    theirs = cpusuppress.decide(s, CPUSuppressConfig(), None)
    mine = {(w.cgroup_dir, id(w.file)) for level in ours.leveled_writes for w in level}
    suppress = {(w.cgroup_dir, id(w.file)) for w in theirs.cgroup_writes}
    assert suppress and mine and not (mine & suppress)
    assert (cdir(numa_be), id(CPUSET_CPUS)) in (mine if be_manager else suppress)
    assert (cdir(ls_be), id(CPUSET_CPUS)) in suppress
