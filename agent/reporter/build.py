"""Builds the NodeMetric status from the metric cache exactly as docs/rules/koordlet.md#reporter
describes (pure: no I/O).

``build_status(inputs)`` queries the cache for the node, system, NUMA, pod and host-application usages
over the report windows and returns an ``apis.nodemetric.NodeMetricStatus``. The caller (the reporter
loop) ships the same status to the NodeMetric CR and to the MetricHub. The pods' averages come from two
batched cache calls (``MetricCache.window_avgs``); their priority and QoS classes are memoised per pod
object (``_classes``).

Imports: standard library, apis.*, agent.metriccache, agent.podmeta.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from agent.metriccache import AggregationType as CacheAgg
from agent.metriccache import MetricCache, MetricCacheError, Result
from agent.podmeta import PodMeta
from apis.duration import Duration
from apis.nodemetric import (
    AggregatedUsage,
    AggregationType,
    HostApplicationMetricInfo,
    MemoryCollectPolicy,
    NodeMetricCollectPolicy,
    NodeMetricInfo,
    NodeMetricStatus,
    NUMAMetricInfo,
    PodMetricInfo,
    ReclaimableMetric,
    ResourceMap,
)
from apis.nodeslo import HostApplicationSpec
from apis.qos import (
    PriorityClass,
    QoSClass,
    priority_class_by_name,
    priority_class_with_default,
    qos_class_by_name,
    qos_class_with_default,
)
from apis.quantity import Format, Quantity
from apis.waits import clamp_seconds

__all__ = [
    "MIN_AGGREGATE_DURATION_SECONDS",
    "MIN_REPORT_INTERVAL_SECONDS",
    "ReportInputs",
    "aggregate_duration_seconds",
    "build_status",
    "report_interval_seconds",
]

MIN_REPORT_INTERVAL_SECONDS = 30
MIN_AGGREGATE_DURATION_SECONDS = 60

_AGG_TYPES: tuple[tuple[AggregationType, CacheAgg], ...] = (
    (AggregationType.AVG, CacheAgg.AVG),
    (AggregationType.P50, CacheAgg.P50),
    (AggregationType.P90, CacheAgg.P90),
    (AggregationType.P95, CacheAgg.P95),
    (AggregationType.P99, CacheAgg.P99),
)


@dataclass(frozen=True)
class ReportInputs:
    """Everything one report needs; ``policy`` must have every field set (``with_defaults()``)."""

    cache: MetricCache
    now: datetime
    policy: NodeMetricCollectPolicy
    pods: Sequence[PodMeta]
    host_apps: Sequence[HostApplicationSpec] | None
    """The NodeSLO's host applications; None when the node has no NodeSLO yet."""
    numa_ids: Sequence[int] = ()
    cold_memory_running: bool = False
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    """Wall clock for ``updateTime``, read after every query (as upstream: slightly later than ``now``)."""


def report_interval_seconds(policy: NodeMetricCollectPolicy | None) -> int:
    """``max(spec.reportIntervalSeconds, 30)``, at most 30 days (docs/configuration.md#duration-limits); 60
    while the spec is unknown."""
    value = (
        policy.with_defaults() if policy else NodeMetricCollectPolicy().with_defaults()
    ).report_interval_seconds
    seconds = max(int(value or 0), MIN_REPORT_INTERVAL_SECONDS)
    return int(clamp_seconds(seconds, "NodeMetric spec.metricCollectPolicy.reportIntervalSeconds"))


def aggregate_duration_seconds(policy: NodeMetricCollectPolicy) -> int:
    """``max(spec.aggregateDurationSeconds, 60)``."""
    return max(int(policy.with_defaults().aggregate_duration_seconds or 0), MIN_AGGREGATE_DURATION_SECONDS)


def _memory_kinds(policy: MemoryCollectPolicy | None, cold_running: bool) -> tuple[str, str, str]:
    """(node, pod, host-app) memory kinds for ``nodeMemoryCollectPolicy``
    (docs/rules/koordlet.md#reporter)."""
    if policy is MemoryCollectPolicy.USAGE_WITH_PAGE_CACHE:
        suffix = "memory_usage_with_page_cache"
    elif policy is MemoryCollectPolicy.USAGE_WITH_HOT_PAGE_CACHE and cold_running:
        suffix = "memory_with_hot_page_usage"
    else:
        suffix = "memory_usage"
    return f"node_{suffix}", f"pod_{suffix}", f"host_application_{suffix}"


def _cpu(cores: float) -> Quantity:
    return Quantity.from_milli(int(cores * 1000), Format.DECIMAL_SI)


def _memory(value: float) -> Quantity:
    return Quantity.from_int(int(value), Format.BINARY_SI)


class _Window:
    """Query helper over one ``[start, end]`` millisecond window."""

    def __init__(self, cache: MetricCache, end_ms: int, seconds: float) -> None:
        self.cache = cache
        self.end_ms = end_ms
        self.start_ms = end_ms - round(seconds * 1000)
        self.seconds = seconds

    def query(self, kind: str, labels: dict[str, str] | None = None) -> Result:
        return self.cache.query(kind, labels or {}, self.start_ms, self.end_ms)

    def usage(
        self, cpu_kind: str, mem_kind: str, labels: dict[str, str] | None = None
    ) -> tuple[ResourceMap, Result | None]:
        """Average cpu+memory; an empty map (and None) when either query fails or has no sample."""
        try:
            cpu = self.query(cpu_kind, labels)
            mem = self.query(mem_kind, labels)
        except MetricCacheError:
            return ResourceMap(resources={}), None
        rm = _reduce(cpu, mem, CacheAgg.AVG)
        return rm, (cpu if rm.resources else None)


def _reduce(cpu: Result, mem: Result, agg: CacheAgg) -> ResourceMap:
    try:
        cpu_value = cpu.aggregate(agg)
        mem_value = mem.aggregate(agg)
    except MetricCacheError:
        return ResourceMap(resources={})
    return ResourceMap(resources={"cpu": _cpu(cpu_value), "memory": _memory(mem_value)})


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _end_ms(now: datetime) -> int:
    """Unix milliseconds of ``now`` (floored, like Go's ``UnixMilli``), without float rounding."""
    return (now - _EPOCH) // timedelta(milliseconds=1)


def _aggregated(
    cache: MetricCache, now: datetime, durations: Sequence[Duration], cpu_kind: str, mem_kind: str
) -> list[AggregatedUsage]:
    out: list[AggregatedUsage] = []
    end_ms = _end_ms(now)
    for d in durations:
        window = _Window(cache, end_ms, d.total_seconds())
        usage: dict[AggregationType, ResourceMap] = {}
        try:
            cpu: Result | None = window.query(cpu_kind)
            mem: Result | None = window.query(mem_kind)
        except MetricCacheError:
            cpu = mem = None
        for api_type, cache_type in _AGG_TYPES:
            # Cold start: the CPU series covers less than half the window → that type stays empty.
            if cpu is None or mem is None or cpu.is_cold_start(window.seconds):
                usage[api_type] = ResourceMap(resources={})
            else:
                usage[api_type] = _reduce(cpu, mem, cache_type)
        out.append(AggregatedUsage(usage=usage, duration=d))
    return out


def _numa(window: _Window, numa_ids: Sequence[int]) -> list[NUMAMetricInfo]:
    out: list[NUMAMetricInfo] = []
    for numa_id in sorted(set(numa_ids)):
        labels = {"numa_node_id": str(numa_id)}
        node, _ = window.usage("node_numa_cpu_usage", "node_numa_memory_usage", labels)
        system, _ = window.usage("sys_numa_cpu_usage", "sys_numa_memory_usage", labels)
        if node.resources or system.resources:
            out.append(NUMAMetricInfo(numa_node_id=numa_id, node_usage=node, system_usage=system))
    return out


_CLASSES: dict[int, tuple[Mapping[str, Any], PriorityClass, QoSClass]] = {}
"""id(pod) → (the pod, its priority class, its QoS class) for the pods of the last report: pod objects are
replaced, never changed, when the informer sees an update, so the classes are computed once per pod object
(checked by identity). Holds only the current pods (rebuilt on every report)."""


def _classes(pods: Sequence[PodMeta]) -> list[tuple[PriorityClass, QoSClass]]:
    memo: dict[int, tuple[Mapping[str, Any], PriorityClass, QoSClass]] = {}
    out: list[tuple[PriorityClass, QoSClass]] = []
    for meta in pods:
        pod = meta.pod
        hit = _CLASSES.get(id(pod))
        if hit is None or hit[0] is not pod:
            hit = (pod, priority_class_with_default(pod), qos_class_with_default(pod))
        memo[id(pod)] = hit
        out.append((hit[1], hit[2]))
    _CLASSES.clear()
    _CLASSES.update(memo)
    return out


def _pods(window: _Window, pods: Sequence[PodMeta], pod_mem_kind: str) -> list[PodMetricInfo]:
    """Each pod's average CPU and memory over the window, like ``window.usage`` per pod but with two
    batched cache calls (the same averages); a pod without a CPU or memory sample is skipped
    (docs/rules/koordlet.md#reporter)."""
    label_sets = [{"pod_uid": meta.uid} for meta in pods]
    try:
        cpus = window.cache.window_avgs("pod_cpu_usage", label_sets, window.start_ms, window.end_ms)
        mems = window.cache.window_avgs(pod_mem_kind, label_sets, window.start_ms, window.end_ms)
    except MetricCacheError:
        return []
    out: list[PodMetricInfo] = []
    for meta, cpu, mem, (priority, qos) in zip(pods, cpus, mems, _classes(pods), strict=True):
        if cpu is None or mem is None:
            continue
        out.append(
            PodMetricInfo(
                name=meta.name,
                namespace=meta.namespace,
                pod_usage=ResourceMap(resources={"cpu": _cpu(cpu), "memory": _memory(mem)}),
                priority=priority,
                qos=qos,
            )
        )
    # Go sorts by namespace then name, byte-wise.
    out.sort(key=lambda p: (p.namespace.encode(), p.name.encode()))
    return out


def _host_apps(
    window: _Window, apps: Sequence[HostApplicationSpec] | None, mem_kind: str
) -> list[HostApplicationMetricInfo]:
    out: list[HostApplicationMetricInfo] = []
    for app in apps or ():
        name = app.name or ""
        usage, cpu = window.usage("host_application_cpu_usage", mem_kind, {"host_app_name": name})
        if cpu is None:
            continue
        out.append(
            HostApplicationMetricInfo(
                name=name,
                usage=usage,
                priority=priority_class_by_name(app.priority or "") if app.priority else PriorityClass.NONE,
                qos=qos_class_by_name(app.qos or "") if app.qos else QoSClass.NONE,
            )
        )
    out.sort(key=lambda h: h.name.encode())
    return out


def build_status(inputs: ReportInputs) -> NodeMetricStatus:
    """The NodeMetric status for ``inputs.now`` (docs/rules/koordlet.md#reporter)."""
    policy = inputs.policy.with_defaults()
    node_mem, pod_mem, app_mem = _memory_kinds(policy.node_memory_collect_policy, inputs.cold_memory_running)
    durations = list(policy.node_aggregate_policy.durations) if policy.node_aggregate_policy else []
    main = _Window(inputs.cache, _end_ms(inputs.now), aggregate_duration_seconds(policy))
    node_usage, _ = main.usage("node_cpu_usage", node_mem)
    system_usage, _ = main.usage("sys_cpu_usage", "sys_memory_usage")
    info = NodeMetricInfo(
        node_usage=node_usage,
        aggregated_node_usages=_aggregated(inputs.cache, inputs.now, durations, "node_cpu_usage", node_mem),
        system_usage=system_usage,
        aggregated_system_usages=_aggregated(
            inputs.cache, inputs.now, durations, "sys_cpu_usage", "sys_memory_usage"
        ),
        numa_usages=_numa(main, inputs.numa_ids),
    )
    pods = _pods(main, inputs.pods, pod_mem)
    apps = _host_apps(main, inputs.host_apps, app_mem)
    # No predictor yet: as upstream on a predictor error, prodReclaimable is an empty map and
    # prodPeak is omitted.
    return NodeMetricStatus(
        update_time=inputs.clock(),
        node_metric=info,
        pods_metric=pods,
        host_application_metric=apps,
        prod_reclaimable_metric=ReclaimableMetric(resource=ResourceMap(resources={})),
        prod_peak_metric=None,
    )
