"""Per-node NodeMetric state (docs/rules/scheduler.md#inputs-per-node): node usage, system usage,
aggregated usages keyed by (type, duration) with duration 0 = the longest window that has data, per-pod
usages keyed by ``namespace/name`` (empty ones skipped), the pods reported as ``koord-prod``, the update
time and the report interval (default 60 s). Vectors are in resource-vector order (cpu milli, others
``Value()``).
Imports: the standard library, apis (nodemetric, qos), scheduler.framework.units,
scheduler.plugins.loadaware.profile.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from apis.nodemetric import NodeMetric, ResourceMap
from apis.qos import PriorityClass
from apis.quantity import Quantity
from scheduler.framework.units import resource_value
from scheduler.plugins.loadaware.profile import Vector

DEFAULT_REPORT_INTERVAL_SECONDS: Final = 60
#: Go's zero time as "epoch seconds": before every timestamp.
GO_ZERO_TIME: Final = -math.inf


def _vector(resources: Sequence[str], values: Mapping[str, Quantity]) -> Vector:
    # a list, not a generator: this runs per pod of every NodeMetric update, where the generator's
    # frames cost more than the values
    return tuple([resource_value(r, values[r]) if r in values else 0 for r in resources])


@dataclass(frozen=True, slots=True)
class MetricEntry:
    """What the plugin keeps of one NodeMetric.

    ``update_time``: ``status.updateTime`` as sent (None = unset; expiry reads it). ``estimate_time``:
    the assign cache's update time, which an update without ``updateTime`` does not change
    (docs/rules/scheduler.md#assigned-pod-sums-do-not-depend-on-arrival-order; Go's zero time = -inf when
    never set). ``node_usage`` is None when ``status.nodeMetric`` is nil.
    """

    update_time: float | None
    estimate_time: float
    report_interval: float
    node_usage: Vector | None
    system_usage: Vector
    aggregated: dict[tuple[str, int], Vector] = field(default_factory=dict)
    pod_usage: dict[str, Vector] = field(default_factory=dict)
    prod_pods: frozenset[str] = frozenset()

    @property
    def has_node_metric(self) -> bool:
        return self.node_usage is not None

    def usage_base(self, agg_type: str, duration: int) -> Vector | None:
        """The base usage: ``nodeUsage`` without an aggregation type; else the aggregated vector of
        (type, duration). Duration 0 falls back to ``nodeUsage`` when no window has data; a specific
        duration that is not reported gives None (the quirk: existing usage = sum of estimates)."""
        if self.node_usage is None:
            return None
        if not agg_type:
            return self.node_usage
        found = self.aggregated.get((agg_type, duration))
        if found is None and duration == 0:
            return self.node_usage
        return found


def metric_entry(resources: Sequence[str], nm: NodeMetric, previous: MetricEntry | None) -> MetricEntry:
    """Build the entry of ``nm`` (``previous``: the node's entry before this update, if any)."""
    status = nm.status
    update_time = None if status.update_time is None else status.update_time.timestamp()
    if update_time is not None:
        estimate_time = update_time
    else:
        estimate_time = GO_ZERO_TIME if previous is None else previous.estimate_time
    policy = nm.spec.collect_policy
    interval = policy.report_interval_seconds if policy is not None else None
    report_interval = float(DEFAULT_REPORT_INTERVAL_SECONDS if interval is None else interval)
    info = status.node_metric
    node_usage: Vector | None = None
    system_usage: Vector = (0,) * len(resources)
    aggregated: dict[tuple[str, int], Vector] = {}
    if info is not None:
        node_usage = _vector(resources, info.node_usage.resources)
        system_usage = _vector(resources, info.system_usage.resources)
        longest: dict[str, int] = {}
        for agg in info.aggregated_node_usages:
            d = agg.duration.nanoseconds
            for kind, usage in agg.usage.items():
                if not _non_empty(usage):
                    continue
                aggregated[(str(kind), d)] = _vector(resources, usage.resources)
                if d > longest.get(str(kind), 0):
                    longest[str(kind)] = d
        for agg_type, d in longest.items():
            aggregated[(agg_type, 0)] = aggregated[(agg_type, d)]
    pod_usage: dict[str, Vector] = {}
    prod: set[str] = set()
    for pm in status.pods_metric:
        if not _non_empty(pm.pod_usage):
            continue
        key = f"{pm.namespace}/{pm.name}"
        pod_usage[key] = _vector(resources, pm.pod_usage.resources)
        if pm.priority is PriorityClass.PROD:
            prod.add(key)
    return MetricEntry(
        update_time=update_time,
        estimate_time=estimate_time,
        report_interval=report_interval,
        node_usage=node_usage,
        system_usage=system_usage,
        aggregated=aggregated,
        pod_usage=pod_usage,
        prod_pods=frozenset(prod),
    )


def _non_empty(m: ResourceMap) -> bool:
    return bool(m.resources)


class NodeMetricCache:
    """Metric entries by node name, fed by the NodeMetric informer."""

    def __init__(self, resources: Sequence[str]) -> None:
        self.resources = tuple(resources)
        self.entries: dict[str, MetricEntry] = {}

    def get(self, name: str) -> MetricEntry | None:
        return self.entries.get(name)

    def update(self, name: str, nm: NodeMetric | None) -> MetricEntry | None:
        """Add/update (``nm``) or delete (None) the node's entry; returns the new entry."""
        if nm is None:
            self.entries.pop(name, None)
            return None
        entry = metric_entry(self.resources, nm, self.entries.get(name))
        self.entries[name] = entry
        return entry
