"""The NodeResourceTopology's NUMA zones (docs/rules/koordlet-topology.md#numa-zones): one ``Node`` zone
per NUMA node with its CPU count and memory, the optional NUMA-level reservation, and how a new zone list
is compared with and merged into the one already on the object. Zones are plain JSON dicts as the API
server holds them (quantities as strings). Pure. Imports: standard library, apis.{kubeobjects,quantity},
agent.system.nodeinfo.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from agent.system.nodeinfo import CpuInfo
from apis.kubeobjects import Node
from apis.quantity import Format, Quantity, QuantityError

__all__ = [
    "LABEL_ENABLE_NUMA_RESERVATION",
    "MANAGED_RESOURCES",
    "ZONE_TYPE",
    "ZoneError",
    "build_zones",
    "merge_zones",
    "zones_equal",
]

ZONE_TYPE: Final = "Node"
LABEL_ENABLE_NUMA_RESERVATION: Final = "node.koordinator.sh/enable-numa-reservation"
MANAGED_RESOURCES: Final = ("cpu", "memory", "kubernetes.io/gpu", "hugepages-2Mi", "hugepages-1Gi")
"""The zone resources the koordlet owns: only these are compared (another component may add others)."""


class ZoneError(ValueError):
    """The CPU and NUMA memory views disagree; the zones cannot be built this round."""


def _zone_name(node: int) -> str:
    return f"node-{node}"


def _node_reserved(node: Node) -> dict[str, Quantity]:
    """capacity − allocatable of the Node's cpu and memory, where positive (the kubelet's reservation)."""
    status = node.get("status") or {}
    capacity, allocatable = status.get("capacity") or {}, status.get("allocatable") or {}
    out: dict[str, Quantity] = {}
    for name in ("cpu", "memory"):
        if name not in capacity or name not in allocatable:
            continue
        try:
            diff = Quantity.from_json(capacity[name]) - Quantity.from_json(allocatable[name])
        except QuantityError:
            continue
        if diff.sign() > 0:
            out[name] = diff
    return out


def build_zones(
    cpus: Sequence[CpuInfo], numa_meminfo: Mapping[int, Mapping[str, int]], node: Node
) -> list[dict[str, Any]]:
    """Zones ``node-0 … node-(N-1)`` for the N NUMA nodes with meminfo: ``cpu`` = CPUs on it, ``memory`` =
    its MemTotal, ``hugepages-2Mi``/``hugepages-1Gi`` = 0 (hugepage reporting is off, as upstream's
    default). With the Node label ``node.koordinator.sh/enable-numa-reservation=true``, each zone's
    allocatable gives up ``ceil(reserved / N)`` (milli) of the kubelet's cpu and memory reservation, never
    below 0. ``ZoneError`` when the CPUs sit on a different number of NUMA nodes than have meminfo."""
    n = len(numa_meminfo)
    from_cpus = len({x.numa_node for x in cpus})
    if from_cpus != n:
        raise ZoneError(f"NUMA node number not matched: cpu {from_cpus}, NUMA {n}")
    labels = (node.get("metadata") or {}).get("labels") or {}
    per_numa: dict[str, Quantity] = {}
    if labels.get(LABEL_ENABLE_NUMA_RESERVATION) == "true" and n > 0:
        for name, q in _node_reserved(node).items():
            share = Quantity.from_milli(-(-q.milli_value() // n), q.format)
            if share.sign() > 0:
                per_numa[name] = share
    zones: list[dict[str, Any]] = []
    for i in range(n):
        mem = (numa_meminfo.get(i) or {}).get("MemTotal", 0)
        capacity = {
            "cpu": Quantity.from_int(sum(1 for x in cpus if x.numa_node == i)),
            "hugepages-1Gi": Quantity.from_int(0, Format.BINARY_SI),
            "hugepages-2Mi": Quantity.from_int(0, Format.BINARY_SI),
            "memory": Quantity.from_int(mem, Format.BINARY_SI),
        }
        resources = []
        for name in sorted(capacity):
            cap = capacity[name]
            alloc = cap
            if name in per_numa:
                alloc = cap - per_numa[name]
                if alloc.sign() < 0:
                    alloc = Quantity.from_int(0, alloc.format)
            resources.append(
                {"name": name, "capacity": str(cap), "allocatable": str(alloc), "available": str(alloc)}
            )
        zones.append({"name": _zone_name(i), "type": ZONE_TYPE, "resources": resources})
    return zones


def _allocatable(zones: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Quantity]]:
    """Zone name → resource name → allocatable (upstream's ``ZoneListToZoneResourceList``)."""
    out: dict[str, dict[str, Quantity]] = {}
    for zone in zones:
        res = out.setdefault(str(zone.get("name")), {})
        for info in zone.get("resources") or []:
            try:
                res[str(info.get("name"))] = Quantity.from_json(info.get("allocatable"))
            except QuantityError:
                continue
    return out


def _to_zones(by_zone: Mapping[str, Mapping[str, Quantity]]) -> list[dict[str, Any]]:
    """Back to a zone list: capacity = allocatable = available, resources and zones sorted by name."""
    return [
        {
            "name": name,
            "type": ZONE_TYPE,
            "resources": [
                {"name": r, "capacity": str(q), "allocatable": str(q), "available": str(q)}
                for r, q in sorted(by_zone[name].items())
            ],
        }
        for name in sorted(by_zone)
    ]


def merge_zones(
    current: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The zone list written: the current zones the new list also names, each resource overwritten by the
    new allocatable, new zones added; every value written as its allocatable (upstream's
    ``MergeZoneList(TrimDifferentZone(current, new), new)``)."""
    cur, nxt = _allocatable(current), _allocatable(new)
    merged = {name: dict(res) for name, res in cur.items() if name in nxt}
    for name, res in nxt.items():
        merged.setdefault(name, {}).update(res)
    return _to_zones(merged)


def zones_equal(old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]) -> tuple[bool, str]:
    """Upstream's ``isEqualNRTZones``: same count, same name and type position by position, and the same
    allocatable of every managed resource (present in both or in neither)."""
    if len(old) != len(new):
        return False, "zones number"
    for i, (a, b) in enumerate(zip(old, new, strict=True)):
        if a.get("name") != b.get("name"):
            return False, f"zone {i} name"
        if a.get("type") != b.get("type"):
            return False, f"zone {i} type"
    za, zb = _allocatable(old), _allocatable(new)
    if len(za) > len(zb):
        za, zb = zb, za
    for key, res_b in zb.items():
        res_a = za.get(key)
        if res_a is None:
            if res_b:
                return False, "resources"
            continue
        for name in MANAGED_RESOURCES:
            qa, qb = res_a.get(name), res_b.get(name)
            if qa is None and qb is None:
                continue
            if qa is None or qb is None or qa.cmp(qb) != 0:
                return False, "resources"
    return True, ""
