"""NodeResourcesFit: the resource Filter and the LeastAllocated Score of Kubernetes' ``noderesources``.

PreFilter: the pod's effective requests (``apis.pod.pod_requests``: containers summed, init containers
and sidecars maxed in, overhead added) in snapshot units (cpu milli, others ``Value()``), kept as the
list of checked resources.

Filter (current Kubernetes ``fitsRequest``, code UNSCHEDULABLE, all reasons in one Status):
``Too many pods`` when ``pod_count + 1 > allocatable pods`` (a node without ``pods`` allocatable allows
none); then ``Insufficient <resource>`` for each resource the pod requests a non-zero amount of with
``request > allocatable - requested`` (a resource the node lacks has allocatable 0). Checked resources
are those Kubernetes' ``Resource.Add`` keeps: cpu, memory, ephemeral-storage and scalar resources
(``hugepages-*``, ``attachable-volumes-*``, ``*kubernetes.io/*`` such as ``kubernetes.io/batch-cpu``,
and extended resources ``domain/name``); other names (``pods`` included) are not checked. Reason order:
pods, cpu, memory, ephemeral-storage, then scalar resources by name (Go iterates a map there).

Score: LeastAllocated over cpu and memory, weight 1 each. Per resource, with ``requested`` the node's
*non-zero* requests plus the pod's: ``(allocatable - requested) * 100 / allocatable``, 0 when
allocatable is 0 or requested exceeds it; the node score is the weighted sum divided by the weight sum.
Divisions truncate toward zero as Go's do. Non-zero requests (``GetNonzeroRequests``) count a
container (or init container) without a cpu request as 100m and without a memory request as 200Mi (an
explicit 0 stays 0), aggregated like ``pod_requests`` (overhead in snapshot units). This is Kubernetes'
``NodeInfo.NonZeroRequested`` for the node's pods and ``PodRequests(NonMissingContainerRequests)``
(1.27+) for the incoming pod; 1.20-1.26 added the incoming pod's cpu overhead as ``Value()`` (whole
cores) and ignored sidecars, which is not reproduced.

The rule is docs/rules/scheduler.md#noderesourcesfit. Its arithmetic is Go's int64: numpy's int64
wraps where Go's does, and divisions truncate (``resourcemath.go_div_all``). Vectorised over
``FitRows``, a snapshot view of what the rule reads per node.
Imports: numpy, apis (pod, quantity), scheduler.framework, scheduler.plugins.resourcemath.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from apis.pod import pod_requests, resources_key
from apis.quantity import QuantityError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import BoolArray, FilterResult, IntArray, Pod
from scheduler.framework.rowresults import RowResults
from scheduler.framework.snapshot import NodeInfo, Snapshot, to_values
from scheduler.framework.status import MAX_NODE_SCORE, Status
from scheduler.plugins.resourcemath import (
    MEMO_LIMIT,
    SCORE_WEIGHTS,
    go_div_all,
    is_checked_resource,
    nonzero_requests,
    reason_order,
)

NAME: Final = "NodeResourcesFit"
PRE_FILTER_KEY: Final = "PreFilter" + NAME
PRE_SCORE_KEY: Final = "PreScore" + NAME
REASON_TOO_MANY_PODS: Final = "Too many pods"
_checked_memo: dict[Hashable, tuple[tuple[tuple[str, int], ...], dict[str, int]]] = {}  # by resources_key


@dataclass(frozen=True, slots=True)
class PreFilterState:
    """The checked resources the pod requests a non-zero amount of (reason order) and all its requests."""

    checked: tuple[tuple[str, int], ...]
    requests: dict[str, int]


def pre_filter_state(pod: Pod) -> PreFilterState:
    """The pod's PreFilterState, memoised by ``apis.pod.resources_key`` (every input it reads)."""
    key = resources_key(pod)
    hit = _checked_memo.get(key) if key is not None else None
    if hit is None:
        requests = to_values(pod_requests(pod))
        found = sorted(
            ((r, v) for r, v in requests.items() if v > 0 and is_checked_resource(r)),
            key=lambda x: reason_order(x[0]),
        )
        hit = (tuple(found), requests)
        if key is not None:
            if len(_checked_memo) >= MEMO_LIMIT:
                _checked_memo.clear()
            _checked_memo[key] = hit
    return PreFilterState(hit[0], dict(hit[1]))


def nonzero_requested(info: NodeInfo) -> tuple[int, int]:
    """The non-zero (cpu, memory) requests summed over the node's pods (``NodeInfo.NonZeroRequested``)."""
    cpu = mem = 0
    for p in info.pods.values():
        c, m = nonzero_requests(p.pod, p.requests)
        cpu, mem = cpu + c, mem + m
    return cpu, mem


WEIGHT_SUM: Final = sum(w for _, w in SCORE_WEIGHTS)


def least_allocated(capacity: IntArray, nonzero: IntArray, pod: IntArray) -> IntArray:
    """LeastAllocated (see the module docstring). Axis 0 runs over SCORE_WEIGHTS' resources; the
    others broadcast: the node's allocatable, its pods' non-zero requests, the incoming pod's."""
    requested = nonzero + pod
    fits = requested <= capacity
    fits &= capacity != 0
    score = go_div_all((capacity - requested) * MAX_NODE_SCORE, np.where(fits, capacity, 1))
    np.copyto(score, 0, where=~fits)
    total = score[0] * SCORE_WEIGHTS[0][1]
    for k in range(1, len(SCORE_WEIGHTS)):
        total += score[k] * SCORE_WEIGHTS[k][1]
    return go_div_all(total, WEIGHT_SUM)


class FitRows:
    """NodeResourcesFit's row-aligned data (a snapshot view), resource-major so that a resource is one
    contiguous array: ``free`` (allocatable - requested per snapshot column), ``too_many`` (one more pod
    exceeds allocatable pods), and per score resource the allocatable (``capacity``) and the node's pods'
    non-zero requests (``nonzero``). ``scores`` keeps LeastAllocated per pod non-zero requests."""

    reads_pods = True  # the free resources and non-zero requests of its pods

    def __init__(self) -> None:
        self.scores = RowResults(0)
        self.free: IntArray = np.zeros((0, 0), np.int64)
        self.too_many: BoolArray = np.zeros(0, np.bool_)
        self.capacity: IntArray = np.zeros((len(SCORE_WEIGHTS), 0), np.int64)
        self.nonzero: IntArray = np.zeros((len(SCORE_WEIGHTS), 0), np.int64)

    def rebuild(self, snapshot: Snapshot) -> None:
        n, k = snapshot.n, len(SCORE_WEIGHTS)
        self.free = np.zeros((len(snapshot.resources), n), np.int64)
        self.too_many = np.zeros(n, np.bool_)
        self.capacity, self.nonzero = np.zeros((k, n), np.int64), np.zeros((k, n), np.int64)
        self._derive(snapshot, range(n))
        self.scores = RowResults(n)

    def refresh(self, snapshot: Snapshot, rows: Sequence[int]) -> None:
        self._derive(snapshot, rows)
        self.scores.changed(rows)

    def _derive(self, snapshot: Snapshot, rows: Sequence[int]) -> None:
        """The rows' values from the snapshot's (one row in a scheduling cycle, every row on rebuild)."""
        at = np.asarray(rows, np.intp)
        alloc = snapshot.allocatable[at]
        self.free[:, at] = (alloc - snapshot.requested[at]).T
        pods = snapshot.col.get("pods")
        self.too_many[at] = snapshot.pod_count[at] + 1 > (alloc[:, pods] if pods is not None else 0)
        for k, (r, _) in enumerate(SCORE_WEIGHTS):
            j = snapshot.col.get(r)
            self.capacity[k, at] = alloc[:, j] if j is not None else 0
        nonzero = [nonzero_requested(snapshot.infos[i]) for i in rows]
        self.nonzero[:, at] = np.array(nonzero, np.int64).reshape(len(at), len(SCORE_WEIGHTS)).T

    def least_allocated(self, pod: tuple[int, int]) -> IntArray:
        """The scores of every row for a pod of non-zero requests ``pod`` (kept: callers copy)."""
        requests = np.array(pod, np.int64).reshape(-1, 1)

        def rule(rows: IntArray | None) -> IntArray:
            if rows is None:
                return least_allocated(self.capacity, self.nonzero, requests)
            return least_allocated(self.capacity[:, rows], self.nonzero[:, rows], requests)

        return self.scores.get(pod, rule)


class NodeResourcesFit:
    """PreFilter + Filter + Score plugin; see the module docstring."""

    @property
    def name(self) -> str:
        return NAME

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        try:
            s = pre_filter_state(pod)
        except QuantityError as e:
            return Status.error(str(e), plugin=NAME)
        state.write(PRE_FILTER_KEY, s)
        return Status.success()

    def _state(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> PreFilterState | Status:
        s = state.get(PRE_FILTER_KEY)
        if isinstance(s, PreFilterState):
            return s
        st = self.pre_filter(state, pod, snapshot)
        return st if not st.is_success() else self._state(state, pod, snapshot)

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        s = self._state(state, pod, snapshot)
        n = snapshot.n
        if isinstance(s, Status):
            return FilterResult(np.zeros(n, np.int32), (s,))
        rows = snapshot.view((NAME, "rows"), FitRows)
        reasons = [REASON_TOO_MANY_PODS]
        masks: list[BoolArray] = [rows.too_many]
        for r, v in s.checked:
            j = snapshot.col.get(r)
            reasons.append(f"Insufficient {r}")
            masks.append(np.ones(n, np.bool_) if j is None else rows.free[j] < v)
        failing = np.flatnonzero(np.logical_or.reduce(masks))
        if len(failing) == 0:
            return FilterResult.all_pass(n)
        # One status per distinct failure pattern: rows' patterns packed to bytes and grouped.
        hits = np.stack([m[failing] for m in masks], axis=1)
        packed = np.ascontiguousarray(np.packbits(hits, axis=1))
        _, first, inverse = np.unique(
            packed.view(f"V{packed.shape[1]}").ravel(), return_index=True, return_inverse=True
        )
        statuses = tuple(
            Status.unschedulable(*(r for r, hit in zip(reasons, row, strict=True) if hit), plugin=NAME)
            for row in hits[first].tolist()
        )
        which = np.full(n, -1, np.int32)
        which[failing] = np.asarray(inverse, np.int32).reshape(-1)
        return FilterResult(which, statuses)

    def _pod_nonzero(self, state: CycleState, pod: Pod) -> tuple[int, int]:
        v = state.get(PRE_SCORE_KEY)
        if isinstance(v, tuple):
            return v
        s = state.get(PRE_FILTER_KEY)
        nz = nonzero_requests(pod, s.requests if isinstance(s, PreFilterState) else None)
        state.write(PRE_SCORE_KEY, nz)
        return nz

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        scores = snapshot.view((NAME, "rows"), FitRows).least_allocated(self._pod_nonzero(state, pod))
        return scores.take(feasible)
