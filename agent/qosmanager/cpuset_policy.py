"""CPU-suppress helpers (docs/rules/koordlet.md): the node/pod annotations that shape the BE cpuset
(reservation, exclusive SYSTEM-QoS cpuset, pod ``resource-status`` cpusets, the kubelet CPU-manager
policy), Go-style cpuset strings, and the BE cpuset selection (``calculateBESuppressCPUSetPolicy``).
Pure, no I/O.

Imports: standard library, apis.*, agent.system.nodeinfo.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agent.system.nodeinfo import CpuInfo
from apis import constants as c
from apis.cpuset import format_cpuset, parse_cpuset
from apis.kubeobjects import KubeObject, Node, Pod
from apis.numa import node_reservation_reserved_cpus, parse_kubelet_cpu_manager_policy, resource_status_cpus
from apis.qos import QoSClass, qos_class_raw
from apis.quantity import Quantity

__all__ = [
    "annotation_json",
    "annotation_reserved_milli",
    "cpu_manager_policy",
    "format_cpuset",
    "lse_cpus",
    "parse_cpuset_go",
    "pod_cpuset",
    "pod_has_cpu_allocation",
    "reserved_cpus",
    "select_be_cpuset",
    "system_exclusive_cpus",
]


def parse_cpuset_go(text: str) -> frozenset[int]:
    """Kubernetes ``cpuset.Parse`` (apis.cpuset): malformed text raises ``ValueError``."""
    return parse_cpuset(text)


def _annotations(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    meta = (obj or {}).get("metadata")
    ann = meta.get("annotations") if isinstance(meta, Mapping) else None
    return ann if isinstance(ann, Mapping) else {}


def annotation_json(obj: Mapping[str, Any] | None, key: str) -> Mapping[str, Any] | None:
    """The annotation ``key`` of ``obj`` decoded as a JSON object; None when absent or unparsable."""
    text = _annotations(obj).get(key)
    if not isinstance(text, str):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: JSON nested too deep to parse
        return None
    return value if isinstance(value, dict) else None


def _field(obj: Mapping[str, Any], name: str) -> Any:
    """Go JSON field lookup: exact name first, then case-insensitive."""
    if name in obj:
        return obj[name]
    folded = name.lower()
    for k, v in obj.items():
        if isinstance(k, str) and k.lower() == folded:
            return v
    return None


def reserved_cpus(nrt_or_node: KubeObject | None) -> frozenset[int]:
    """``reservedCPUs`` of ``node.koordinator.sh/reservation`` (unparsable → empty; apis.numa reads it)."""
    return node_reservation_reserved_cpus(_annotations(nrt_or_node))


def annotation_reserved_milli(node: Node | None) -> int:
    """The reservation annotation's cpu in milli-cores; ``reservedCPUs`` replaces ``resources.cpu`` by its
    CPU count; an undecodable annotation, quantity or cpuset means no reservation
    (docs/rules/manager.md#the-node-reservation-annotation)."""
    res = annotation_json(node, c.ANNOTATION_NODE_RESERVATION)
    if res is None:
        return 0
    resources = _field(res, "resources")
    cpus = _field(res, "reservedCPUs")
    if (resources is not None and not isinstance(resources, Mapping)) or (
        cpus is not None and not isinstance(cpus, str)
    ):
        return 0
    try:
        if cpus:
            return len(parse_cpuset_go(cpus)) * 1000
        value = _field(resources, "cpu") if resources is not None else None
        if value is None:
            return 0
        return Quantity.from_json(value).milli_value()
    except (ValueError, TypeError):
        return 0


def system_exclusive_cpus(nrt_or_node: KubeObject | None) -> frozenset[int]:
    """The ``cpuset`` of ``node.koordinator.sh/system-qos-resource`` when exclusive (``cpusetExclusive``
    unset counts as true, as upstream ``IsCPUSetExclusive``); unparsable → empty."""
    res = annotation_json(nrt_or_node, c.ANNOTATION_NODE_SYSTEM_QOS_RESOURCE)
    if res is None:
        return frozenset()
    exclusive = _field(res, "cpusetExclusive")
    text = _field(res, "cpuset")
    if exclusive is False or not isinstance(text, str):
        return frozenset()
    try:
        return parse_cpuset_go(text)
    except ValueError:
        return frozenset()


def pod_cpuset(pod: Pod) -> frozenset[int]:
    """The ``cpuset`` of the pod's ``scheduling.koordinator.sh/resource-status`` (undecodable → empty;
    apis.numa reads it as Go does)."""
    return resource_status_cpus(_annotations(pod))


def pod_has_cpu_allocation(pod: Pod) -> bool:
    """The resource-status annotation carries a cpuset or NUMA allocation."""
    status = annotation_json(pod, c.ANNOTATION_RESOURCE_STATUS)
    if status is None:
        return False
    return bool(pod_cpuset(pod)) or bool(_field(status, "numaNodeResources"))


def cpu_manager_policy(nrt_or_node: KubeObject | None) -> str:
    """``policy`` of the ``kubelet.koordinator.sh/cpu-manager-policy`` annotation (absent or undecodable →
    ``none``; apis.numa reads it)."""
    text = _annotations(nrt_or_node).get(c.ANNOTATION_KUBELET_CPU_MANAGER_POLICY)
    if not isinstance(text, str):
        return "none"
    try:
        return parse_kubelet_cpu_manager_policy(text).policy or "none"
    except ValueError:
        return "none"


def lse_cpus(pods: Iterable[Pod]) -> frozenset[int]:
    """CPUs in the resource-status cpusets of pods whose raw QoS label is LSE."""
    out: set[int] = set()
    for pod in pods:
        if qos_class_raw(pod) is QoSClass.LSE:
            out |= pod_cpuset(pod)
    return frozenset(out)


def select_be_cpuset(cpus: int, processors: Sequence[CpuInfo]) -> list[int]:
    """``calculateBESuppressCPUSetPolicy``: ``cpus`` CPUs out of ``processors`` in pick order, hyper-thread
    pairs first, spread over (NUMA node, socket) buckets; ``[]`` when the pool has fewer than ``cpus``."""
    pool = len(processors)
    if pool < cpus:
        return []
    buckets_by_key: dict[int, list[CpuInfo]] = {}
    for p in processors:
        buckets_by_key.setdefault((p.numa_node + pool) * (p.socket + 1), []).append(p)
    buckets = [sorted(b, key=lambda p: (p.core, p.cpu)) for b in buckets_by_key.values()]
    buckets.sort(key=lambda b: (-len(b), b[0].cpu))
    picked: list[int] = []
    used: set[int] = set()
    need = cpus
    i = 0
    pre = -1
    if buckets:
        while need > 1:
            if i == 0:
                if pre == need:
                    break
                pre = need
            bucket = buckets[i]
            for j in range(len(bucket) - 1):
                if bucket[j].cpu in used:
                    continue
                if bucket[j].core == bucket[j + 1].core:
                    picked += [bucket[j].cpu, bucket[j + 1].cpu]
                    used.update((bucket[j].cpu, bucket[j + 1].cpu))
                    need -= 2
                    break
            i = (i + 1) % len(buckets)
    pre = -1
    start = i
    while need > 0 and buckets:
        if i == start:
            if pre == need:
                break
            pre = need
        for p in buckets[i]:
            if p.cpu not in used:
                picked.append(p.cpu)
                used.add(p.cpu)
                need -= 1
                break
        i = (i + 1) % len(buckets)
    return picked
