"""The readable per-node form of LoadAwareScheduling (docs/rules/scheduler.md#loadawarescheduling), in
plain Python integers: the assigned-pod sums of one node, and Filter/Score of one pod against one node.
The vectorised plugin must give the same answers; tests and benchmarks compare against this module.
Imports: the standard library, scheduler.framework.status, scheduler.plugins.loadaware (args, profile,
nodemetric_cache, estimator).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from scheduler.framework.status import Status
from scheduler.plugins.loadaware.args import LoadAwareSchedulingArgs
from scheduler.plugins.loadaware.estimator import round_half_away
from scheduler.plugins.loadaware.nodemetric_cache import MetricEntry
from scheduler.plugins.loadaware.profile import ThresholdProfile, Vector

NAME: Final = "LoadAwareScheduling"
REASON_EXPIRED: Final = "node(s) nodeMetric expired"
REASON_USAGE: Final = "node(s) {} usage exceed threshold"
REASON_AGGREGATED: Final = "node(s) {} aggregated usage exceed threshold"


@dataclass(frozen=True, slots=True)
class PodEntry:
    """An assigned pod: ``key`` = namespace/name (matches podsMetric), estimate (None = all zero),
    assignment timestamp and force-estimation deadline (epoch seconds), defaulted class is koord-prod."""

    key: str
    estimate: Vector | None
    timestamp: float
    deadline: float | None
    prod: bool


@dataclass(frozen=True, slots=True)
class NodeSums:
    """The per-node sums of docs/rules/scheduler.md#pods-already-on-the-node."""

    prod_usage: Vector
    prod_delta: Vector
    node_delta: Vector
    node_estimated: Vector


@dataclass(frozen=True, slots=True)
class IncomingPod:
    """What Filter/Score need of the pod being scheduled (PreFilter's state)."""

    estimate: Vector
    prod: bool
    daemonset: bool


def _add(a: list[int], b: Sequence[int]) -> None:
    for i, v in enumerate(b):
        a[i] += v


def _add_delta(a: list[int], e: Sequence[int], u: Sequence[int] | None) -> None:
    for i, v in enumerate(e):
        a[i] += v if u is None else max(0, v - u[i])


def node_sums(
    args: LoadAwareSchedulingArgs, r: int, entry: MetricEntry | None, pods: Sequence[PodEntry]
) -> NodeSums:
    """The pseudo-code of docs/rules/scheduler.md#pods-already-on-the-node over the node's assigned pods
    (order-independent)."""
    prod_usage, prod_delta, node_delta, node_estimated = [0] * r, [0] * r, [0] * r, [0] * r
    if entry is None:
        return NodeSums(tuple(prod_usage), tuple(prod_delta), tuple(node_delta), tuple(node_estimated))
    if args.prod_usage_include_sys and entry.has_node_metric:
        _add(prod_usage, entry.system_usage)
    window_start = entry.estimate_time - entry.report_interval
    for p in pods:
        u = entry.pod_usage.get(p.key)
        active_prod = p.prod and p.key in entry.prod_pods
        if active_prod and u is not None:
            _add(prod_usage, u)
        e = p.estimate
        if e is None:
            continue
        must = (
            u is None
            or p.timestamp > window_start
            or (p.deadline is not None and p.deadline > entry.estimate_time)
        )
        if must:
            _add_delta(node_delta, e, u)
        _add(node_estimated, e)
        if not p.prod:
            continue
        if not active_prod and u is not None:
            u, must = None, True
        if must:
            _add_delta(prod_delta, e, u)
    return NodeSums(tuple(prod_usage), tuple(prod_delta), tuple(node_delta), tuple(node_estimated))


def existing_usage(
    entry: MetricEntry, sums: NodeSums, prod_mode: bool, agg_type: str, duration: int
) -> Vector:
    """Estimated usage of the node's existing pods: prod mode → prodUsage + prodDelta; else the base
    (nodeUsage or aggregated) + nodeDelta, or nodeEstimated when the base is nil."""
    if prod_mode:
        return tuple(a + b for a, b in zip(sums.prod_usage, sums.prod_delta, strict=True))
    base = entry.usage_base(agg_type, duration)
    if base is None:
        return sums.node_estimated
    return tuple(a + b for a, b in zip(base, sums.node_delta, strict=True))


def is_expired(entry: MetricEntry, expiration_seconds: int, now: float) -> bool:
    """``updateTime`` unset, or ``now − updateTime ≥ nodeMetricExpirationSeconds``."""
    return entry.update_time is None or now - entry.update_time >= expiration_seconds


def filter_node(
    args: LoadAwareSchedulingArgs,
    resources: Sequence[str],
    pod: IncomingPod,
    profile: ThresholdProfile,
    capacity: Vector,
    entry: MetricEntry | None,
    sums: NodeSums,
    now: float,
) -> Status:
    """Filter for one node (docs/rules/scheduler.md#filter)."""
    if pod.daemonset:
        return Status.success()
    prod_mode = profile.prod_set and pod.prod
    aggregated = False
    agg_type, duration = "", 0
    if prod_mode:
        thresholds = profile.prod
    elif profile.aggregated is not None:
        thresholds, aggregated = profile.aggregated, True
        agg_type, duration = profile.agg_type, profile.agg_duration
    else:
        thresholds = profile.usage
    if not any(t != 0 for t in thresholds):
        return Status.success()
    if entry is None:
        return Status.success()
    if args.filter_expired_node_metrics and is_expired(entry, args.node_metric_expiration_seconds, now):
        if args.enable_schedule_when_node_metrics_expired:
            return Status.success()
        return Status.unschedulable(REASON_EXPIRED, plugin=NAME)
    if not entry.has_node_metric:
        return Status.success()
    existing = existing_usage(entry, sums, prod_mode, agg_type, duration)
    for j, name in enumerate(resources):
        threshold, total = thresholds[j], capacity[j]
        if threshold == 0 or total == 0:
            continue
        estimated = existing[j] + pod.estimate[j]
        usage = round_half_away(float(estimated) / float(total) * 100)
        if usage > threshold:
            reason = REASON_AGGREGATED if aggregated else REASON_USAGE
            return Status.unschedulable(reason.format(name), plugin=NAME)
    return Status.success()


def least_used(used: int, capacity: int) -> int:
    if capacity == 0 or used > capacity:
        return 0
    return (capacity - used) * 100 // capacity


def score_node(
    args: LoadAwareSchedulingArgs,
    resources: Sequence[str],
    pod: IncomingPod,
    capacity: Vector,
    entry: MetricEntry | None,
    sums: NodeSums,
    now: float,
) -> int:
    """Score for one node (docs/rules/scheduler.md#score)."""
    weights = [args.resource_weights.get(r, 0) for r in resources]
    dominant_weight = args.dominant_resource_weight
    if dominant_weight == 0 and not any(weights):
        return 0
    if (
        entry is None
        or is_expired(entry, args.node_metric_expiration_seconds, now)
        or not entry.has_node_metric
    ):
        return 0
    prod_mode = args.score_according_prod_usage and pod.prod
    agg = args.aggregated
    agg_type, duration = ("", 0)
    if agg is not None and agg.score_enabled:
        agg_type, duration = agg.score_aggregation_type, agg.score_aggregated_duration
    existing = existing_usage(entry, sums, prod_mode, agg_type, duration)
    scores = [least_used(existing[j] + pod.estimate[j], capacity[j]) for j in range(len(resources))]
    node_score = sum(s * w for s, w in zip(scores, weights, strict=True))
    weight_sum = sum(weights)
    if dominant_weight > 0:
        dominant = min([100, *scores])
        node_score += dominant * dominant_weight
        weight_sum += dominant_weight
    return node_score // weight_sum if weight_sum > 0 else 0
