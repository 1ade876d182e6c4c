"""What the koordlet reports on its NodeResourceTopology (docs/rules/koordlet-topology.md): from the node's
CPUs and per-NUMA memory, the kubelet CPU manager (config + checkpoint), the Node's reservation and
system-QoS annotations and this node's pods → the managed annotations, labels, topology policy and NUMA
zones (``NRTStatus``). Pure: the reporter reads the files and the informers and hands them in.

Values are encoded as Go's ``json.Marshal`` writes upstream's structs (compact, struct field order,
``omitempty``), so an upstream scheduler reads them unchanged and an unchanged node rewrites nothing.
Imports: standard library, apis.{constants,cpuset,kubeobjects,numa,quantity}, agent.system.nodeinfo,
agent.topology.{kubelet,zones}.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from agent.system.nodeinfo import CpuInfo, NodeTopology
from agent.topology.kubelet import (
    KubeletConfig,
    KubeletConfigError,
    kubelet_allocated,
    static_reserved_cpus,
    take_by_topology,
    topology_policy,
)
from agent.topology.zones import LABEL_ENABLE_NUMA_RESERVATION, ZoneError, build_zones
from apis import constants as c
from apis import numa
from apis.cpuset import CPUSetError, format_cpuset, parse_cpuset
from apis.kubeobjects import Node, Pod
from apis.quantity import Quantity, QuantityError

__all__ = [
    "ANNOTATION_POD_CPU_ALLOCS",
    "LABEL_ENABLE_NUMA_RESERVATION",
    "MANAGED_ANNOTATIONS",
    "MANAGED_LABELS",
    "KubeletView",
    "NRTBuildError",
    "NRTStatus",
    "SharePools",
    "build_status",
    "reported_cpus",
]

# Not in apis.numa (the scheduler does not read it).
ANNOTATION_POD_CPU_ALLOCS: Final = f"{c.NODE_DOMAIN_PREFIX}/pod-cpu-allocs"

MANAGED_ANNOTATIONS: Final = (
    c.ANNOTATION_CPU_BASIC_INFO,
    numa.ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    numa.ANNOTATION_CPU_SHARED_POOLS,
    numa.ANNOTATION_BE_CPU_SHARED_POOLS,
    numa.ANNOTATION_CPU_TOPOLOGY,
    ANNOTATION_POD_CPU_ALLOCS,
    numa.ANNOTATION_NODE_RESERVATION,
    c.ANNOTATION_NODE_SYSTEM_QOS_RESOURCE,
)
"""The annotation keys the koordlet owns on the NRT (compared, and overwritten when they differ)."""
MANAGED_LABELS: Final = (LABEL_ENABLE_NUMA_RESERVATION,)

SharePools = Callable[..., tuple[list[dict[str, Any]], list[dict[str, Any]]]]
"""``share_pools(cpus, pods, *, reserved, system_exclusive, kubelet_static_assigned)`` → (LS, BE) pools,
each ``{"socket", "node", "cpuset"}`` sorted by (socket, node)
(docs/rules/koordlet-topology.md#share-pools-annotation)."""


class NRTBuildError(ValueError):
    """Upstream skips the whole round on these (the last report stays): the message says why."""


@dataclass(frozen=True)
class KubeletView:
    """What the reporter read of the kubelet this round."""

    config: KubeletConfig | None
    """None: no KubeletConfiguration file (reported as policy ``none``)."""
    entries: Mapping[str, Mapping[str, str]] | None = None
    """The CPU manager checkpoint's entries (read only under the static policy); None: none."""


@dataclass(frozen=True)
class NRTStatus:
    annotations: dict[str, str]
    labels: dict[str, str]
    topology_policy: str
    zones: list[dict[str, Any]]
    warnings: tuple[str, ...] = field(default=(), compare=False)
    """Problems upstream only logs (the report goes on without that value)."""


def reported_cpus(topo: NodeTopology) -> list[CpuInfo]:
    """The node's CPUs as reported, by id. An id sysfs does not give is read as lscpu prints it:
    no NUMA node → node 0, no package → socket 0, no core id → the CPU is its own core
    (docs/rules/koordlet-topology.md#cpu-topology)."""
    return [
        CpuInfo(
            ci.cpu,
            ci.core if ci.core >= 0 else ci.cpu,
            ci.socket if ci.socket >= 0 else 0,
            ci.numa_node if ci.numa_node >= 0 else 0,
        )
        for ci in sorted(topo.cpus, key=lambda x: x.cpu)
    ]


def _cpu_topology(cpus: Sequence[CpuInfo]) -> str:
    return numa.format_cpu_topology([numa.CPUInfo(x.cpu, x.core, x.socket, x.numa_node) for x in cpus])


def _kubelet_policy(
    kubelet: KubeletView, cpus: Sequence[CpuInfo], pods: Sequence[Pod], warnings: list[str]
) -> tuple[str, list[dict[str, Any]] | None, frozenset[int]]:
    """(policy annotation, pod-cpu-allocs list or None, CPUs the static policy assigned)
    (docs/rules/koordlet-topology.md#kubelet-cpu-manager)."""
    cfg = kubelet.config
    if cfg is None:
        return numa.go_marshal({"policy": numa.KUBELET_POLICY_NONE}), None, frozenset()
    out: dict[str, Any] = {}
    if cfg.cpu_manager_policy:
        out["policy"] = cfg.cpu_manager_policy
    if cfg.cpu_manager_policy_options:
        out["options"] = {
            k: cfg.cpu_manager_policy_options[k] for k in sorted(cfg.cpu_manager_policy_options)
        }
    allocs: list[dict[str, Any]] | None = None
    assigned: frozenset[int] = frozenset()
    if cfg.cpu_manager_policy == numa.KUBELET_POLICY_STATIC:
        try:
            reserved = format_cpuset(static_reserved_cpus(cfg, cpus))
        except KubeletConfigError as e:
            warnings.append(f"kubelet static policy reserved CPUs: {e}")
            reserved = ""
        if reserved:
            out["reservedCPUs"] = reserved
        if kubelet.entries is not None:
            found, assigned = kubelet_allocated(kubelet.entries, pods)
            allocs = [a.to_json() for a in found] or None
    return numa.go_marshal(out), allocs, assigned


_RESERVATION_FIELDS: Final = ("resources", "reservedCPUs", "applyPolicy")


def _decode_reservation(text: str) -> dict[str, Any]:
    """Go's decoding of ``NodeReservation``: ``{"resources": {name: Quantity}, "reservedCPUs",
    "applyPolicy"}``."""
    where = numa.ANNOTATION_NODE_RESERVATION
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"{where}: invalid JSON: {e}") from None
    if obj is None:
        return {}
    f = numa.go_fields(obj, _RESERVATION_FIELDS, where)
    out: dict[str, Any] = {}
    res = f.get("resources")
    if res is not None:
        if not isinstance(res, Mapping):
            raise ValueError(f"{where}.resources: expected an object")
        try:
            out["resources"] = {str(k): Quantity.from_json(v) for k, v in res.items()}
        except QuantityError as e:
            raise ValueError(f"{where}.resources: {e}") from None
    for name in ("reservedCPUs", "applyPolicy"):
        value = f.get(name)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{where}.{name}: expected a string, got {json.dumps(value)}")
        out[name] = value or ""
    return out


def _node_reservation(
    annotations: Mapping[str, Any], cpus: Sequence[CpuInfo], warnings: list[str]
) -> tuple[str, frozenset[int]]:
    """The NRT copy of the node's ``node.koordinator.sh/reservation`` with ``reservedCPUs`` resolved:
    canonical when given (unparsable → none), else ``ceil(resources.cpu)`` CPUs by ``take_by_topology``
    (docs/rules/koordlet-topology.md#reporting). Returns (annotation, reserved CPUs)."""
    text = annotations.get(numa.ANNOTATION_NODE_RESERVATION)
    res: dict[str, Any] = {}
    if text:
        try:
            res = _decode_reservation(str(text))
        except ValueError as e:
            warnings.append(f"node reservation ignored: {e}")
    reserved: frozenset[int] = frozenset()
    if res.get("reservedCPUs"):
        try:
            reserved = parse_cpuset(res["reservedCPUs"])
        except CPUSetError:
            reserved = frozenset()
    else:
        cpu = res.get("resources", {}).get("cpu")
        milli = cpu.milli_value() if isinstance(cpu, Quantity) else 0
        if milli > 0:
            every = frozenset(x.cpu for x in cpus)
            reserved = take_by_topology(cpus, every, -(-milli // 1000)) or frozenset()
    out: dict[str, Any] = {}
    resources = res.get("resources")
    if resources:
        out["resources"] = {k: str(resources[k]) for k in sorted(resources)}
    if reserved:
        out["reservedCPUs"] = format_cpuset(reserved)
    if res.get("applyPolicy"):
        out["applyPolicy"] = res["applyPolicy"]
    return numa.go_marshal(out), reserved


def _system_qos(annotations: Mapping[str, Any] | None) -> tuple[str, frozenset[int]]:
    """The NRT copy of ``node.koordinator.sh/system-qos-resource`` (``null`` when the Node has no
    annotations at all, ``{}`` when it lacks this one) and its cpuset when exclusive (``cpusetExclusive``
    unset counts as true). ``NRTBuildError`` when it does not decode, as upstream."""
    if annotations is None:
        return "null", frozenset()
    text = annotations.get(c.ANNOTATION_NODE_SYSTEM_QOS_RESOURCE)
    if text is None:
        return "{}", frozenset()
    where = c.ANNOTATION_NODE_SYSTEM_QOS_RESOURCE
    try:
        obj = json.loads(str(text))
        f = numa.go_fields(obj, ("cpuset", "cpusetExclusive"), where) if obj is not None else {}
    except (ValueError, RecursionError) as e:
        raise NRTBuildError(f"node annotation {where}: {e}") from None
    cpuset, exclusive = f.get("cpuset"), f.get("cpusetExclusive")
    if cpuset is not None and not isinstance(cpuset, str):
        raise NRTBuildError(f"node annotation {where}.cpuset: expected a string, got {json.dumps(cpuset)}")
    if exclusive is not None and not isinstance(exclusive, bool):
        raise NRTBuildError(
            f"node annotation {where}.cpusetExclusive: expected a boolean, got {json.dumps(exclusive)}"
        )
    out: dict[str, Any] = {}
    if cpuset:
        out["cpuset"] = cpuset
    if exclusive is not None:
        out["cpusetExclusive"] = exclusive
    cpus: frozenset[int] = frozenset()
    if cpuset and exclusive is not False:
        try:
            cpus = parse_cpuset(cpuset)
        except CPUSetError:
            cpus = frozenset()
    return numa.go_marshal(out), cpus


def _pools_json(pools: Sequence[Mapping[str, Any]]) -> str:
    return numa.format_cpu_shared_pools(
        [numa.CPUSharedPool(int(p["socket"]), int(p["node"]), str(p.get("cpuset") or "")) for p in pools]
    )


def build_status(
    topo: NodeTopology,
    numa_meminfo: Mapping[int, Mapping[str, int]],
    kubelet: KubeletView,
    node: Node,
    pods: Sequence[Pod],
    share_pools: SharePools,
) -> NRTStatus:
    """One round's report (docs/rules/koordlet-topology.md#reporting). ``NRTBuildError`` when upstream
    would skip the round: no CPUs known, NUMA counts of CPUs and meminfo differing, an undecodable
    system-QoS annotation."""
    cpus = reported_cpus(topo)
    if not cpus:
        raise NRTBuildError("node CPU info not collected yet")
    warnings: list[str] = []
    meta = node.get("metadata") or {}
    node_annotations = meta.get("annotations")
    labels = meta.get("labels") or {}
    try:
        zones = build_zones(cpus, numa_meminfo, node)
    except ZoneError as e:
        raise NRTBuildError(str(e)) from None
    policy_json, allocs, assigned = _kubelet_policy(kubelet, cpus, pods, warnings)
    reservation_json, reserved = _node_reservation(node_annotations or {}, cpus, warnings)
    system_json, system_cpus = _system_qos(node_annotations)
    static = kubelet.config is not None and kubelet.config.cpu_manager_policy == numa.KUBELET_POLICY_STATIC
    ls_pools, be_pools = share_pools(
        cpus,
        pods,
        reserved=reserved,
        system_exclusive=system_cpus,
        kubelet_static_assigned=assigned if static else frozenset(),
    )
    annotations = {
        numa.ANNOTATION_CPU_TOPOLOGY: _cpu_topology(cpus),
        numa.ANNOTATION_CPU_SHARED_POOLS: _pools_json(ls_pools),
        numa.ANNOTATION_KUBELET_CPU_MANAGER_POLICY: policy_json,
        numa.ANNOTATION_BE_CPU_SHARED_POOLS: _pools_json(be_pools),
        ANNOTATION_POD_CPU_ALLOCS: numa.go_marshal(allocs),
        numa.ANNOTATION_NODE_RESERVATION: reservation_json,
        c.ANNOTATION_NODE_SYSTEM_QOS_RESOURCE: system_json,
    }
    out_labels = {}
    if labels.get(LABEL_ENABLE_NUMA_RESERVATION):
        out_labels[LABEL_ENABLE_NUMA_RESERVATION] = str(labels[LABEL_ENABLE_NUMA_RESERVATION])
    cfg = kubelet.config
    policy = topology_policy(cfg.topology_manager_policy, cfg.topology_manager_scope) if cfg else "None"
    return NRTStatus(annotations, out_labels, policy, zones, tuple(warnings))
