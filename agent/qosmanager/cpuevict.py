"""CPU eviction (docs/rules/koordlet.md): the tasks of gates BECPUEvict (BE satisfaction, avg and last
windows, the sample-count rule), CPUAllocatableEvict and CPUEvict (in that order), executed by
``evictplan.plan_evictions``; 20 s cool-down, counted from the koordlet start (the first ``decide`` with
no state) and from every round that evicted. The BE task only ever lists raw-QoS-BE pods
(docs/rules/koordlet.md#be-evictors-evict-only-be-pods). The allocatable task keeps upstream's quirks
(native ``cpu`` target in cores-as-milli, never credited;
docs/rules/koordlet.md#allocatable-evictors-keep-upstreams-behaviour).

``decide`` is pure; ``build_tasks`` and the per-gate helpers are what ``koord simulate`` runs. The BE
sample-count rule needs a metric view with ``count`` (``SampleCounter``); without one BECPUEvict stays
idle (act on fresh, sufficient samples only: docs/rules/koordlet.md#freshness-rule).
Imports: standard library, apis.*, agent.podmeta, agent.qosmanager.{framework,evictplan}.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, runtime_checkable

from agent.podmeta import PodMeta
from agent.qosmanager.evictplan import (
    TARGET_REQUEST,
    TARGET_USED,
    AmountFn,
    EvictState,
    EvictTask,
    allocatable_config_valid,
    cool_down_active,
    eviction_allowed,
    generic_candidates,
    generic_key,
    generic_less,
    go_div,
    is_be,
    node_quantity,
    sort_pods,
    threshold_strategy,
    tier_request,
    tier_sums,
    to_decision,
)
from agent.qosmanager.evictplan import allocatable_amount as shared_allocatable_amount
from agent.qosmanager.framework import Decision, Snapshot
from apis import constants as c
from apis.gonum import go_int64
from apis.kubeobjects import Node, Pod
from apis.nodeslo import ResourceThresholdStrategy
from apis.pod import pod_requests
from apis.qos import (
    PriorityClass,
    pod_priority,
    priority_class_with_default,
)

__all__ = [
    "GATES",
    "BECPUMetrics",
    "CPUEvictConfig",
    "CPUEvictStrategy",
    "SampleCounter",
    "allocatable_release",
    "build_tasks",
    "candidates",
    "config_valid",
    "decide",
    "satisfaction_release",
    "used_release",
]

BE_CPU_EVICT: Final = "BECPUEvict"
CPU_EVICT: Final = "CPUEvict"
CPU_ALLOCATABLE_EVICT: Final = "CPUAllocatableEvict"
GATES: Final = (BE_CPU_EVICT, CPU_ALLOCATABLE_EVICT, CPU_EVICT)
EVICT_BY_ALLOCATABLE: Final = "evictByAllocatable"
DEFAULT_BE_USAGE_THRESHOLD: Final = 90

Strategy = ResourceThresholdStrategy | None
PodUsage = Mapping[str, float]
"""pod UID → cores (latest fresh sample); a pod without an entry has no sample."""


@runtime_checkable
class SampleCounter(Protocol):
    def count(self, kind: str, labels: Mapping[str, str], window_seconds: float) -> int: ...


@dataclass(frozen=True)
class BECPUMetrics:
    """``node_be`` cpu aggregates (milli-cores) over a window; ``count`` = min sample count of the three."""

    count: int
    usage: float
    request: float
    real_limit: float


@dataclass(frozen=True)
class CPUEvictConfig:
    cool_down_seconds: float = 20.0
    already_evicted: frozenset[str] = field(default_factory=frozenset)


# --- config checks and releases -------------------------------------------------------------------


def _lower(s: ResourceThresholdStrategy) -> int | None:
    thr = s.cpu_evict_threshold_percent
    if thr is None:
        return None
    return s.cpu_evict_lower_percent if s.cpu_evict_lower_percent is not None else thr - 2


def config_valid(feature: str, s: Strategy) -> bool:
    if s is None:
        return False
    if feature == BE_CPU_EVICT:
        lo, up = s.cpu_evict_be_satisfaction_lower_percent, s.cpu_evict_be_satisfaction_upper_percent
        return lo is not None and up is not None and 0 < lo <= 60 and 0 < up < 100 and up >= lo
    if feature == CPU_EVICT:
        thr, lower = s.cpu_evict_threshold_percent, _lower(s)
        return (
            thr is not None
            and thr >= 0
            and lower is not None
            and lower < thr
            and s.evict_enabled_priority_threshold is not None
        )
    if feature == CPU_ALLOCATABLE_EVICT:
        return allocatable_config_valid(
            s.cpu_allocatable_evict_threshold_percent,
            s.cpu_allocatable_evict_lower_percent,
            s.allocatable_evict_priority_threshold,
        )
    return False


def evict_window(s: ResourceThresholdStrategy, collect_seconds: float) -> int:
    return max(int(collect_seconds), s.cpu_evict_time_window_seconds or 0)


def _usage_ok(usage: float, limit: float, s: ResourceThresholdStrategy) -> bool:
    if limit <= 0:
        return False
    if limit < 1000:
        return True
    thr = s.cpu_evict_be_usage_threshold_percent
    thr = DEFAULT_BE_USAGE_THRESHOLD if thr is None else thr
    return usage / limit >= thr / 100


def satisfaction_release(
    node: Node | None,
    collect_seconds: float,
    s: Strategy,
    avg: BECPUMetrics | None,
    last: BECPUMetrics | None,
) -> int:
    """Milli batch-cpu the BECPUEvict task must release (0 = nothing)."""
    if not config_valid(BE_CPU_EVICT, s) or s is None or avg is None:
        return 0
    lower = s.cpu_evict_be_satisfaction_lower_percent or 0
    upper = s.cpu_evict_be_satisfaction_upper_percent or 0
    window = evict_window(s, collect_seconds)
    if avg.count * int(collect_seconds) < window // 3:
        return 0
    by_alloc = s.cpu_evict_policy == EVICT_BY_ALLOCATABLE
    alloc = node_quantity(node, "allocatable", c.BATCH_CPU, milli=False)
    alloc_limit = -1.0 if alloc is None else float(alloc or 1)

    def release(m: BECPUMetrics) -> tuple[int, float] | None:
        limit = alloc_limit if by_alloc else m.real_limit
        if not _usage_ok(m.usage, limit, s) or m.request <= 0:
            return None
        satisfaction = limit / m.request  # +Inf for a vanishing request, as in Go: nothing to release
        return go_int64(m.request * (upper / 100 - satisfaction)), satisfaction

    first = release(avg)
    if first is None or first[1] > lower / 100 or last is None:
        return 0
    avg_release = first[0]
    current = release(last)
    if current is None:
        return 0
    avg_limit = alloc_limit if by_alloc else avg.real_limit
    cur_limit = alloc_limit if by_alloc else last.real_limit
    if last.request == avg.request and cur_limit == avg_limit:
        return max(0, avg_release)
    cur_release = current[0]
    if cur_release <= 0:
        return 0
    return max(0, min(avg_release, cur_release))


def used_release(node: Node | None, node_cores: float | None, s: Strategy) -> int:
    """Milli-cores the CPUEvict task must release (0 = not triggered); thresholds as given."""
    capacity = node_quantity(node, "capacity", c.RESOURCE_CPU, milli=True) or 0
    if s is None or node_cores is None or capacity <= 0:
        return 0
    thr, lower = s.cpu_evict_threshold_percent, _lower(s)
    if thr is None or lower is None:
        return 0
    usage = go_div(int(node_cores * 1000) * 100, capacity)
    if usage < thr:
        return 0
    return max(0, go_div(capacity * (usage - lower), 100))


def _pod_tier_request(pod: Pod) -> tuple[PriorityClass, str, int]:
    cls = priority_class_with_default(pod)
    if cls is PriorityClass.BATCH:
        return cls, c.BATCH_CPU, tier_request(pod, c.BATCH_CPU)
    if cls is PriorityClass.MID:
        return cls, c.MID_CPU, tier_request(pod, c.MID_CPU)
    q = pod_requests(pod).get(c.RESOURCE_CPU)
    return cls, c.RESOURCE_CPU, 0 if q is None else q.milli_value()


def allocatable_release(node: Node | None, pods: Sequence[PodMeta], s: Strategy) -> dict[str, int]:
    """Per tier resource (only positive entries): batch/mid cpu as their integer values; native ``cpu``
    in milli-cores of upstream's ``NewQuantity(x)`` (x taken as cores: 1000× the computed milli,
    docs/rules/koordlet.md#allocatable-evictors-keep-upstreams-behaviour)."""
    if s is None or s.allocatable_evict_priority_threshold is None:
        return {}
    thr = s.cpu_allocatable_evict_threshold_percent or 0
    lower = s.cpu_allocatable_evict_lower_percent or 0
    sums = tier_sums(pods, s.allocatable_evict_priority_threshold, _pod_tier_request)
    out: dict[str, int] = {}
    for name, req in sums.items():
        alloc = node_quantity(node, "allocatable", name, milli=name == c.RESOURCE_CPU)
        if not alloc:
            amount = req
        else:
            r, a = float(req), float(alloc)
            amount = int(r - lower / 100 * a) if r / a > thr / 100 else 0
        if name == c.RESOURCE_CPU:
            amount *= 1000
        if amount > 0:
            out[name] = amount
    return out


def allocatable_amount(release: Mapping[str, int]) -> AmountFn:
    """Per-pod credit of the allocatable task (``evictplan.allocatable_amount`` with CPU tiers)."""
    return shared_allocatable_amount(release, _pod_tier_request)


# --- candidates -----------------------------------------------------------------------------------


def _used_milli(usage: PodUsage, pod: PodMeta) -> int:
    v = usage.get(pod.uid)
    return 0 if v is None else int(v * 1000)


def _be_less(usage: PodUsage) -> Any:
    def cpu_usage(p: PodMeta) -> float:
        req = tier_request(p.pod, c.BATCH_CPU)
        return float(_used_milli(usage, p)) / float(req) if req else 0.0

    def less(a: PodMeta, b: PodMeta) -> bool:
        pa, pb = pod_priority(a.pod), pod_priority(b.pod)
        if pa is None or pb is None or pa == pb:
            return cpu_usage(a) > cpu_usage(b)
        return pa < pb

    return less


def candidates(feature: str, pods: Sequence[PodMeta], usage: PodUsage, s: Strategy) -> list[PodMeta]:
    """Every pod ``feature``'s task may evict, in the order it tries them."""
    if feature == BE_CPU_EVICT:
        chosen = [p for p in pods if is_be(p) and eviction_allowed(p.pod, feature)]
        return sort_pods(chosen, _be_less(usage))
    if s is None or feature not in (CPU_EVICT, CPU_ALLOCATABLE_EVICT):
        return []
    limit = (
        s.evict_enabled_priority_threshold if feature == CPU_EVICT else s.allocatable_evict_priority_threshold
    )
    if limit is None:
        return []
    chosen = generic_candidates(pods, feature, limit, usage.keys())
    if feature == CPU_EVICT:
        return sort_pods(chosen, generic_less(generic_key, lambda p: _used_milli(usage, p)))
    return sort_pods(chosen, generic_less(generic_key, lambda p: _pod_tier_request(p.pod)[2]))


# --- one round ------------------------------------------------------------------------------------


def build_tasks(
    features: Collection[str],
    node: Node | None,
    node_cores: float | None,
    pods: Sequence[PodMeta],
    usage: PodUsage,
    s: Strategy,
    collect_seconds: float = 1.0,
    be_avg: BECPUMetrics | None = None,
    be_last: BECPUMetrics | None = None,
) -> list[EvictTask]:
    """The round's tasks in order BECPUEvict → CPUAllocatableEvict → CPUEvict."""
    tasks: list[EvictTask] = []
    amount: AmountFn
    for gate in GATES:
        if gate not in features or not config_valid(gate, s):
            continue
        if gate == BE_CPU_EVICT:
            milli = satisfaction_release(node, collect_seconds, s, be_avg, be_last)
            release = {c.BATCH_CPU: milli} if milli > 0 else {}
            target, amount = TARGET_REQUEST, _be_amount
        elif gate == CPU_ALLOCATABLE_EVICT:
            release = allocatable_release(node, pods, s)
            target, amount = TARGET_REQUEST, allocatable_amount(release)
        else:
            milli = used_release(node, node_cores, s)
            release = {c.RESOURCE_CPU: milli} if milli > 0 else {}
            target, amount = TARGET_USED, _used_amount(usage)
        if release:
            tasks.append(EvictTask(gate, target, release, tuple(candidates(gate, pods, usage, s)), amount))
    return tasks


def _be_amount(pod: PodMeta) -> dict[str, int]:
    return {c.BATCH_CPU: tier_request(pod.pod, c.BATCH_CPU)}


def _used_amount(usage: PodUsage) -> Any:
    def amount(pod: PodMeta) -> dict[str, int]:
        return {c.RESOURCE_CPU: _used_milli(usage, pod)}

    return amount


_BE_LABELS = {a: {"be_resource": "cpu", "be_allocation": a} for a in ("usage", "request", "real-limit")}


def be_metrics(snapshot: Snapshot, window: float, counted: bool) -> BECPUMetrics | None:
    """``node_be`` aggregates: avg over ``window`` (``counted``) or the last sample within ``window``;
    a missing series yields 0 and count 0; None when nothing at all."""
    m = snapshot.metrics
    vals: dict[str, float] = {}
    counts: list[int] = []
    for alloc, labels in _BE_LABELS.items():
        v = m.avg("node_be", labels, window) if counted else m.last("node_be", labels, window)
        vals[alloc] = 0.0 if v is None else v
        if counted:
            counts.append(m.count("node_be", labels, window) if isinstance(m, SampleCounter) else 0)
        else:
            counts.append(0 if v is None else 1)
    if not any(counts):
        return None
    return BECPUMetrics(min(counts), vals["usage"], vals["request"], vals["real-limit"])


def decide(snapshot: Snapshot, config: CPUEvictConfig, state: EvictState | None) -> Decision[EvictState]:
    if state is None:  # the koordlet just started: the first 20 s are a cool-down
        return Decision(state=EvictState(snapshot.now))
    if cool_down_active(state, snapshot.now, config.cool_down_seconds):
        return Decision(state=state)
    s = threshold_strategy(snapshot)
    features = [g for g in GATES if snapshot.gates.get(g, False)]
    if s is None or snapshot.node is None or not features:
        return Decision(state=state)
    collect = snapshot.collect_interval_seconds
    fresh = 2 * collect
    window = evict_window(s, collect)
    node_cores = snapshot.metrics.avg("node_cpu_usage", {}, window)
    usage: dict[str, float] = {}
    for p in snapshot.pods:
        v = snapshot.metrics.last("pod_cpu_usage", {"pod_uid": p.uid}, fresh)
        if v is not None:
            usage[p.uid] = v
    be_avg = be_metrics(snapshot, window, counted=True) if BE_CPU_EVICT in features else None
    be_last = be_metrics(snapshot, fresh, counted=False) if BE_CPU_EVICT in features else None
    tasks = build_tasks(
        features, snapshot.node, node_cores, snapshot.pods, usage, s, collect, be_avg, be_last
    )
    return to_decision(snapshot, tasks, config.already_evicted, state, BE_CPU_EVICT)


class CPUEvictStrategy:
    """The cpuEvict loop: one strategy for its three gates (registered with ``GATES``; ``decide`` reads
    which of them are on from the snapshot)."""

    name = "cpuEvict"
    interval_seconds = 1.0

    def __init__(self, interval_seconds: float = 1.0) -> None:
        self.interval_seconds = interval_seconds

    def decide(
        self, snapshot: Snapshot, config: CPUEvictConfig, state: EvictState | None
    ) -> Decision[EvictState]:
        return decide(snapshot, config, state)
