"""Oracles for the resource-allocation scores (NodeResourcesLeastAllocated, NodeResourcesMostAllocated,
RequestedToCapacityRatio, NodeResourcesBalancedAllocation) and for NodeResourcesFit built with args
(ignored resources, scoring strategy): each rule of docs/rules/scheduler-basic.md node by node in plain
Python over the snapshot's NodeInfos, with Go's int64 and float64 steps spelled out. Args decoding is
the production code's (its unit tests pin it); `oracle_for` maps a production plugin to its oracle.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from apis.gonum import go_div, go_int64
from apis.labelselector import is_qualified_name
from apis.pod import pod_requests
from apis.quantity import QuantityError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Plugin, Pod
from scheduler.framework.snapshot import NodeInfo, Snapshot
from scheduler.framework.status import Status
from scheduler.framework.units import to_values
from scheduler.plugins import balancedallocation, noderesources
from scheduler.plugins.noderesources import NodeResourcesFit
from scheduler.plugins.noderesources_allocated import (
    NodeResourcesLeastAllocated,
    NodeResourcesMostAllocated,
    RequestedToCapacityRatio,
)
from scheduler.plugins.noderesources_args import FitArgs, Strategy
from tests.oracles.plugins import fits_request_checks, i64, least_requested, nonzero_requests


# --- which resources ------------------------------------------------------------------------------
def is_extended(name: str) -> bool:
    """``IsExtendedResourceName``: not native (has a ``/``, not ``kubernetes.io/``), not ``requests.``,
    and ``requests.<name>`` a qualified name."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return is_qualified_name("requests." + name)


def is_scalar(name: str) -> bool:
    """``IsScalarResourceName``: extended, hugepages, ``kubernetes.io/``-prefixed, attachable volumes."""
    return (
        is_extended(name)
        or name.startswith("hugepages-")
        or "kubernetes.io/" in name
        or name.startswith("attachable-volumes-")
    )


def allocatable_and_requested(info: NodeInfo, pod: Pod, resource: str) -> tuple[int, int]:
    """``calculateResourceAllocatableRequest``: cpu and memory with non-zero requests (node's pods and
    the pod), ephemeral-storage and scalar resources with requests, anything else (0, 0)."""
    if resource in ("cpu", "memory"):
        k = 0 if resource == "cpu" else 1
        used = nonzero_requests(pod)[k] + sum(nonzero_requests(p.pod)[k] for p in info.pods.values())
        return info.allocatable.get(resource, 0), i64(used)
    if resource == "ephemeral-storage" or is_scalar(resource):
        pod_request = to_values(pod_requests(pod)).get(resource, 0)
        return info.allocatable.get(resource, 0), i64(info.requested.get(resource, 0) + pod_request)
    return 0, 0


# --- the rules ------------------------------------------------------------------------------------
def most_requested(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return go_div(i64(requested * 100), capacity)


def broken_linear(shape: tuple[tuple[int, int], ...], p: int) -> int:
    """The first point with utilization ≥ p: its score (the first point) or the line from the point
    before; past the last point its score."""
    for i, (u, s) in enumerate(shape):
        if p <= u:
            if i == 0:
                return s
            u0, s0 = shape[i - 1]
            return i64(s0 + go_div(i64((s - s0) * i64(p - u0)), u - u0))
    return shape[-1][1]


def ratio_score(requested: int, capacity: int, shape: tuple[tuple[int, int], ...]) -> int:
    if capacity == 0 or requested > capacity:
        return broken_linear(shape, 100)
    return broken_linear(shape, i64(100 - go_div(i64((capacity - requested) * 100), capacity)))


def go_round(x: float) -> float:
    """``math.Round``: half away from zero."""
    t = float(math.trunc(x))
    return t + math.copysign(1.0, x) if abs(x - t) >= 0.5 else t


def strategy_score(strategy: Strategy, info: NodeInfo, pod: Pod) -> int:
    values = [(allocatable_and_requested(info, pod, r), w) for r, w in strategy.resources]
    if strategy.type == "BalancedAllocation":
        fractions = [1.0 if cap == 0 else float(req) / float(cap) for (cap, req), _ in values]
        cpu, memory = fractions
        if cpu >= 1 or memory >= 1:
            return 0
        return go_int64((1 - abs(cpu - memory)) * 100.0)
    if strategy.type == "RequestedToCapacityRatio":
        total = weights = 0
        for (cap, req), w in values:
            s = ratio_score(req, cap, strategy.shape)
            if s > 0:
                total = i64(total + i64(s * w))
                weights += w
        return 0 if weights == 0 else go_int64(go_round(float(total) / float(weights)))
    per_resource = least_requested if strategy.type == "LeastAllocated" else most_requested
    total = i64(sum(i64(per_resource(req, cap) * w) for (cap, req), w in values))
    return go_div(total, sum(w for _, w in values))


class AllocationScoreOracle:
    """Any of the resource-allocation Score plugins, given its strategy."""

    def __init__(self, name: str, strategy: Strategy) -> None:
        self.name = name
        self.strategy = strategy

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> tuple[int, Status]:
        return strategy_score(self.strategy, snapshot.infos[i], pod), Status.success()


def ignored(name: str, args: FitArgs) -> bool:
    """ignoredResources / ignoredResourceGroups apply to extended resources only."""
    return is_extended(name) and (name in args.ignored_resources or name.split("/")[0] in args.ignored_groups)


class FitOracle(AllocationScoreOracle):
    """NodeResourcesFit with args: the Filter skips ignored extended resources; the Score is the
    strategy's."""

    def __init__(self, args: FitArgs) -> None:
        super().__init__(noderesources.NAME, args.strategy)
        self.args = args

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> Status:
        try:
            checked = fits_request_checks(pod)
        except QuantityError as e:
            return Status.error(str(e), plugin=self.name)
        info = snapshot.infos[i]
        reasons: list[str] = []
        if len(info.pods) + 1 > info.allocatable.get("pods", 0):
            reasons.append(noderesources.REASON_TOO_MANY_PODS)
        for r, request in checked:
            if ignored(r, self.args):
                continue
            if info.allocatable.get(r, 0) < i64(request + info.requested.get(r, 0)):  # Go's fitsRequest
                reasons.append(f"Insufficient {r}")
        return Status.unschedulable(*reasons, plugin=self.name) if reasons else Status.success()


_ORACLES: dict[type, Callable[[Any], Plugin]] = {
    NodeResourcesLeastAllocated: lambda p: AllocationScoreOracle(p.name, p.strategy),
    NodeResourcesMostAllocated: lambda p: AllocationScoreOracle(p.name, p.strategy),
    RequestedToCapacityRatio: lambda p: AllocationScoreOracle(p.name, p.strategy),
    balancedallocation.NodeResourcesBalancedAllocation: lambda p: AllocationScoreOracle(
        p.name, Strategy("BalancedAllocation")
    ),
    NodeResourcesFit: lambda p: FitOracle(p.args),
}


def oracle_for(plugin: Plugin) -> Plugin | None:
    """The oracle of a production plugin (with its args), None for a plugin without one here."""
    make = _ORACLES.get(type(plugin))
    return None if make is None else make(plugin)
