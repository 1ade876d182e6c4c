"""NodeResourcesFit: the resource Filter and the LeastAllocated Score of Kubernetes' ``noderesources``.

PreFilter: the pod's effective requests (``apis.pod.pod_requests``: containers summed, init containers
and sidecars maxed in, overhead added) in snapshot units (cpu milli, others ``Value()``), kept as the
list of checked resources and as a snapshot vector.

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
Imports: numpy, apis (pod, quantity), scheduler.framework, scheduler.plugins.resourcemath.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Final

import numpy as np

from apis.gonum import go_div
from apis.pod import pod_requests, resources_key
from apis.quantity import QuantityError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import BoolArray, FilterResult, IntArray, Pod
from scheduler.framework.snapshot import PodInfo, Snapshot, to_values
from scheduler.framework.status import MAX_NODE_SCORE, Status
from scheduler.plugins.resourcemath import (
    MEMO_LIMIT,
    SCORE_WEIGHTS,
    RowWatch,
    go_div_all,
    is_checked_resource,
    least_requested_score,
    nonzero_requests,
    reason_order,
    watch,
)

NAME: Final = "NodeResourcesFit"
PRE_FILTER_KEY: Final = "PreFilter" + NAME
PRE_SCORE_KEY: Final = "PreScore" + NAME
REASON_TOO_MANY_PODS: Final = "Too many pods"
_SAFE: Final = 2**53  # magnitudes below it cannot overflow the int64 score arithmetic
_PyRow = tuple[int, int, int, int]  # non-zero cpu, memory; allocatable cpu, memory
_Memo = tuple[tuple[tuple[str, int], ...], dict[str, int], dict[tuple[str, ...], IntArray]]
_checked_memo: dict[Hashable, _Memo] = {}  # resources_key -> checked, requests, vector per resources
_pod_nonzero_memo: dict[Hashable, tuple[int, int]] = {}  # resources_key -> the pod's non-zero cpu, memory


@dataclass(frozen=True, slots=True)
class PreFilterState:
    """The checked resources the pod requests a non-zero amount of (reason order) and all its requests."""

    checked: tuple[tuple[str, int], ...]
    requests: dict[str, int]
    vector: IntArray  # read-only
    key: Hashable | None = None  # the pod's resources_key (None: not memoisable)


class NodeResourcesFit:
    """PreFilter + Filter + Score plugin; see the module docstring.

    The all-nodes forms keep row-aligned arrays (re-read for the rows whose generation moved, as the
    shared ``RowWatch`` reports them; all rows on a new snapshot or layout): per row the non-zero
    (cpu, memory) of its pods, ``allocatable - requested`` per resource (the int64 values the check
    compares; their least per resource lets a pod that fits every row pass without masks) and whether
    one more pod is too many. Scores are kept per incoming non-zero (cpu, memory) for every row with
    the RowWatch epoch they match, and patched in place for the rows moved since (Python integers).
    """

    def __init__(self) -> None:
        self._watch: RowWatch | None = None  # the snapshot's, when the row caches were synced
        self._epoch = 0  # the RowWatch epoch the row caches were synced at
        self._nz: IntArray = np.zeros((0, 2), np.int64)  # per row: the pods' non-zero cpu, memory
        self._pod_nz: dict[int, tuple[PodInfo, tuple[int, int]]] = {}
        self._pod_nz_limit = 0
        self._free: IntArray = np.zeros((0, 0), np.int64)  # [column, row]: allocatable - requested
        # Per column, at most the least free over the rows (the least itself when exact): requests
        # that fit under it fit every row. Re-read when a pod does not fit under an inexact bound.
        self._free_min: list[int] | None = None
        self._free_min_exact = False
        self._too_many: BoolArray = np.zeros(0, np.bool_)  # pod_count + 1 > allocatable pods
        self._too_many_count = 0
        self._scores: dict[tuple[int, int], tuple[int, IntArray]] = {}  # pod nz -> epoch, scores
        self._row_py: list[_PyRow | None] = []  # per row in Python integers, for patching scores
        self._score_cols: tuple[int | None, ...] = (None, None)  # the SCORE_WEIGHTS columns
        self._scores_limit = 0

    @property
    def name(self) -> str:
        return NAME

    # --- PreFilter / Filter ---------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        try:
            s = self._pre_filter_state(pod, snapshot)
        except QuantityError as e:
            return Status.error(str(e), plugin=NAME)
        state.write(PRE_FILTER_KEY, s)
        return Status.success()

    @staticmethod
    def _pre_filter_state(pod: Pod, snapshot: Snapshot) -> PreFilterState:
        key = resources_key(pod)
        hit = _checked_memo.get(key) if key is not None else None
        if hit is None:
            requests = to_values(pod_requests(pod))
            found = sorted(
                ((r, v) for r, v in requests.items() if v > 0 and is_checked_resource(r)),
                key=lambda x: reason_order(x[0]),
            )
            hit = (tuple(found), requests, {})
            if key is not None:
                if len(_checked_memo) >= MEMO_LIMIT:
                    _checked_memo.clear()
                _checked_memo[key] = hit
        checked, values, vectors = hit
        vector = vectors.get(snapshot.resources)
        if vector is None:  # shared by the pods of this key: read-only
            vector = snapshot.vector(values)
            vector.setflags(write=False)
            if len(vectors) >= 8:
                vectors.clear()
            vectors[snapshot.resources] = vector
        return PreFilterState(checked, dict(values), vector, key)

    def _state(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> PreFilterState | Status:
        s = state.get(PRE_FILTER_KEY)
        if isinstance(s, PreFilterState):
            return s
        st = self.pre_filter(state, pod, snapshot)
        return st if not st.is_success() else self._state(state, pod, snapshot)

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> Status:
        s = self._state(state, pod, snapshot)
        if isinstance(s, Status):
            return s
        col = snapshot.col
        reasons: list[str] = []
        pods = col.get("pods")
        allowed = int(snapshot.allocatable[i, pods]) if pods is not None else 0
        if int(snapshot.pod_count[i]) + 1 > allowed:
            reasons.append(REASON_TOO_MANY_PODS)
        for r, v in s.checked:
            j = col.get(r)
            free = int(snapshot.allocatable[i, j]) - int(snapshot.requested[i, j]) if j is not None else 0
            if v > free:
                reasons.append(f"Insufficient {r}")
        return Status.unschedulable(*reasons, plugin=NAME) if reasons else Status.success()

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        s = self._state(state, pod, snapshot)
        n = snapshot.n
        if isinstance(s, Status):
            return FilterResult(np.zeros(n, np.int32), (s,))
        if n == 0:
            return FilterResult.all_pass(0)
        self._sync(snapshot)
        col = snapshot.col
        if not self._too_many_count:  # no row fails when every request fits under the least free
            least = self._free_min
            if least is not None and self._fits_least(s, col, least):
                return FilterResult.all_pass(n)
            if least is None or not self._free_min_exact:  # (re-)read the least and retry
                least = self._free_min = self._free.min(axis=1).tolist()
                self._free_min_exact = True
                if self._fits_least(s, col, least):
                    return FilterResult.all_pass(n)
        reasons = [REASON_TOO_MANY_PODS]
        masks: list[BoolArray] = [self._too_many]
        for r, v in s.checked:
            j = col.get(r)
            reasons.append(f"Insufficient {r}")
            masks.append(np.ones(n, np.bool_) if j is None else self._free[j] < v)
        failing = np.flatnonzero(np.logical_or.reduce(masks))
        if len(failing) == 0:
            return FilterResult.all_pass(n)
        if len(masks) <= 62:  # a bit code per failing row, one status per distinct code
            codes = np.zeros(len(failing), np.int64)
            for k, m in enumerate(masks):
                codes |= m[failing].astype(np.int64) << k
            patterns, inverse = np.unique(codes, return_inverse=True)
            combos = [[bool(int(p) >> k & 1) for k in range(len(masks))] for p in patterns]
        else:  # too many reasons for a bit code: group the rows by their failure pattern
            stacked = np.stack([m[failing] for m in masks], axis=1)
            uniq, inverse = np.unique(stacked, axis=0, return_inverse=True)
            combos = [[bool(b) for b in row] for row in uniq]
        statuses = tuple(
            Status.unschedulable(*(r for r, hit in zip(reasons, combo, strict=True) if hit), plugin=NAME)
            for combo in combos
        )
        which = np.full(n, -1, np.int32)
        which[failing] = np.asarray(inverse, np.int32).reshape(-1)
        return FilterResult(which, statuses)

    @staticmethod
    def _fits_least(s: PreFilterState, col: dict[str, int], least: list[int]) -> bool:
        return all((j := col.get(r)) is not None and v <= least[j] for r, v in s.checked)

    # --- Score ----------------------------------------------------------------------------------
    def _pod_nonzero(self, state: CycleState, pod: Pod) -> tuple[int, int]:
        v = state.get(PRE_SCORE_KEY)
        if isinstance(v, tuple) and len(v) == 2:
            return int(v[0]), int(v[1])
        # The non-zero requests read only what resources_key covers: memoised by the PreFilter's key.
        s = state.get(PRE_FILTER_KEY)
        key = s.key if isinstance(s, PreFilterState) else None
        nz = _pod_nonzero_memo.get(key) if key is not None else None
        if nz is None:
            nz = nonzero_requests(pod, s.requests if isinstance(s, PreFilterState) else None)
            if key is not None:
                if len(_pod_nonzero_memo) >= MEMO_LIMIT:
                    _pod_nonzero_memo.clear()
                _pod_nonzero_memo[key] = nz
        state.write(PRE_SCORE_KEY, nz)
        return nz

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> tuple[int, Status]:
        pod_cpu, pod_mem = self._pod_nonzero(state, pod)
        node_cpu = node_mem = 0
        for info in snapshot.infos[i].pods.values():
            c, m = nonzero_requests(info.pod, info.requests)
            node_cpu, node_mem = node_cpu + c, node_mem + m
        requested = {"cpu": node_cpu + pod_cpu, "memory": node_mem + pod_mem}
        total = weights = 0
        for r, w in SCORE_WEIGHTS:
            j = snapshot.col.get(r)
            capacity = int(snapshot.allocatable[i, j]) if j is not None else 0
            total += least_requested_score(requested[r], capacity) * w
            weights += w
        return go_div(total, weights), Status.success()

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        pod_nz = self._pod_nonzero(state, pod)
        rows = np.asarray(feasible, np.int64)
        w = self._sync(snapshot)
        hit = self._scores.pop(pod_nz, None)
        stale = None if hit is None else w.since(hit[0])
        if hit is None or stale is None or len(stale) > 256:
            scores = self._least_allocated(snapshot, pod_nz, None)
            if hit is None and len(self._scores) >= self._scores_limit:
                del self._scores[next(iter(self._scores))]  # the least recently used
        else:
            scores = hit[1]
            if stale:
                patch = self._least_allocated_few(pod_nz, stale)
                if patch is None:
                    at = np.asarray(stale, np.int64)
                    scores[at] = self._least_allocated(snapshot, pod_nz, at)
                else:
                    scores.put(stale, patch)
        self._scores[pod_nz] = (w.epoch, scores)
        return scores.take(rows)

    def _least_allocated(
        self, snapshot: Snapshot, pod_nz: tuple[int, int], rows: IntArray | None
    ) -> IntArray:
        """The scores of ``rows`` (None: all rows) for a pod of non-zero requests ``pod_nz``."""
        nz = self._nz if rows is None else self._nz[rows]
        requested = nz + np.asarray(pod_nz, np.int64)
        m = len(requested)
        total = np.zeros(m, np.int64)
        weights = 0
        for k, (r, w) in enumerate(SCORE_WEIGHTS):
            j = snapshot.col.get(r)
            if j is None:
                cap = np.zeros(m, np.int64)
            else:
                cap = snapshot.allocatable[:, j] if rows is None else snapshot.allocatable[rows, j]
            req = requested[:, k]
            bad = (cap == 0) | (req > cap)
            safe_cap = np.where(bad, 1, cap)
            score = np.where(
                bad, 0, go_div_all((safe_cap - np.where(bad, 0, req)) * MAX_NODE_SCORE, safe_cap)
            )
            total += score * w
            weights += w
        return go_div_all(total, np.full(m, weights, np.int64))

    def _least_allocated_few(self, pod_nz: tuple[int, int], rows: list[int]) -> list[int] | None:
        """``_least_allocated`` of a few rows in Python integers (from ``_row_py``); None when a node's
        non-zero sum, the pod's or an allocatable is not within ±2^53, where the int64 arithmetic could
        wrap. Within it no int64 intermediate wraps, so both give the same integers: ``|req| < 2^54``,
        ``|cap - req| < 2^55``, a score's magnitude is at most ``|cap - req| * 100 < 2^62`` and the
        weighted sum (weights 1 + 1) stays below 2^63."""
        pc, pm = pod_nz
        if max(abs(pc), abs(pm)) >= _SAFE:
            return None
        row_py = self._row_py
        out: list[int] = []
        for i in rows:
            v = row_py[i]
            if v is None:
                return None
            nc, nm, cc, cm = v
            rc, rm = nc + pc, nm + pm
            # least_requested_score, floor division being truncation for the non-negative operands
            sc = (cc - rc) * MAX_NODE_SCORE // cc if cc > 0 and rc <= cc else least_requested_score(rc, cc)
            sm = (cm - rm) * MAX_NODE_SCORE // cm if cm > 0 and rm <= cm else least_requested_score(rm, cm)
            total = sc + sm  # weights 1 and 1 (SCORE_WEIGHTS)
            out.append(total // 2 if total >= 0 else go_div(total, 2))
        return out

    @staticmethod
    def _py_row(nz: tuple[int, int], alloc: list[int], jc: int | None, jm: int | None) -> _PyRow | None:
        """A row's (non-zero cpu, memory, allocatable cpu, memory); None unless all are within ±2^53."""
        nc, nm = nz
        cc = alloc[jc] if jc is not None else 0
        cm = alloc[jm] if jm is not None else 0
        ok = -_SAFE < nc < _SAFE and -_SAFE < nm < _SAFE and -_SAFE < cc < _SAFE and -_SAFE < cm < _SAFE
        return (nc, nm, cc, cm) if ok else None

    # --- row-aligned caches -------------------------------------------------------------------------
    def _pod_info_nonzero(self, info: PodInfo) -> tuple[int, int]:
        hit = self._pod_nz.get(id(info))
        if hit is not None and hit[0] is info:
            return hit[1]
        v = nonzero_requests(info.pod, info.requests)
        self._pod_nz[id(info)] = (info, v)
        return v

    def _row_nonzero(self, snapshot: Snapshot, i: int) -> tuple[int, int]:
        cpu = mem = 0
        for info in snapshot.infos[i].pods.values():
            c, m = self._pod_info_nonzero(info)
            cpu, mem = cpu + c, mem + m
        return cpu, mem

    def _sync(self, snapshot: Snapshot) -> RowWatch:
        """Align the row caches with the snapshot: re-read the rows whose generation moved, or every
        row on a new snapshot or layout (the shared RowWatch tells which)."""
        w = watch(snapshot, self._watch)
        rows = w.since(self._epoch) if w is self._watch else None
        self._epoch = w.epoch
        if rows is None:
            self._rebuild(snapshot, w)
            return w
        for i in rows:
            self._sync_row(snapshot, i)
        if rows and len(self._pod_nz) > self._pod_nz_limit:  # departed pods piled up: prune next call
            self._watch = None
        return w

    def _sync_row(self, snapshot: Snapshot, i: int) -> None:
        """Re-read one row; its free amounts come from the same int64 subtraction as on a rebuild."""
        nz = self._row_nonzero(snapshot, i)
        self._nz[i] = nz
        arow = snapshot.allocatable[i]
        free = arow - snapshot.requested[i]
        self._free[:, i] = free
        new: list[int] = free.tolist()
        alloc: list[int] = arow.tolist()
        jc, jm = self._score_cols
        v = (nz[0], nz[1], alloc[jc] if jc is not None else 0, alloc[jm] if jm is not None else 0)
        self._row_py[i] = v if min(v) > -_SAFE and max(v) < _SAFE else None  # as _py_row
        if self._free_min is not None:  # still at or below every row's free: a lower bound
            self._free_min, self._free_min_exact = list(map(min, self._free_min, new)), False
        pods = snapshot.col.get("pods")
        many = snapshot.pod_count.item(i) + 1 > (alloc[pods] if pods is not None else 0)
        if many != self._too_many.item(i):
            self._too_many[i] = many
            self._too_many_count += 1 if many else -1

    def _rebuild(self, snapshot: Snapshot, w: RowWatch) -> None:
        n = snapshot.n
        self._watch = w
        old, self._pod_nz = self._pod_nz, {}
        for info in (p for node in snapshot.infos for p in node.pods.values()):
            hit = old.get(id(info))
            if hit is not None and hit[0] is info:
                self._pod_nz[id(info)] = hit
        nzs = [self._row_nonzero(snapshot, i) for i in range(n)]
        self._nz = np.array(nzs, np.int64).reshape(n, 2)
        cols = self._score_cols = tuple(snapshot.col.get(r) for r, _ in SCORE_WEIGHTS)
        allocs: list[list[int]] = snapshot.allocatable.tolist()
        self._row_py = [self._py_row(nz, a, *cols) for nz, a in zip(nzs, allocs, strict=True)]
        self._pod_nz_limit = 2 * len(self._pod_nz) + 4096
        self._free = np.ascontiguousarray((snapshot.allocatable - snapshot.requested).T)
        self._free_min = None
        pods = snapshot.col.get("pods")
        allowed = snapshot.allocatable[:, pods] if pods is not None else np.zeros(n, np.int64)
        self._too_many = snapshot.pod_count + 1 > allowed
        self._too_many_count = int(self._too_many.sum())
        self._scores = {}
        self._scores_limit = max(4, min(64, 2_000_000 // max(n, 1)))
