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

import weakref
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from apis.pod import pod_requests, resources_key
from apis.quantity import QuantityError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import BoolArray, FilterResult, IntArray, Pod
from scheduler.framework.snapshot import PodInfo, Snapshot, to_values
from scheduler.framework.status import MAX_NODE_SCORE, Status
from scheduler.plugins.resourcemath import (
    MEMO_LIMIT,
    SCORE_WEIGHTS,
    go_div,
    go_div_all,
    is_checked_resource,
    least_requested_score,
    nonzero_requests,
    reason_order,
    wrap64,
)

NAME: Final = "NodeResourcesFit"
PRE_FILTER_KEY: Final = "PreFilter" + NAME
PRE_SCORE_KEY: Final = "PreScore" + NAME
REASON_TOO_MANY_PODS: Final = "Too many pods"
_LOG_LENGTH: Final = 512  # syncs remembered for patching cached scores
_SAFE: Final = 2**53  # magnitudes below it cannot overflow the int64 score arithmetic
_checked_memo: dict[Hashable, tuple[tuple[tuple[str, int], ...], dict[str, int]]] = {}


@dataclass(frozen=True, slots=True)
class PreFilterState:
    """The checked resources the pod requests a non-zero amount of (reason order) and all its requests."""

    checked: tuple[tuple[str, int], ...]
    requests: dict[str, int]
    vector: IntArray


class NodeResourcesFit:
    """PreFilter + Filter + Score plugin; see the module docstring.

    The all-nodes forms keep row-aligned arrays (re-read for rows whose generation moved, all of them
    on a new snapshot or layout): per row the non-zero (cpu, memory) of its pods, ``allocatable -
    requested`` per resource (the int64 values the check compares; their least per resource lets a pod
    that fits every row pass without masks) and whether one more pod is too many. Scores are kept per
    incoming non-zero (cpu, memory) for every row and patched for the rows re-read since, found in a
    log of re-reads numbered by a plugin-internal tick (so a generation that goes back cannot alias).
    """

    def __init__(self) -> None:
        self._snap: weakref.ref[Snapshot] | None = None
        self._layout = -1
        self._gen: npt.NDArray[np.int64] = np.zeros(0, np.int64)
        self._moved: BoolArray = np.zeros(0, np.bool_)  # scratch: rows whose generation moved
        self._nz: IntArray = np.zeros((0, 2), np.int64)  # per row: the pods' non-zero cpu, memory
        self._pod_nz: dict[int, tuple[PodInfo, tuple[int, int]]] = {}
        self._pod_nz_limit = 0
        self._free: IntArray = np.zeros((0, 0), np.int64)  # [column, row]: allocatable - requested
        self._free_min: list[int] | None = None  # per column, the least free over the rows
        self._too_many: BoolArray = np.zeros(0, np.bool_)  # pod_count + 1 > allocatable pods
        self._too_many_count = 0
        self._tick = 0
        self._log: deque[tuple[int, list[int]]] = deque(maxlen=_LOG_LENGTH)  # tick, rows re-read then
        self._scores: dict[tuple[int, int], tuple[int, IntArray]] = {}  # pod nz -> tick, scores
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
            checked = sorted(
                ((r, v) for r, v in requests.items() if v > 0 and is_checked_resource(r)),
                key=lambda x: reason_order(x[0]),
            )
            hit = (tuple(checked), requests)
            if key is not None:
                if len(_checked_memo) >= MEMO_LIMIT:
                    _checked_memo.clear()
                _checked_memo[key] = hit
        requests = dict(hit[1])
        return PreFilterState(hit[0], requests, snapshot.vector(requests))

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
        if not self._too_many_count:  # no row fails when every request fits the least free row
            if self._free_min is None:
                self._free_min = self._free.min(axis=1).tolist()
            least = self._free_min
            if all((j := col.get(r)) is not None and v <= least[j] for r, v in s.checked):
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

    # --- Score ----------------------------------------------------------------------------------
    def _pod_nonzero(self, state: CycleState, pod: Pod) -> tuple[int, int]:
        v = state.get(PRE_SCORE_KEY)
        if isinstance(v, tuple) and len(v) == 2:
            return int(v[0]), int(v[1])
        nz = nonzero_requests(pod)
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
        self._sync(snapshot)
        hit = self._scores.pop(pod_nz, None)
        stale = None if hit is None else self._changed_since(hit[0])
        if hit is None or stale is None or len(stale) > 256:
            scores = self._least_allocated(snapshot, pod_nz, None)
            if hit is None and len(self._scores) >= self._scores_limit:
                del self._scores[next(iter(self._scores))]  # the least recently used
        else:
            scores = hit[1]
            if stale:
                patch = self._least_allocated_few(snapshot, pod_nz, stale)
                at = np.asarray(stale, np.int64)
                scores[at] = self._least_allocated(snapshot, pod_nz, at) if patch is None else patch
        self._scores[pod_nz] = (self._tick, scores)
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

    def _changed_since(self, tick: int) -> list[int] | None:
        """The rows re-read after ``tick`` (ascending), None when the log no longer reaches back."""
        if tick == self._tick:
            return []
        log = self._log
        if not log or log[0][0] > tick + 1:
            return None
        changed: set[int] = set()
        for t, rows in reversed(log):
            if t <= tick:
                break
            changed.update(rows)
        return sorted(changed)

    def _least_allocated_few(
        self, snapshot: Snapshot, pod_nz: tuple[int, int], rows: list[int]
    ) -> list[int] | None:
        """``_least_allocated`` of a few rows in Python integers; None when a node's non-zero sum, the
        pod's or an allocatable is not within ±2^53, where the int64 arithmetic could wrap. Within it
        no int64 intermediate wraps, so both give the same integers: ``|req| < 2^54``,
        ``|cap - req| < 2^55``, a score's magnitude is at most ``|cap - req| * 100 < 2^62`` and the
        weighted sum (weights 1 + 1) stays below 2^63."""
        jc, jm = (snapshot.col.get(r) for r, _ in SCORE_WEIGHTS)
        zeros = [0] * len(rows)
        caps_c = zeros if jc is None else snapshot.allocatable[rows, jc].tolist()
        caps_m = zeros if jm is None else snapshot.allocatable[rows, jm].tolist()
        pc, pm = pod_nz
        if max(abs(pc), abs(pm)) >= _SAFE:
            return None
        out: list[int] = []
        for (nc, nm), cc, cm in zip(self._nz[rows].tolist(), caps_c, caps_m, strict=True):
            if max(abs(nc), abs(nm), abs(cc), abs(cm)) >= _SAFE:
                return None
            rc, rm = nc + pc, nm + pm
            # least_requested_score, floor division being truncation for the non-negative operands
            sc = (cc - rc) * MAX_NODE_SCORE // cc if cc > 0 and rc <= cc else least_requested_score(rc, cc)
            sm = (cm - rm) * MAX_NODE_SCORE // cm if cm > 0 and rm <= cm else least_requested_score(rm, cm)
            total = sc + sm  # weights 1 and 1 (SCORE_WEIGHTS)
            out.append(total // 2 if total >= 0 else go_div(total, 2))
        return out

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

    def _sync(self, snapshot: Snapshot) -> None:
        """Align the row caches with the snapshot: re-read the rows whose generation moved, or every
        row on a new snapshot or layout."""
        n = snapshot.n
        same = self._snap is not None and self._snap() is snapshot and self._layout == snapshot.layout
        if not same or len(self._gen) != n:
            self._rebuild(snapshot)
            return
        moved = np.not_equal(self._gen, snapshot.generation, out=self._moved)
        if not moved.any():
            return
        rows = np.flatnonzero(moved)
        if len(rows) > _LOG_LENGTH:  # a burst of changes: re-read everything
            self._rebuild(snapshot)
            return
        for i in rows.tolist():
            self._sync_row(snapshot, i)
        self._tick += 1
        self._log.append((self._tick, rows.tolist()))
        if len(self._pod_nz) > self._pod_nz_limit:  # departed pods piled up: prune on the next call
            self._layout = -1

    def _sync_row(self, snapshot: Snapshot, i: int) -> None:
        """Re-read one row in Python integers (``wrap64`` keeps the int64 values numpy computes)."""
        self._gen[i] = snapshot.generation[i]
        self._nz[i] = self._row_nonzero(snapshot, i)
        alloc: list[int] = snapshot.allocatable[i].tolist()
        new = [wrap64(a - r) for a, r in zip(alloc, snapshot.requested[i].tolist(), strict=True)]
        old: list[int] = self._free[:, i].tolist()
        self._free[:, i] = new
        least = self._free_min
        if least is not None:  # a column whose least row grew is re-read, else the least can only drop
            for j, (o, v) in enumerate(zip(old, new, strict=True)):
                if v < least[j]:
                    least[j] = v
                elif o == least[j] and v > o:
                    least[j] = int(self._free[j].min())
        pods = snapshot.col.get("pods")
        many = int(snapshot.pod_count[i]) + 1 > (alloc[pods] if pods is not None else 0)
        if many != bool(self._too_many[i]):
            self._too_many[i] = many
            self._too_many_count += 1 if many else -1

    def _rebuild(self, snapshot: Snapshot) -> None:
        n = snapshot.n
        self._snap = weakref.ref(snapshot)
        self._layout = snapshot.layout
        self._gen = snapshot.generation.copy()
        self._moved = np.zeros(n, np.bool_)
        old, self._pod_nz = self._pod_nz, {}
        for info in (p for node in snapshot.infos for p in node.pods.values()):
            hit = old.get(id(info))
            if hit is not None and hit[0] is info:
                self._pod_nz[id(info)] = hit
        self._nz = np.array([self._row_nonzero(snapshot, i) for i in range(n)], np.int64).reshape(n, 2)
        self._pod_nz_limit = 2 * len(self._pod_nz) + 4096
        self._free = np.ascontiguousarray((snapshot.allocatable - snapshot.requested).T)
        self._free_min = None
        pods = snapshot.col.get("pods")
        allowed = snapshot.allocatable[:, pods] if pods is not None else np.zeros(n, np.int64)
        self._too_many = snapshot.pod_count + 1 > allowed
        self._too_many_count = int(self._too_many.sum())
        self._tick = 0
        self._log.clear()
        self._scores = {}
        self._scores_limit = max(4, min(64, 2_000_000 // max(n, 1)))
