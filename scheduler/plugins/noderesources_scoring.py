"""The resource-allocation scores of Kubernetes' noderesources plugins, one implementation for the
v1.20 plugins (NodeResourcesLeastAllocated, NodeResourcesMostAllocated, RequestedToCapacityRatio,
NodeResourcesBalancedAllocation) and NodeResourcesFit's ``scoringStrategy``
(docs/rules/scheduler-basic.md#resource-allocation-scores).

Per scored resource a node has an allocatable and a requested amount: cpu and memory use the node's
pods' non-zero requests plus the incoming pod's (the snapshot's ``nonzero``, as LeastAllocated always
has); ephemeral-storage and scalar resources (``resourcemath.is_scalar_resource``) the node's requests
plus the pod's effective request; any other name counts 0 and 0. Then, in Go's int64 arithmetic
(divisions truncate, products wrap):

- LeastAllocated: ``(alloc - req) * 100 / alloc``, 0 when alloc is 0 or req > alloc; the node score is
  ``Σ score × weight / Σ weight``.
- MostAllocated: ``req * 100 / alloc``, same zero cases and weighted mean.
- RequestedToCapacityRatio: the broken-linear shape at ``100 - (alloc - req) * 100 / alloc``
  (at 100 when alloc is 0 or req > alloc); only resources scoring > 0 enter the weighted mean, which is
  ``math.Round`` of the float64 quotient (0 when no weight is left).
- BalancedAllocation (cpu and memory only): fractions ``req / alloc`` in float64 (1 when alloc is 0);
  0 when either is ≥ 1, else ``int64((1 - |cpu - memory|) * 100)``.

Vectorised over the snapshot's resource-major matrices; results are kept per (rules, pod inputs) and
patched on the rows the snapshot re-copies (``AllocationScores``, a view with ``RowResults``): the
rules scoring the same resources share one entry, so one patch serves every plugin of a cycle.
Imports: numpy, apis (pod, quantity), scheduler.framework, scheduler.plugins (resourcemath,
noderesources_args).
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from apis.pod import pod_requests, resources_key
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import IntArray, Pod
from scheduler.framework.nonzero import nonzero_requests
from scheduler.framework.rowresults import RowResults
from scheduler.framework.snapshot import RowChange, Snapshot
from scheduler.framework.status import MAX_NODE_SCORE
from scheduler.framework.units import to_values
from scheduler.plugins.noderesources_args import (
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
    Strategy,
)
from scheduler.plugins.resourcemath import MEMO_LIMIT, go_div_all, is_scalar_resource

F64 = npt.NDArray[np.float64]
BALANCED: Final = "BalancedAllocation"
BALANCED_STRATEGY: Final = Strategy(BALANCED)  # cpu and memory, weights unused
MAX_UTILIZATION: Final = 100
# NodeResourcesFit's PreFilter state (its ``requests``: the pod's effective requests in snapshot units)
FIT_PRE_FILTER_KEY: Final = "PreFilterNodeResourcesFit"
_requests_memo: dict[Hashable, dict[str, int]] = {}


def pod_request_values(pod: Pod) -> dict[str, int]:
    """The pod's effective requests in snapshot units, memoised by ``apis.pod.resources_key``."""
    key = resources_key(pod)
    hit = _requests_memo.get(key) if key is not None else None
    if hit is None:
        hit = to_values(pod_requests(pod))
        if key is not None:
            if len(_requests_memo) >= MEMO_LIMIT:
                _requests_memo.clear()
            _requests_memo[key] = hit
    return hit


def pod_inputs(strategy: Strategy, pod: Pod, requests: dict[str, int] | None = None) -> tuple[int, ...]:
    """What the rule reads from the pod: per scored resource its (non-zero for cpu/memory) request."""
    reqs = pod_request_values(pod) if requests is None else requests
    nz = nonzero_requests(pod, reqs)
    out = []
    for name, _ in strategy.resources:
        if name == "cpu":
            out.append(nz[0])
        elif name == "memory":
            out.append(nz[1])
        elif name == "ephemeral-storage" or is_scalar_resource(name):
            out.append(reqs.get(name, 0))
        else:
            out.append(0)
    return tuple(out)


_NONZERO_ROWS: Final[dict[tuple[str, ...], list[int]]] = {
    ("cpu", "memory"): [0, 1],
    ("memory", "cpu"): [1, 0],
}  # snapshot.nonzero's rows


@functools.lru_cache(maxsize=64)
def resource_names(strategy: Strategy) -> tuple[str, ...]:
    """The scored resources' names: all `pod_inputs` and `node_columns` read of the strategy."""
    return tuple(name for name, _ in strategy.resources)


@functools.lru_cache(maxsize=256)
def _column(values: tuple[int, ...]) -> IntArray:
    """``values`` as a read-only ``(len, 1)`` int64 column (column indices, a pod's inputs: few)."""
    a = np.array(values, np.int64).reshape(-1, 1)
    a.setflags(write=False)
    return a


def node_columns(
    strategy: Strategy, snapshot: Snapshot, pod: Sequence[int], rows: IntArray | None
) -> tuple[IntArray, IntArray]:
    """Allocatable and requested (node's plus pod's) per scored resource: ``(resources, rows)``."""
    order = _NONZERO_ROWS.get(resource_names(strategy))
    if order is not None:  # the usual cpu and memory (always columns): two gathers, no loop
        cpu, memory = snapshot.col["cpu"], snapshot.col["memory"]
        cols = _column((cpu, memory) if order[0] == 0 else (memory, cpu))
        pod_column = _column(tuple(pod))
        if rows is None:
            return snapshot.allocatable[cols[:, 0]], snapshot.nonzero[order] + pod_column
        used = snapshot.nonzero[:, rows] if order[0] == 0 else snapshot.nonzero[::-1, rows]
        return snapshot.allocatable[cols, rows], used + pod_column
    n = snapshot.n if rows is None else len(rows)
    alloc = np.zeros((len(strategy.resources), n), np.int64)
    req = np.zeros((len(strategy.resources), n), np.int64)
    for k, (name, _) in enumerate(strategy.resources):
        j = snapshot.col.get(name)
        if name in ("cpu", "memory"):
            used = snapshot.nonzero[0 if name == "cpu" else 1]
        elif j is not None and (name == "ephemeral-storage" or is_scalar_resource(name)):
            used = snapshot.requested[j]
        elif name == "ephemeral-storage" or is_scalar_resource(name):
            req[k] = pod[k]  # no node has it: allocatable 0, requested the pod's
            continue
        else:
            continue  # not scored: 0 and 0
        assert j is not None  # cpu and memory always have a column
        alloc[k] = snapshot.allocatable[j] if rows is None else snapshot.allocatable[j, rows]
        req[k] = used if rows is None else used[rows]
        req[k] += pod[k]
    return alloc, req


def _weighted_mean(scores: IntArray, weights: IntArray) -> IntArray:
    """``Σ score × weight / Σ weight`` over axis 0 in int64 (weights are validated positive)."""
    return go_div_all(weights @ scores, _weight_sum(weights.tobytes()))


@functools.lru_cache(maxsize=64)
def _weight_sum(weights: bytes) -> int:
    """Σ weight (Python ints: exact), kept per weights (a strategy's are fixed; summing each call costs
    a numpy reduction)."""
    return sum(np.frombuffer(weights, np.int64).tolist())


@functools.lru_cache(maxsize=64)
def _weights(strategy: Strategy) -> IntArray:
    """The strategy's weights as a read-only array (strategies are few and hashable)."""
    w = np.array([w for _, w in strategy.resources], np.int64)
    w.setflags(write=False)
    return w


def least_allocated(alloc: IntArray, req: IntArray, weights: IntArray) -> IntArray:
    fits = (req <= alloc) & (alloc != 0)
    free = (alloc - req) * MAX_NODE_SCORE
    free *= fits  # 0 where it does not fit, and then any non-zero divisor gives 0
    return _weighted_mean(go_div_all(free, alloc | (alloc == 0)), weights)


def most_allocated(alloc: IntArray, req: IntArray, weights: IntArray) -> IntArray:
    fits = (req <= alloc) & (alloc != 0)
    used = req * MAX_NODE_SCORE
    used *= fits
    return _weighted_mean(go_div_all(used, alloc | (alloc == 0)), weights)


def broken_linear(shape: Sequence[tuple[int, int]], p: IntArray) -> IntArray:
    """``buildBrokenLinearFunction``: the first point whose utilization is ≥ p decides; before the first
    point its score, past the last the last score, between two the line, truncated as Go divides."""
    out = np.full(p.shape, shape[-1][1], np.int64)
    for i in reversed(range(len(shape))):  # the smallest matching i is applied last
        u, s = shape[i]
        if i == 0:
            value: IntArray | int = s
        else:
            u0, s0 = shape[i - 1]
            value = s0 + go_div_all((s - s0) * (p - u0), u - u0)
        out = np.where(p <= u, value, out)
    return out


def go_round(x: F64) -> F64:
    """Go's ``math.Round``: half away from zero, exactly (``x - trunc(x)`` is exact in float64)."""
    t = np.trunc(x)
    return t + np.copysign((np.abs(x - t) >= 0.5).astype(np.float64), x)


def go_int64_all(x: F64) -> IntArray:
    """``int64(x)`` on amd64 element-wise: truncation; NaN and out-of-range values give MinInt64."""
    ok = np.abs(x) < 2.0**63  # NaN compares false; -2^63 itself converts to MinInt64 either way
    if np.count_nonzero(ok) == ok.size:  # the usual case: one conversion (astype truncates toward zero)
        return x.astype(np.int64)
    out = np.full(x.shape, np.iinfo(np.int64).min, np.int64)
    out[ok] = x[ok].astype(np.int64)
    return out


def requested_to_capacity_ratio(
    alloc: IntArray, req: IntArray, weights: IntArray, shape: Sequence[tuple[int, int]]
) -> IntArray:
    fits = (req <= alloc) & (alloc != 0)
    free = (alloc - req) * MAX_UTILIZATION
    free *= fits
    p = np.where(fits, MAX_UTILIZATION - go_div_all(free, alloc | (alloc == 0)), MAX_UTILIZATION)
    scores = broken_linear(shape, p)
    counted = scores > 0
    total = weights @ (scores * counted)
    weight_sum = weights @ counted
    some = weight_sum != 0
    quotient = np.divide(total.astype(np.float64), weight_sum, out=np.zeros(len(total)), where=some)
    return go_int64_all(go_round(quotient))  # 0 where no weight is left


def fractions(alloc: IntArray, req: IntArray) -> F64:
    """``fractionOfCapacity``: req / alloc in float64, 1 where alloc is 0."""
    return np.divide(req.astype(np.float64), alloc, out=np.ones(alloc.shape), where=alloc != 0)


def balanced_allocation(alloc: IntArray, req: IntArray) -> IntArray:
    """Rows 0 and 1 are cpu and memory."""
    f = fractions(alloc, req)
    cpu, memory = f[0], f[1]
    score = go_int64_all((1 - np.abs(cpu - memory)) * float(MAX_NODE_SCORE))
    full = f >= 1
    return np.where(np.logical_or(full[0], full[1]), 0, score)


def evaluate(strategy: Strategy, alloc: IntArray, req: IntArray) -> IntArray:
    """The rule of ``strategy`` over columns of (resources, rows) matrices."""
    weights = _weights(strategy)
    if strategy.type == LEAST_ALLOCATED:
        return least_allocated(alloc, req, weights)
    if strategy.type == MOST_ALLOCATED:
        return most_allocated(alloc, req, weights)
    if strategy.type == REQUESTED_TO_CAPACITY_RATIO:
        return requested_to_capacity_ratio(alloc, req, weights, strategy.shape)
    if strategy.type == BALANCED:
        return balanced_allocation(alloc, req)
    raise ValueError(f"unknown scoring strategy {strategy.type!r}")


@functools.lru_cache(maxsize=64)
def inputs_key(names: tuple[str, ...]) -> str:
    """The CycleState key of the pod's inputs for strategies scoring `names` (shared by the plugins
    scoring the same resources, as their inputs are the same)."""
    return "PreScoreNodeResources/" + ",".join(names)


class AllocationScores:
    """Scores of every row per (strategies, pod inputs), a snapshot view: kept and patched on the rows
    the snapshot re-copies, moved with the rows when nodes join or leave. Strategies scoring the same
    resources (NodeResourcesFit's LeastAllocated and BalancedAllocation: cpu and memory) form one group
    kept in one entry: one gather of the node columns and one patch serve all of them, and the second
    plugin of a cycle finds its scores up to date."""

    reads_pods = True  # the rows' requested and non-zero sums

    def __init__(self) -> None:
        self.results = RowResults(0)
        self.groups: dict[tuple[str, ...], tuple[Strategy, ...]] = {}  # by resource names, in arrival order

    def rebuild(self, snapshot: Snapshot) -> None:
        self.results = RowResults(snapshot.n)

    def refresh(self, snapshot: Snapshot, rows: Sequence[int]) -> None:
        self.results.changed(rows)

    def resize(self, snapshot: Snapshot, change: RowChange) -> None:
        """Nodes joined or left (docs/scheduler-scale.md#node-list): kept results move with the rows
        (the new rows are then refreshed, so patched on the next read)."""
        self.results.resize(change)

    def scores(self, strategy: Strategy, snapshot: Snapshot, pod: tuple[int, ...]) -> IntArray:
        """Every row's score (kept: callers must not modify it)."""
        names = resource_names(strategy)
        group = self.groups.get(names, ())
        if strategy in group:
            at = group.index(strategy)
        else:  # a group only grows, so its length names it in the entries' keys
            at, group = len(group), (*group, strategy)
            self.groups[names] = group

        def rule(rows: IntArray | None) -> IntArray:
            alloc, req = node_columns(strategy, snapshot, pod, rows)
            out = np.empty((len(group), alloc.shape[1]), np.int64)
            for k, s in enumerate(group):
                out[k] = evaluate(s, alloc, req)
            return out

        values: IntArray = self.results.get((names, len(group), pod), rule)[at]
        return values


VIEW_KEY: Final = ("noderesources", "allocation-scores")


def score_all(
    strategy: Strategy,
    state: CycleState,
    pod: Pod,
    snapshot: Snapshot,
    requests: dict[str, int] | None = None,
) -> IntArray:
    """Every row's score under ``strategy``; the pod's inputs are kept in ``state`` (``requests``: its
    effective requests when the caller has them)."""
    key = inputs_key(resource_names(strategy))
    inputs: Any = state.get(key)
    if not isinstance(inputs, tuple):
        if requests is None:  # NodeResourcesFit's PreFilter ran this cycle: its requests are the pod's
            found = getattr(state.get(FIT_PRE_FILTER_KEY), "requests", None)
            requests = found if isinstance(found, dict) else None
        inputs = pod_inputs(strategy, pod, requests)
        state.write(key, inputs)
    return snapshot.view(VIEW_KEY, AllocationScores).scores(strategy, snapshot, inputs)
