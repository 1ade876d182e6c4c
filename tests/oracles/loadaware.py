"""Oracle for LoadAwareScheduling: the rule of docs/rules/scheduler.md#filter and #score written node
by node in plain Python integers, as the docs state it. The production plugin evaluates every node at
once (scheduler.plugins.loadaware.rules); property tests, scenarios and bench/scheduler_throughput.py
compare the two. `LoadAwareOracle` wraps a production plugin and reads its caches, so a Framework of
oracles schedules exactly as the production profile should.
"""

from __future__ import annotations

from collections.abc import Sequence

from apis.kubeobjects import Pod
from apis.nodemetric import NodeMetric
from apis.pod import is_daemonset_pod
from apis.qos import PriorityClass
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import ClusterEvent
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.loadaware.args import LoadAwareSchedulingArgs
from scheduler.plugins.loadaware.estimator import round_half_away
from scheduler.plugins.loadaware.nodemetric_cache import MetricEntry
from scheduler.plugins.loadaware.plugin import LoadAwareScheduling
from scheduler.plugins.loadaware.profile import ThresholdProfile, Vector, node_capacity, node_profile
from scheduler.plugins.loadaware.usage import (
    NAME,
    REASON_AGGREGATED,
    REASON_EXPIRED,
    REASON_USAGE,
    IncomingPod,
    NodeSums,
    existing_usage,
)


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


class LoadAwareOracle:
    """Per-node Filter and Score over the caches of a production plugin (its informers feed them)."""

    def __init__(self, plugin: LoadAwareScheduling) -> None:
        self.plugin = plugin

    @property
    def name(self) -> str:
        return NAME

    def incoming(self, pod: Pod) -> IncomingPod:
        estimate, priority_class = self.plugin.estimator.facts(pod)
        return IncomingPod(estimate, priority_class is PriorityClass.PROD, is_daemonset_pod(pod))

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> Status:
        p, info = self.plugin, snapshot.infos[i]
        return filter_node(
            p.args,
            p.resources,
            self.incoming(pod),
            node_profile(p.args, p.resources, info.node),
            node_capacity(p.resources, info.node),
            p.metrics.get(info.name),
            p.assign.sums_of(info.name),
            state.now,
        )

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> tuple[int, Status]:
        p, info = self.plugin, snapshot.infos[i]
        value = score_node(
            p.args,
            p.resources,
            self.incoming(pod),
            node_capacity(p.resources, info.node),
            p.metrics.get(info.name),
            p.assign.sums_of(info.name),
            state.now,
        )
        return value, Status.success()

    # informer events and Reserve go to the wrapped plugin's caches
    def events_to_register(self) -> list[ClusterEvent]:
        return self.plugin.events_to_register()

    def on_node_metric(self, name: str, nm: NodeMetric | None) -> None:
        self.plugin.on_node_metric(name, nm)

    def on_pod_add(self, pod: Pod) -> None:
        self.plugin.on_pod_add(pod)

    def on_pod_update(self, old: Pod | None, new: Pod) -> None:
        self.plugin.on_pod_update(old, new)

    def on_pod_delete(self, pod: Pod) -> None:
        self.plugin.on_pod_delete(pod)

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return self.plugin.reserve(state, pod, node_name)

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.plugin.unreserve(state, pod, node_name)
