"""MidResource plugin (docs/rules/manager.md#mid-resources): ``kubernetes.io/mid-cpu`` (integer
milli-cores) and ``kubernetes.io/mid-memory`` (bytes) reclaimed from Prod for mid-priority pods.

Static mode (``midReclaimMode: static``): min(capacity × midStaticReservedPercent, capacity ×
midThresholdPercent). Otherwise (dynamic): min(clamp(prodReclaimable, 0, capacity − nodeUsage) +
unallocated × midUnallocatedPercent, capacity × midThresholdPercent). Degrades (resets both) under the
BatchResource NodeMetric staleness rule; a missing ``prodReclaimableMetric`` counts as zero.
Imports: the standard library, ``apis`` and ``manager.noderesource.resources``. Pure, no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from apis import constants as c
from apis.kubeobjects import Node
from apis.qos import PriorityClass
from apis.sloconfig_types import ColocationStrategy
from manager.noderesource.resources import (
    ZERO,
    CalculateResult,
    NodeMetricInput,
    PodsInput,
    ResourceItem,
    Resources,
    host_app_usage,
    is_degraded,
    metric_dict,
    metric_status,
    multiply_milli,
    multiply_value,
    node_capacity,
    node_metric_info,
    node_reserved,
    pod_infos,
    reset_result,
    setting,
    usage_of,
)

PLUGIN_NAME: Final = "MidResource"
RESOURCE_NAMES: Final = (c.MID_CPU, c.MID_MEMORY)
DEGRADE_REASON: Final = "degradedByMidResource"
DEGRADE_MESSAGE: Final = f"degrade node Mid resource because of abnormal nodeMetric, reason: {DEGRADE_REASON}"
ANNOTATION_MID_RESOURCE_EXPLAIN: Final = f"{c.NODE_DOMAIN_PREFIX}/mid-resource-explain"
MODE_STATIC: Final = "static"
MODE_DYNAMIC: Final = "dynamic"

NOT_PROD_LIKE: Final = frozenset({PriorityClass.MID, PriorityClass.BATCH, PriorityClass.FREE})


@dataclass(frozen=True, slots=True)
class MidTerms:
    """The mid resource terms (docs/rules/manager.md#mid-resources; nano units). Static mode fills
    ``capacity``, ``static_reserved``, ``threshold`` and ``result`` only (the others are zero)."""

    mode: str
    capacity: Resources
    threshold: Resources
    result: Resources
    static_reserved: Resources = ZERO
    node_reserved: Resources = ZERO
    system_used: Resources = ZERO
    reserved: Resources = ZERO
    prod_request: Resources = ZERO
    unallocated: Resources = ZERO
    node_usage: Resources = ZERO
    node_unused: Resources = ZERO
    prod_reclaimable: Resources = ZERO
    base: Resources = ZERO
    unallocated_part: Resources = ZERO


def _percent_of(amount: Resources, cpu_pct: int, mem_pct: int) -> Resources:
    """``MultiplyMilliQuant(cpu, pct/100)``, ``MultiplyQuant(memory, pct/100)``."""
    return Resources(
        multiply_milli(amount.cpu, float(cpu_pct) / 100), multiply_value(amount.memory, float(mem_pct) / 100)
    )


def prod_request(pods: PodsInput) -> Resources:
    """Σ requests of Running/Pending pods whose class is not mid/batch/free."""
    cpu = mem = 0
    for pod in pod_infos(pods):
        if pod.active and pod.priority not in NOT_PROD_LIKE:
            cpu += pod.cpu
            mem += pod.memory
    return Resources(cpu, mem)


def calculate(
    strategy: ColocationStrategy,
    node: Node,
    pods: PodsInput,
    nodemetric: NodeMetricInput,
    now: datetime,
) -> CalculateResult[MidTerms]:
    """The mid resources (docs/rules/manager.md#mid-resources) for one node (same inputs as the
    BatchResource ``calculate``)."""
    nm = metric_dict(nodemetric)
    if is_degraded(nm, now, setting(strategy, "degrade_time_minutes")):
        return reset_result(RESOURCE_NAMES, DEGRADE_MESSAGE, DEGRADE_REASON)
    capacity = node_capacity(node)
    threshold = _percent_of(
        capacity,
        setting(strategy, "mid_cpu_threshold_percent"),
        setting(strategy, "mid_memory_threshold_percent"),
    )
    if strategy.mid_reclaim_mode == MODE_STATIC:
        static = _percent_of(
            capacity,
            setting(strategy, "mid_static_cpu_reserved_percent"),
            setting(strategy, "mid_static_memory_reserved_percent"),
        )
        terms = MidTerms(
            MODE_STATIC, capacity, threshold, static.min(threshold).clamp(), static_reserved=static
        )
        return _result(terms)

    reserved_node = node_reserved(node)
    system_used = usage_of(node_metric_info(nm).get("systemUsage")) + host_app_usage(
        nm, PriorityClass.MID.default_value
    )
    reserved = reserved_node.max(system_used)
    prod = prod_request(pods)
    unallocated = (capacity - reserved - prod).clamp()
    node_usage = usage_of(node_metric_info(nm).get("nodeUsage"))
    node_unused = capacity - node_usage
    reclaimable_metric = metric_status(nm).get("prodReclaimableMetric")
    reclaimable = ZERO
    if isinstance(reclaimable_metric, Mapping):
        reclaimable = usage_of(reclaimable_metric.get("resource"))
    base = reclaimable.min(node_unused).clamp()
    pct = setting(strategy, "mid_unallocated_percent")
    unallocated_part = _percent_of(unallocated, pct, pct)
    result = (base + unallocated_part).min(threshold).clamp()
    return _result(
        MidTerms(
            MODE_DYNAMIC,
            capacity,
            threshold,
            result,
            node_reserved=reserved_node,
            system_used=system_used,
            reserved=reserved,
            prod_request=prod,
            unallocated=unallocated,
            node_usage=node_usage,
            node_unused=node_unused,
            prod_reclaimable=reclaimable,
            base=base,
            unallocated_part=unallocated_part,
        )
    )


_DYNAMIC_TERMS: Final = ("result", "prod_reclaimable", "node_unused", "unallocated_part", "threshold")


def _result(t: MidTerms) -> CalculateResult[MidTerms]:
    items = (ResourceItem(c.MID_CPU, t.result.milli_cpu), ResourceItem(c.MID_MEMORY, t.result.memory_bytes))
    if t.mode == MODE_STATIC:
        msg = (
            f"midAllocatable[CPU(Milli-Core)]:{t.result.milli_cpu} = min(staticReserved:"
            f"{t.static_reserved.milli_cpu}, threshold:{t.threshold.milli_cpu}); midAllocatable[Mem(Byte)]:"
            f"{t.result.memory_bytes} = min(staticReserved:{t.static_reserved.memory_bytes}, "
            f"threshold:{t.threshold.memory_bytes})"
        )
    else:
        parts = []
        for label, attr in (("CPU(Milli-Core)", "milli_cpu"), ("Mem(Byte)", "memory_bytes")):
            v = {k: getattr(getattr(t, k), attr) for k in _DYNAMIC_TERMS}
            parts.append(
                f"midAllocatable[{label}]:{v['result']} = min(clamp(prodReclaimable:{v['prod_reclaimable']}, "
                f"0, nodeUnused:{v['node_unused']}) + unallocatedPart:{v['unallocated_part']}, "
                f"threshold:{v['threshold']})"
            )
        msg = "; ".join(parts)
    return CalculateResult(items, t, msg)


def explain(result: CalculateResult[MidTerms]) -> dict[str, Any]:
    """The terms as a JSON-ready dict (cpu in milli-cores, memory in bytes)."""
    t = result.terms
    if t is None:
        return {"degraded": True, "reason": result.reason, "message": result.message}
    out: dict[str, Any] = {"mode": t.mode, "message": result.message}
    names = {
        "capacity": t.capacity,
        "threshold": t.threshold,
        "result": t.result,
    }
    if t.mode == MODE_STATIC:
        names["staticReserved"] = t.static_reserved
    else:
        names.update(
            nodeReserved=t.node_reserved,
            systemUsed=t.system_used,
            reserved=t.reserved,
            prodRequest=t.prod_request,
            unallocated=t.unallocated,
            nodeUsage=t.node_usage,
            nodeUnused=t.node_unused,
            prodReclaimable=t.prod_reclaimable,
            base=t.base,
            unallocatedPart=t.unallocated_part,
        )
    out.update({k: v.explain() for k, v in names.items()})
    return out


def explain_annotation(result: CalculateResult[MidTerms]) -> str:
    """Value of annotation ``node.koordinator.sh/mid-resource-explain``: compact JSON, sorted keys."""
    return json.dumps(explain(result), sort_keys=True, separators=(",", ":"))
