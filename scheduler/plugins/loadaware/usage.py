"""What LoadAwareScheduling knows of a node's existing load
(docs/rules/scheduler.md#pods-already-on-the-node), in plain Python integers: the assigned pods, their
per-node sums and the existing usage each Filter/Score mode reads; the plugin's names and reasons.
Imports: the standard library, scheduler.plugins.loadaware (args, profile, nodemetric_cache).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import add
from typing import Final

from scheduler.plugins.loadaware.args import LoadAwareSchedulingArgs
from scheduler.plugins.loadaware.nodemetric_cache import MetricEntry
from scheduler.plugins.loadaware.profile import Vector

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


def pod_contribution(entry: MetricEntry, p: PodEntry, r: int) -> NodeSums:
    """What one assigned pod adds to each of the node's sums: the loop body of the pseudo-code in
    docs/rules/scheduler.md#pods-already-on-the-node. The sums are plain sums of these, so a pod joining
    or leaving a node changes them by its contribution alone (AssignCache keeps them so)."""
    prod_usage, prod_delta, node_delta, node_estimated = [0] * r, [0] * r, [0] * r, [0] * r
    _accumulate(entry, p, prod_usage, prod_delta, node_delta, node_estimated)
    return NodeSums(tuple(prod_usage), tuple(prod_delta), tuple(node_delta), tuple(node_estimated))


def _accumulate(
    entry: MetricEntry,
    p: PodEntry,
    prod_usage: list[int],
    prod_delta: list[int],
    node_delta: list[int],
    node_estimated: list[int],
) -> None:
    """Adds ``p``'s contribution (pod_contribution) to the four running sums in place: node_sums runs it
    over every pod of a node without building a contribution per pod."""
    u = entry.pod_usage.get(p.key)
    active_prod = p.prod and p.key in entry.prod_pods
    if active_prod and u is not None:
        _add(prod_usage, u)
    e = p.estimate
    if e is not None:
        must = (
            u is None
            or p.timestamp > entry.estimate_time - entry.report_interval
            or (p.deadline is not None and p.deadline > entry.estimate_time)
        )
        if must:
            _add_delta(node_delta, e, u)
        _add(node_estimated, e)
        if p.prod:
            if not active_prod and u is not None:
                u, must = None, True
            if must:
                _add_delta(prod_delta, e, u)


def shift(sums: NodeSums, c: NodeSums, sign: int) -> NodeSums:
    """``sums`` plus (sign 1) or minus (sign -1) a contribution: exact integer arithmetic."""
    return NodeSums(
        tuple(a + sign * b for a, b in zip(sums.prod_usage, c.prod_usage, strict=True)),
        tuple(a + sign * b for a, b in zip(sums.prod_delta, c.prod_delta, strict=True)),
        tuple(a + sign * b for a, b in zip(sums.node_delta, c.node_delta, strict=True)),
        tuple(a + sign * b for a, b in zip(sums.node_estimated, c.node_estimated, strict=True)),
    )


def node_sums(
    args: LoadAwareSchedulingArgs, r: int, entry: MetricEntry | None, pods: Sequence[PodEntry]
) -> NodeSums:
    """The pseudo-code of docs/rules/scheduler.md#pods-already-on-the-node over the node's assigned pods
    (order-independent): the system usage (when counted) plus every pod's contribution."""
    prod_usage, prod_delta, node_delta, node_estimated = [0] * r, [0] * r, [0] * r, [0] * r
    if entry is None:
        return NodeSums(tuple(prod_usage), tuple(prod_delta), tuple(node_delta), tuple(node_estimated))
    if args.prod_usage_include_sys and entry.has_node_metric:
        _add(prod_usage, entry.system_usage)
    for p in pods:
        _accumulate(entry, p, prod_usage, prod_delta, node_delta, node_estimated)
    return NodeSums(tuple(prod_usage), tuple(prod_delta), tuple(node_delta), tuple(node_estimated))


def existing_usage(
    entry: MetricEntry, sums: NodeSums, prod_mode: bool, agg_type: str, duration: int
) -> Vector:
    """Estimated usage of the node's existing pods: prod mode → prodUsage + prodDelta; else the base
    (nodeUsage or aggregated) + nodeDelta, or nodeEstimated when the base is nil."""
    if prod_mode:
        return tuple(map(add, sums.prod_usage, sums.prod_delta))  # (vectors of one length)
    base = entry.usage_base(agg_type, duration)
    if base is None:
        return sums.node_estimated
    return tuple(map(add, base, sums.node_delta))
