"""A node's CPU topology and the scheduler-side options read from its NodeResourceTopology
(docs/rules/scheduler-nodenumaresource.md#topology): per logical CPU its socket, NUMA node and a
node-unique core key ``socket<<16 | core``; the counts and per-core/socket/node sizes; the CPUs the
scheduler never hands out (kubelet and node-reservation ``reservedCPUs``) and MaxRefCount.
Pure. Imports: the standard library, apis (cpuset, numa).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from apis.cpuset import CPUSetError, parse_cpuset
from apis.numa import (
    ANNOTATION_CPU_TOPOLOGY,
    ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    NUMA_POLICY_BEST_EFFORT,
    NUMA_POLICY_NONE,
    NUMA_POLICY_RESTRICTED,
    NUMA_POLICY_SINGLE_NUMA_NODE,
    CPUInfo,
    KubeletCPUManagerPolicy,
    node_reservation_reserved_cpus,
    parse_cpu_topology,
    parse_kubelet_cpu_manager_policy,
)


@dataclass(frozen=True, slots=True)
class CPU:
    """One logical CPU: ``core`` is the node-unique core key."""

    cpu: int
    core: int
    node: int
    socket: int


@dataclass(slots=True)
class CPUTopology:
    """The CPUs by id and the four counts (docs/rules/scheduler-nodenumaresource.md#topology)."""

    details: dict[int, CPU] = field(default_factory=dict)
    num_sockets: int = 0
    num_nodes: int = 0
    num_cores: int = 0

    @classmethod
    def of(cls, infos: Iterable[CPUInfo]) -> CPUTopology:
        """Built as upstream's builder: a repeated id replaces the CPU, the counts only grow."""
        topo = cls()
        seen: dict[int, dict[int, set[int]]] = {}
        for info in infos:
            core = info.socket << 16 | info.core
            topo.details[info.id] = CPU(info.id, core, info.node, info.socket)
            nodes = seen.get(info.socket)
            if nodes is None:
                topo.num_sockets += 1
                nodes = seen[info.socket] = {}
            cores = nodes.get(info.node)
            if cores is None:
                topo.num_nodes += 1
                cores = nodes[info.node] = set()
            if core not in cores:
                topo.num_cores += 1
                cores.add(core)
        return topo

    @property
    def num_cpus(self) -> int:
        return len(self.details)

    @property
    def valid(self) -> bool:
        return bool(self.num_sockets and self.num_nodes and self.num_cores and self.num_cpus)

    @property
    def cpus_per_core(self) -> int:
        return self.num_cpus // self.num_cores if self.num_cores else 0

    @property
    def cpus_per_socket(self) -> int:
        return self.num_cpus // self.num_sockets if self.num_sockets else 0

    @property
    def cpus_per_node(self) -> int:
        return self.num_cpus // self.num_nodes if self.num_nodes else 0

    def cpus_in_socket(self, socket: int) -> frozenset[int]:
        return frozenset(c for c, info in self.details.items() if info.socket == socket)


@dataclass(slots=True)
class TopologyOptions:
    """What the plugin keeps of one node's NodeResourceTopology."""

    topology: CPUTopology = field(default_factory=CPUTopology)
    reserved_cpus: frozenset[int] = frozenset()
    max_ref_count: int = 1
    kubelet: KubeletCPUManagerPolicy | None = None
    numa_policy: str = NUMA_POLICY_NONE  # the kubelet topology-manager policy the NRT reports


_TOPOLOGY_POLICIES = {
    "BestEffort": NUMA_POLICY_BEST_EFFORT,
    "Restricted": NUMA_POLICY_RESTRICTED,
    "SingleNUMANodePodLevel": NUMA_POLICY_SINGLE_NUMA_NODE,
}


def _annotations(nrt: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = nrt.get("metadata")
    ann = meta.get("annotations") if isinstance(meta, Mapping) else None
    return ann if isinstance(ann, Mapping) else {}


def options_of(nrt: Mapping[str, Any], max_ref_count: int = 1) -> TopologyOptions:
    """A NodeResourceTopology's options; an annotation that does not decode counts as absent (an
    undecodable topology is an invalid one)."""
    ann = _annotations(nrt)
    try:
        infos = parse_cpu_topology(ann.get(ANNOTATION_CPU_TOPOLOGY) or "{}")
    except ValueError:
        infos = []
    kubelet: KubeletCPUManagerPolicy | None = None
    reserved: frozenset[int] = frozenset()
    if ANNOTATION_KUBELET_CPU_MANAGER_POLICY in ann:
        try:
            kubelet = parse_kubelet_cpu_manager_policy(str(ann[ANNOTATION_KUBELET_CPU_MANAGER_POLICY]))
            reserved = parse_cpuset(kubelet.reserved_cpus)
        except (ValueError, CPUSetError):
            pass
    reserved |= node_reservation_reserved_cpus(ann)
    policy = NUMA_POLICY_NONE
    for p in nrt.get("topologyPolicies") or ():
        if p in _TOPOLOGY_POLICIES:
            policy = _TOPOLOGY_POLICIES[p]
            break
    return TopologyOptions(CPUTopology.of(infos), reserved, max_ref_count, kubelet, policy)


def topology_from_detail(detail: object, where: str) -> CPUTopology:
    """A scenario's ``cpuTopology`` (the annotation's decoded shape); ValueError naming ``where``."""
    return CPUTopology.of(parse_cpu_topology(detail, where))
