"""BatchResource plugin (docs/rules/manager.md#batch-resource-formula,
docs/rules/manager.md#edge-cases-kept-from-upstream): how much ``kubernetes.io/batch-cpu`` (integer
milli-cores) and ``kubernetes.io/batch-memory`` (bytes) a node can lend to batch pods.

``calculate`` is pure: the merged node strategy, the Node, its pods and its NodeMetric (JSON dicts) and
the instant ``now`` in, a ``CalculateResult[BatchTerms]`` out carrying every term of the formula, so the
controller can publish them (``explain_annotation``, annotation ``ANNOTATION_BATCH_RESOURCE_EXPLAIN``).
Malformed quantities raise ``ValueError`` (the controller then treats the plugin as failed: its
resources are removed, see docs/rules/manager.md).
Imports: the standard library, ``apis`` and ``manager.noderesource.resources``. No I/O.
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
    CalculateResult,
    NodeMetricInput,
    PodMetrics,
    PodsInput,
    ResourceItem,
    Resources,
    host_app_usage,
    is_degraded,
    metric_dict,
    metric_priority,
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

PLUGIN_NAME: Final = "BatchResource"
RESOURCE_NAMES: Final = (c.BATCH_CPU, c.BATCH_MEMORY)
DEGRADE_REASON: Final = "degradedByBatchResource"
DEGRADE_MESSAGE: Final = f"degrade node resource because of abnormal nodeMetric, reason: {DEGRADE_REASON}"
ANNOTATION_BATCH_RESOURCE_EXPLAIN: Final = f"{c.NODE_DOMAIN_PREFIX}/batch-resource-explain"

POLICY_USAGE: Final = "usage"
POLICY_REQUEST: Final = "request"
POLICY_MAX_USAGE_REQUEST: Final = "maxUsageRequest"

LOW_PRIORITY: Final = frozenset({PriorityClass.BATCH, PriorityClass.FREE})


@dataclass(frozen=True, slots=True)
class BatchTerms:
    """Every term of the batch resource formula (docs/rules/manager.md#batch-resource-formula; cpu/memory
    in nano units, ``Resources.explain()`` gives milli/bytes).

    ``cpu_policy``/``memory_policy`` are the policies actually applied (a configured cpu ``request``
    policy shows as ``usage``); ``cpu_threshold``/``memory_threshold`` are the optional caps (None = unset);
    ``result`` is the chosen, capped, non-negative amount."""

    capacity: Resources
    safety_margin: Resources
    node_reserved: Resources
    system_used: Resources
    system_used_or_reserved: Resources
    hp_request: Resources
    hp_used: Resources
    hp_max_used_req: Resources
    by_usage: Resources
    by_request: Resources
    by_max_usage_request: Resources
    cpu_policy: str
    memory_policy: str
    cpu_threshold: int | None
    memory_threshold: int | None
    result: Resources


def reserve_ratio(reclaim_threshold_percent: int) -> float:
    """Upstream ``getReserveRatio``: ``float64(100-pct)/100``."""
    return float(100 - reclaim_threshold_percent) / 100.0


def classify_pods(pods: PodsInput, nm: Mapping[str, Any] | None) -> tuple[Resources, Resources, Resources]:
    """(HPRequest, HPUsed, HPMaxUsedReq) over the node's pods and the NodeMetric's pod entries.

    Pods not Running/Pending are skipped (their metrics stay dangling); batch/free pods are LP and ignored; an
    HP pod without a metric counts its request as used **and** in HPMaxUsedReq
    (docs/rules/manager.md#a-pod-without-a-metric-counts-its-request); an LSE pod counts its cpu request
    instead of its cpu usage; dangling HP metrics count their usage."""
    metrics = PodMetrics.of(nm).by_key
    dangling = dict(metrics)
    rc = rm = uc = um = xc = xm = 0
    for pod in pod_infos(pods):
        if not pod.active:
            continue
        metric = metrics.get(pod.key)
        if metric is not None:
            dangling.pop(pod.key, None)
        if pod.priority in LOW_PRIORITY:
            continue
        qc, qm = pod.cpu, pod.memory
        rc += qc
        rm += qm
        if metric is None:
            uc += qc
            um += qm
            # the request counts at node level too
            # (docs/rules/manager.md#a-pod-without-a-metric-counts-its-request)
            xc += qc
            xm += qm
            continue
        usage = usage_of(metric.get("podUsage"))
        uc += qc if pod.lse else usage.cpu
        um += usage.memory
        xc += max(qc, usage.cpu)
        xm += max(qm, usage.memory)
    for metric in dangling.values():
        if metric_priority(metric) not in LOW_PRIORITY:
            usage = usage_of(metric.get("podUsage"))
            uc += usage.cpu
            um += usage.memory
            xc += usage.cpu
            xm += usage.memory
    return Resources(rc, rm), Resources(uc, um), Resources(xc, xm)


def calculate(
    strategy: ColocationStrategy,
    node: Node,
    pods: PodsInput,
    nodemetric: NodeMetricInput,
    now: datetime,
) -> CalculateResult[BatchTerms]:
    """The batch resource formula (docs/rules/manager.md#batch-resource-formula) for one node.
    ``strategy`` is the node's merged colocation strategy (unset fields take the defaults); ``pods`` are
    the pods bound to the node, any phase (Pod JSON, or their ``pod_infos``); ``nodemetric`` the
    NodeMetric JSON (None = absent ⇒ degraded)."""
    nm = metric_dict(nodemetric)
    if is_degraded(nm, now, setting(strategy, "degrade_time_minutes")):
        return reset_result(RESOURCE_NAMES, DEGRADE_MESSAGE, DEGRADE_REASON)

    capacity = node_capacity(node)
    safety = Resources(
        multiply_milli(capacity.cpu, reserve_ratio(setting(strategy, "cpu_reclaim_threshold_percent"))),
        multiply_value(capacity.memory, reserve_ratio(setting(strategy, "memory_reclaim_threshold_percent"))),
    )
    reserved = node_reserved(node)
    system_used = usage_of(node_metric_info(nm).get("systemUsage")) + host_app_usage(
        nm, PriorityClass.BATCH.default_value
    )
    system_or_reserved = system_used.max(reserved)
    hp_request, hp_used, hp_max = classify_pods(pods, nm)

    by_usage = (capacity - safety - system_or_reserved - hp_used).clamp()
    by_request = (capacity - safety - reserved - hp_request).clamp()
    by_max = (capacity - safety - system_or_reserved - hp_max).clamp()

    # a cpu `request` policy is unsupported upstream and falls back to usage
    # (docs/rules/manager.md#cpucalculatepolicy-request-behaves-as-usage)
    cpu_policy = POLICY_USAGE
    if strategy.cpu_calculate_policy == POLICY_MAX_USAGE_REQUEST:
        cpu_policy = POLICY_MAX_USAGE_REQUEST
    cpu = by_max.cpu if cpu_policy == POLICY_MAX_USAGE_REQUEST else by_usage.cpu
    memory_policy = strategy.memory_calculate_policy
    if memory_policy == POLICY_REQUEST:
        memory = by_request.memory
    elif memory_policy == POLICY_MAX_USAGE_REQUEST:
        memory = by_max.memory
    else:
        memory_policy, memory = POLICY_USAGE, by_usage.memory

    cpu_threshold = memory_threshold = None
    if strategy.batch_cpu_threshold_percent is not None:
        cpu_threshold = multiply_milli(capacity.cpu, float(strategy.batch_cpu_threshold_percent) / 100)
        cpu = min(cpu, cpu_threshold)
    if strategy.batch_memory_threshold_percent is not None:
        mem_ratio = float(strategy.batch_memory_threshold_percent) / 100
        memory_threshold = multiply_value(capacity.memory, mem_ratio)
        memory = min(memory, memory_threshold)
    result = Resources(cpu, memory).clamp()

    terms = BatchTerms(
        capacity=capacity,
        safety_margin=safety,
        node_reserved=reserved,
        system_used=system_used,
        system_used_or_reserved=system_or_reserved,
        hp_request=hp_request,
        hp_used=hp_used,
        hp_max_used_req=hp_max,
        by_usage=by_usage,
        by_request=by_request,
        by_max_usage_request=by_max,
        cpu_policy=cpu_policy,
        memory_policy=memory_policy,
        cpu_threshold=cpu_threshold,
        memory_threshold=memory_threshold,
        result=result,
    )
    items = (
        ResourceItem(c.BATCH_CPU, result.milli_cpu),
        ResourceItem(c.BATCH_MEMORY, result.memory_bytes),
    )
    return CalculateResult(items, terms, _message(terms))


def _message(t: BatchTerms) -> str:
    """Upstream-style explanation of both results (cpu in milli-cores, memory in bytes)."""
    cpu_used = (t.hp_max_used_req if t.cpu_policy == POLICY_MAX_USAGE_REQUEST else t.hp_used).milli_cpu
    cpu_msg = (
        f"batchAllocatable[CPU(Milli-Core)]:{t.result.milli_cpu} = nodeCapacity:{t.capacity.milli_cpu} - "
        f"nodeSafetyMargin:{t.safety_margin.milli_cpu} - systemUsageOrNodeReserved:"
        f"{t.system_used_or_reserved.milli_cpu} - podHP{_label(t.cpu_policy)}:{cpu_used}"
    )
    if t.memory_policy == POLICY_REQUEST:
        sub, used = ("nodeReserved", t.node_reserved.memory_bytes), t.hp_request.memory_bytes
    else:
        sub = ("systemUsageOrNodeReserved", t.system_used_or_reserved.memory_bytes)
        used = (t.hp_max_used_req if t.memory_policy == POLICY_MAX_USAGE_REQUEST else t.hp_used).memory_bytes
    mem_msg = (
        f"batchAllocatable[Mem(Byte)]:{t.result.memory_bytes} = nodeCapacity:{t.capacity.memory_bytes} - "
        f"nodeSafetyMargin:{t.safety_margin.memory_bytes} - {sub[0]}:{sub[1]} - "
        f"podHP{_label(t.memory_policy)}:{used}"
    )
    caps = []
    if t.cpu_threshold is not None:
        caps.append(f"batchCPUThreshold:{Resources(t.cpu_threshold).milli_cpu}")
    if t.memory_threshold is not None:
        caps.append(f"batchMemoryThreshold:{Resources(0, t.memory_threshold).memory_bytes}")
    return "; ".join([cpu_msg, mem_msg, *caps])


def _label(policy: str) -> str:
    return {POLICY_REQUEST: "Request", POLICY_MAX_USAGE_REQUEST: "MaxUsedRequest"}.get(policy, "Used")


def explain(result: CalculateResult[BatchTerms]) -> dict[str, Any]:
    """The terms as a JSON-ready dict (cpu in milli-cores, memory in bytes)."""
    t = result.terms
    if t is None:
        return {"degraded": True, "reason": result.reason, "message": result.message}
    out: dict[str, Any] = {
        "capacity": t.capacity.explain(),
        "safetyMargin": t.safety_margin.explain(),
        "nodeReserved": t.node_reserved.explain(),
        "systemUsed": t.system_used.explain(),
        "systemUsedOrReserved": t.system_used_or_reserved.explain(),
        "HPRequest": t.hp_request.explain(),
        "HPUsed": t.hp_used.explain(),
        "HPMaxUsedReq": t.hp_max_used_req.explain(),
        "byUsage": t.by_usage.explain(),
        "byRequest": t.by_request.explain(),
        "byMaxUsageRequest": t.by_max_usage_request.explain(),
        "cpuPolicy": t.cpu_policy,
        "memoryPolicy": t.memory_policy,
        "result": t.result.explain(),
        "message": result.message,
    }
    if t.cpu_threshold is not None:
        out["batchCPUThreshold"] = Resources(t.cpu_threshold).milli_cpu
    if t.memory_threshold is not None:
        out["batchMemoryThreshold"] = Resources(0, t.memory_threshold).memory_bytes
    return out


def explain_annotation(result: CalculateResult[BatchTerms]) -> str:
    """Value of annotation ``node.koordinator.sh/batch-resource-explain``: compact JSON, sorted keys."""
    return json.dumps(explain(result), sort_keys=True, separators=(",", ":"))


__all__ = [
    "ANNOTATION_BATCH_RESOURCE_EXPLAIN",
    "DEGRADE_MESSAGE",
    "DEGRADE_REASON",
    "PLUGIN_NAME",
    "RESOURCE_NAMES",
    "BatchTerms",
    "calculate",
    "classify_pods",
    "explain",
    "explain_annotation",
    "reserve_ratio",
]
