"""The node's CPU share pools (docs/rules/koordlet-cpuset.md#share-pools): the LS pool (CPUs no pod holds
through its ``resource-status`` cpuset) and the BE pool (CPUs no LSE pod holds), each split per NUMA node,
as the NodeResourceTopology annotations ``node.koordinator.sh/cpu-shared-pools`` and
``node.koordinator.sh/be-cpu-shared-pools`` report them. Pure.

Imports: standard library, apis.*, agent.system.nodeinfo.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from agent.system.nodeinfo import CpuInfo
from apis.cpuset import CPUSetError, format_cpuset, parse_cpuset
from apis.kubeobjects import Pod
from apis.numa import resource_status_cpus
from apis.pod import pod_annotations
from apis.qos import QoSClass, qos_class_raw

__all__ = ["pool_cpus", "share_pools"]


def _held_cpus(pod: Pod) -> frozenset[int]:
    """The pod's ``resource-status`` cpuset (undecodable: nothing)."""
    return resource_status_cpus(pod_annotations(pod))


def _group(cpus: Sequence[CpuInfo], keep: set[int]) -> list[dict[str, Any]]:
    """One pool per NUMA node that still has CPUs (a node left without any is not listed), sorted by
    (socket, node); the socket is the one of the node's lowest CPU."""
    by_node: dict[int, list[CpuInfo]] = {}
    for info in cpus:
        if info.cpu in keep:
            by_node.setdefault(info.numa_node, []).append(info)
    pools = [
        {
            "socket": min(infos, key=lambda i: i.cpu).socket,
            "node": node,
            "cpuset": format_cpuset(i.cpu for i in infos),
        }
        for node, infos in by_node.items()
    ]
    pools.sort(key=lambda p: (p["socket"], p["node"]))
    return pools


def _remove(pools: list[dict[str, Any]], cpus: frozenset[int]) -> list[dict[str, Any]]:
    """``cpus`` taken out of every pool; a pool left empty is kept with cpuset ``""``."""
    if not cpus:
        return pools
    return [{**p, "cpuset": format_cpuset(parse_cpuset(p["cpuset"]) - cpus)} for p in pools]


def share_pools(
    cpus: Sequence[CpuInfo],
    pods: Iterable[Pod],
    *,
    reserved: frozenset[int],
    system_exclusive: frozenset[int],
    kubelet_static_assigned: frozenset[int],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(LS pools, BE pools), each ``[{"socket", "node", "cpuset"}]`` sorted by (socket, node).

    In this order (docs/rules/koordlet-cpuset.md#share-pools): all CPUs minus ``kubelet_static_assigned``
    (the kubelet static CPU manager's exclusive CPUs; pass an empty set unless its policy is ``static``);
    every pod's ``resource-status`` cpuset leaves the LS pool, and the BE pool too when the pod's raw QoS is
    LSE; the pools are grouped per NUMA node (nodes without CPUs left are dropped); then ``reserved`` (the
    node reservation's ``reservedCPUs``) and ``system_exclusive`` (the SYSTEM-QoS cpuset when exclusive) are
    removed from every pool, which keeps a pool they empty with ``"cpuset": ""``.
    """
    start = {i.cpu for i in cpus} - kubelet_static_assigned
    ls = set(start)
    be = set(start)
    for pod in pods:
        held = _held_cpus(pod)
        if not held:
            continue
        ls -= held
        if qos_class_raw(pod) is QoSClass.LSE:
            be -= held
    ls_pools = _remove(_remove(_group(cpus, ls), reserved), system_exclusive)
    be_pools = _remove(_remove(_group(cpus, be), reserved), system_exclusive)
    return ls_pools, be_pools


def pool_cpus(pools: Iterable[dict[str, Any]]) -> frozenset[int]:
    """Every CPU of ``pools`` (``cpuset`` strings that do not parse contribute none)."""
    out: set[int] = set()
    for p in pools:
        try:
            out |= parse_cpuset(str(p.get("cpuset") or ""))
        except CPUSetError:
            continue
    return frozenset(out)
