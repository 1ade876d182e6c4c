"""Cgroup reconcile strategies (docs/rules/koordlet.md).

* ``BatchResourceStrategy`` (upstream runtime-hook plugin ``BatchResource``, gate ``BatchResource``, on by
  default; re-applied every 10 s as the runtime-hooks reconciler): the pod and container cgroups of raw-BE
  pods from their ``kubernetes.io/batch-cpu`` / ``batch-memory`` resources — ``cpu.shares`` from requests
  (``MilliCPUToShares``), ``cpu.cfs_quota_us`` from limits (``MilliCPUToQuota``; −1 with the NodeSLO cfsQuota
  suppress policy; divided by the node's cpu-normalization ratio), ``memory.limit_in_bytes`` from limits.
* ``MemoryQoSStrategy`` (gate ``CgroupReconcile``, 1 s): pod / container ``memory.min``/``memory.low`` and
  container ``memory.high`` from the merged class ``memoryQOS`` overlaid with the pod's
  ``koordinator.sh/memoryQOS`` annotation.

Both return ``leveled_writes`` (pods, then containers) for the executor's leveled update (top-down
loosening merges, then bottom-up final values). ``decide`` is pure.

Imports: standard library, apis.*, agent.{podmeta,system.*,resourceexecutor.actions},
agent.qosmanager.framework.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agent.podmeta import PodMeta
from agent.qosmanager.framework import Decision, Snapshot
from agent.resourceexecutor.actions import CgroupWrite
from agent.system.cgroup import CPU_QUOTA, CPU_SHARES, MEMORY_HIGH, MEMORY_LIMIT, MEMORY_LOW, MEMORY_MIN
from apis import constants as c
from apis.gojson import overlay
from apis.kubeobjects import Node, Pod
from apis.nodeslo import MemoryQOSCfg, NodeSLOSpec, ResourceQOS
from apis.nodeslo_defaults import default_memory_qos, none_memory_qos
from apis.pod import (
    PHASE_PENDING,
    PHASE_RUNNING,
    container_limits,
    container_requests,
    containers,
    phase,
    pod_annotations,
    pod_requests,
    resource_list,
)
from apis.qos import QoSClass, qos_class_raw, qos_class_with_default
from apis.quantity import QuantityError

__all__ = [
    "BatchResourceStrategy",
    "BatchSpec",
    "MemoryQoSStrategy",
    "batch_specs",
    "decide_batch",
    "decide_memory_qos",
    "milli_cpu_to_quota",
    "milli_cpu_to_shares",
    "pod_memory_qos",
]

BATCH_NAME: Final = "BatchResource"
MEMORY_QOS_NAME: Final = "CgroupReconcile"
CFS_PERIOD: Final = 100000
MIN_QUOTA: Final = 1000
MIN_SHARES: Final = 2
MAX_SHARES: Final = 262144
MAX_INT64: Final = 9223372036854775807
PAGE_SIZE: Final = 4096


def milli_cpu_to_quota(milli: int) -> int:
    """``m × 100000 / 1000``; ≤ 0 → −1; (0, 1000) → 1000."""
    if milli <= 0:
        return -1
    return max(milli * CFS_PERIOD // 1000, MIN_QUOTA)


def milli_cpu_to_shares(milli: int) -> int:
    """``m × 1024 / 1000`` clamped to [2, 262144]; m ≤ 0 → 2."""
    if milli <= 0:
        return MIN_SHARES
    return min(max(milli * 1024 // 1000, MIN_SHARES), MAX_SHARES)


# --- batch resources ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class BatchSpec:
    """One listed container's batch values (None = unset): batch-cpu in milli, batch-memory in bytes."""

    cpu_request: int | None = None
    cpu_limit: int | None = None
    memory_limit: int | None = None


def _batch_of(requests: Mapping[str, Any], limits: Mapping[str, Any]) -> BatchSpec | None:
    if not any(n in m for n in (c.BATCH_CPU, c.BATCH_MEMORY) for m in (requests, limits)):
        return None
    req_cpu, lim_cpu, lim_mem = requests.get(c.BATCH_CPU), limits.get(c.BATCH_CPU), limits.get(c.BATCH_MEMORY)
    return BatchSpec(
        req_cpu.value() if req_cpu is not None else None,
        lim_cpu.value() if lim_cpu is not None else None,
        lim_mem.value() if lim_mem is not None else None,
    )


def batch_specs(pod: Pod) -> dict[str, BatchSpec]:
    """Container name → batch values, from the pod spec (preferred) or the extended-resource-spec
    annotation; containers without any batch resource are absent. Malformed values → ``{}``."""
    names = (c.BATCH_CPU, c.BATCH_MEMORY)
    out: dict[str, BatchSpec] = {}
    try:
        for ctr in containers(pod):
            spec = _batch_of(container_requests(ctr, names), container_limits(ctr, names))
            if spec is not None:
                out[str(ctr.get("name") or "")] = spec
        if out:
            return out
        raw = pod_annotations(pod).get(c.ANNOTATION_EXTENDED_RESOURCE_SPEC)
        if not isinstance(raw, str):
            return {}
        doc = json.loads(raw)
        ctrs = doc.get("containers") if isinstance(doc, dict) else None
        for name, res in (ctrs if isinstance(ctrs, dict) else {}).items():
            if not isinstance(res, dict):
                continue
            spec = _batch_of(
                resource_list(res.get("requests"), names), resource_list(res.get("limits"), names)
            )
            if spec is not None:
                out[str(name)] = spec
    except (ValueError, QuantityError, RecursionError):  # RecursionError: JSON nested too deep to parse
        return {}
    return out


def _cfs_quota_suppressed(slo: NodeSLOSpec | None) -> bool:
    th = slo.resource_used_threshold_with_be if slo is not None else None
    return th is not None and th.enable is True and th.cpu_suppress_policy == "cfsQuota"


def _normalization_ratio(node: Node | None) -> float:
    ann = ((node or {}).get("metadata") or {}).get("annotations") or {}
    try:
        ratio = float(ann.get(c.ANNOTATION_CPU_NORMALIZATION_RATIO, ""))
    except ValueError:
        return 1.0
    return ratio if math.isfinite(ratio) else 1.0


def _quota(milli: int | None, suppressed: bool, ratio: float) -> int:
    if suppressed or milli is None:
        return -1
    quota = milli_cpu_to_quota(milli)
    if quota > 0 and ratio > 1:
        quota = math.ceil(quota / ratio)
    return quota


def _sum_or_unset(values: Sequence[int | None]) -> int | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def _batch_writes(
    pod: PodMeta,
    specs: Mapping[str, BatchSpec],
    suppressed: bool,
    ratio: float,
    *,
    level: int,
    cgroup_dir: str,
    spec: BatchSpec,
    container_id: str | None = None,
) -> list[CgroupWrite]:
    shares = milli_cpu_to_shares(spec.cpu_request or 0)
    quota = _quota(spec.cpu_limit, suppressed, ratio)
    memory = spec.memory_limit if spec.memory_limit is not None and spec.memory_limit > 0 else -1
    return [
        CgroupWrite(BATCH_NAME, f, cgroup_dir, v, pod, container_id, True, level)
        for f, v in ((CPU_SHARES, shares), (CPU_QUOTA, quota), (MEMORY_LIMIT, memory))
    ]


def decide_batch(snapshot: Snapshot) -> Decision[None]:
    """Pod and container batch-resource cgroup values of every Running/Pending raw-BE pod."""
    suppressed = _cfs_quota_suppressed(snapshot.node_slo)
    ratio = _normalization_ratio(snapshot.node)
    pods: list[CgroupWrite] = []
    ctrs: list[CgroupWrite] = []
    for pod in snapshot.pods:
        if qos_class_raw(pod.pod) is not QoSClass.BE or phase(pod.pod) not in (PHASE_RUNNING, PHASE_PENDING):
            continue
        specs = batch_specs(pod.pod)
        if not specs:
            continue
        listed = list(specs.values())
        total = BatchSpec(
            sum(s.cpu_request or 0 for s in listed),
            _sum_or_unset([s.cpu_limit for s in listed]),
            _sum_or_unset([s.memory_limit for s in listed]),
        )
        pods += _batch_writes(pod, specs, suppressed, ratio, level=0, cgroup_dir=pod.cgroup_dir, spec=total)
        for ctr in pod.containers:
            own = specs.get(ctr.name)
            if own is not None:
                ctrs += _batch_writes(
                    pod,
                    specs,
                    suppressed,
                    ratio,
                    level=1,
                    cgroup_dir=ctr.cgroup_dir,
                    spec=own,
                    container_id=ctr.container_id,
                )
    if not pods:
        return Decision()
    return Decision(leveled_writes=(tuple(pods), tuple(ctrs)))


class BatchResourceStrategy:
    """The batch-resource reconciler (registered with gate ``BatchResource``, default on), every 10 s."""

    name: str = BATCH_NAME
    interval_seconds: float = 10.0

    def decide(self, snapshot: Snapshot, config: None, state: None) -> Decision[None]:
        return decide_batch(snapshot)


# --- memory QoS ---------------------------------------------------------------------------------------
def _class_cfg(slo: NodeSLOSpec, qos: QoSClass) -> ResourceQOS | None:
    st = slo.resource_qos_strategy
    if st is None:
        return None
    return {
        QoSClass.LSE: st.lsr_class,
        QoSClass.LSR: st.lsr_class,
        QoSClass.LS: st.ls_class,
        QoSClass.BE: st.be_class,
        QoSClass.SYSTEM: st.system_class,
    }.get(qos)


def pod_memory_qos(pod: Pod, slo: NodeSLOSpec) -> MemoryQOSCfg:
    """The class's ``memoryQOS`` (QoS with default) overlaid with the ``koordinator.sh/memoryQOS``
    annotation (policy ``none`` → None values; ``auto`` → the class defaults + annotation; else node config
    + annotation; unparsable → ignored)."""
    qos = qos_class_with_default(pod)
    cls = _class_cfg(slo, qos)
    base = cls.memory_qos if cls is not None and cls.memory_qos is not None else none_memory_qos()
    raw_ann = pod_annotations(pod).get(c.ANNOTATION_POD_MEMORY_QOS)
    if not isinstance(raw_ann, str):
        return base
    try:
        raw = json.loads(raw_ann)
        if not isinstance(raw, dict):
            return base
        policy = raw.pop("policy", "")
        if policy == "none":
            return none_memory_qos()
        ann_cfg = MemoryQOSCfg.from_dict(raw)
        if policy == "auto":
            return overlay(default_memory_qos(qos), ann_cfg)
        return overlay(base, ann_cfg)
    except (ValueError, KeyError, TypeError, RecursionError):  # RecursionError: JSON nested too deep to parse
        return base


def _qty(values: Mapping[str, Any], name: str) -> int | None:
    q = values.get(name)
    return q.value() if q is not None else None


def _protect(request: int, cfg: MemoryQOSCfg) -> tuple[int, int]:
    mn = request * (cfg.min_limit_percent or 0) // 100
    low = request * (cfg.low_limit_percent or 0) // 100
    return mn, (mn if 0 < low < mn else low)


def _node_memory(node: Node | None) -> int:
    alloc = ((node or {}).get("status") or {}).get("allocatable") or {}
    try:
        return _qty(resource_list(alloc, ("memory",)), "memory") or 0
    except (ValueError, QuantityError):
        return 0


def decide_memory_qos(snapshot: Snapshot) -> Decision[None]:
    """Pod ``memory.min/low`` and container ``memory.min/low/high`` of every Running/Pending pod."""
    slo = snapshot.node_slo
    if slo is None or slo.resource_qos_strategy is None:
        return Decision()
    node_mem = _node_memory(snapshot.node)
    pods: list[CgroupWrite] = []
    ctrs: list[CgroupWrite] = []
    for pod in snapshot.pods:
        if phase(pod.pod) not in (PHASE_RUNNING, PHASE_PENDING):
            continue
        cfg = pod_memory_qos(pod.pod, slo)
        be = qos_class_raw(pod.pod) is QoSClass.BE
        req_name = c.BATCH_MEMORY if be else c.RESOURCE_MEMORY
        try:
            specs = {str(x.get("name") or ""): x for x in containers(pod.pod)}
            if be:
                pod_req = sum(_qty(container_requests(x, (req_name,)), req_name) or 0 for x in specs.values())
            else:
                pod_req = _qty(pod_requests(pod.pod), req_name) or 0
            mn, low = _protect(pod_req, cfg)
            pods += [
                CgroupWrite(MEMORY_QOS_NAME, MEMORY_MIN, pod.cgroup_dir, mn, pod, None, True, 0),
                CgroupWrite(MEMORY_QOS_NAME, MEMORY_LOW, pod.cgroup_dir, low, pod, None, True, 0),
            ]
            for ctr in pod.containers:
                spec = specs.get(ctr.name)
                if spec is None:
                    continue
                req = _qty(container_requests(spec, (req_name,)), req_name) or 0
                limit = _qty(container_limits(spec, (req_name,)), req_name) or node_mem
                cmin, clow = _protect(req, cfg)
                pct = cfg.throttling_percent or 0
                high = MAX_INT64 if pct == 0 else (req + (limit - req) * pct // 100) // PAGE_SIZE * PAGE_SIZE
                high = cmin if 0 < high < cmin else high
                ctrs += [
                    CgroupWrite(MEMORY_QOS_NAME, f, ctr.cgroup_dir, v, pod, ctr.container_id, True, 1)
                    for f, v in ((MEMORY_MIN, cmin), (MEMORY_LOW, clow), (MEMORY_HIGH, high))
                ]
        except (ValueError, QuantityError):
            continue
    if not pods:
        return Decision()
    return Decision(leveled_writes=(tuple(pods), tuple(ctrs)))


class MemoryQoSStrategy:
    """The memory-QoS reconcile (registered with gate ``CgroupReconcile``), every 1 s."""

    name: str = MEMORY_QOS_NAME
    interval_seconds: float = 1.0

    def decide(self, snapshot: Snapshot, config: None, state: None) -> Decision[None]:
        return decide_memory_qos(snapshot)
