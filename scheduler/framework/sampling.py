"""Sampling nodes (docs/architecture.md#sampling-nodes): kube-scheduler's `percentageOfNodesToScore`.
With a limit of k feasible nodes below the node count, Filter walks the rows in rotation order from a
start the framework advances pod after pod, stops at the k-th feasible row, and only those k rows are
scored, as kube-scheduler 1.20's `findNodesThatPassFilters` does (sequentially here, so the rows
processed are exactly those up to and including the k-th feasible one).

Vectorised filters still run over every row (a numpy pass costs less than choosing rows); per-node
filters and the nominated-pods check run row by row in rotation order and stop with the k-th feasible
row. A processed row's status is that of the first rejecting plugin in profile order, as in a full
pass; rows past the last processed one get none (kube's statuses hold only processed nodes).
Imports: standard library, numpy, scheduler.framework (interfaces, snapshot, status, cycle_state).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol, cast

import numpy as np
import numpy.typing as npt

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterAllPlugin, FilterPlugin, IntArray, Pod
from scheduler.framework.results import record_rejections
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status

# kube-scheduler 1.20's constants (pkg/scheduler/core/generic_scheduler.go).
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
BASE_PERCENTAGE_OF_NODES_TO_SCORE = 50
_ADAPTIVE_STEP = 125  # the adaptive percentage drops by one every 125 nodes


def _int32(v: int) -> int:
    """Go's int32 wrap-around."""
    return (v + 2**31) % 2**32 - 2**31


def _quo(a: int, b: int) -> int:
    """Go's integer division: truncates toward zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def num_feasible_nodes_to_find(num_all_nodes: int, percentage: int) -> int:
    """kube's `numFeasibleNodesToFind` in int32 arithmetic: every node below 100 nodes or at 100 %;
    percentage 0 is adaptive (50 % minus one per 125 nodes, at least 5 %); never fewer than 100."""
    n, pct = _int32(num_all_nodes), _int32(percentage)
    if n < MIN_FEASIBLE_NODES_TO_FIND or pct >= 100:
        return n
    if pct <= 0:
        pct = _int32(BASE_PERCENTAGE_OF_NODES_TO_SCORE - _quo(n, _ADAPTIVE_STEP))
        pct = max(pct, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    found = _quo(_int32(n * pct), 100)
    return max(found, MIN_FEASIBLE_NODES_TO_FIND)


class NominatedCheck(Protocol):
    """The nominated pods' part of kube's `PodPassesFiltersOnNode` for one pod: `rows` hold a relevant
    nominated pod; `check(i)` is row i's status with them added, None when that passes."""

    @property
    def rows(self) -> Collection[int]: ...

    def check(self, i: int) -> Status | None: ...


@dataclass(slots=True)
class Window:
    """One windowed Filter pass: the feasible rows found (ascending), each row's status as an index
    into `statuses` (-1: feasible, or not processed), and how many rows were processed."""

    feasible: IntArray
    which: npt.NDArray[np.int32]
    statuses: list[Status]
    processed: int


def _rotated(a: npt.NDArray[np.bool_], start: int) -> npt.NDArray[np.bool_]:
    """`a` in rotation order from `start`."""
    return np.concatenate((a[start:], a[:start])) if start else a


def _positions(n: int, start: int, rows: IntArray) -> IntArray:
    """Each row's position in rotation order from `start`."""
    return (rows - start) % n


def filter_window(
    filters: Sequence[FilterPlugin | FilterAllPlugin],
    vectorised: Sequence[FilterAllPlugin | None],
    observer: Callable[[str, str, float], None] | None,
    state: CycleState,
    pod: Pod,
    snapshot: Snapshot,
    k: int,
    start: int,
    nominated: NominatedCheck | None = None,
) -> Window:
    """The filters until `k` feasible rows are found, from row `start` on in rotation order."""
    n, count = snapshot.n, len(filters)
    per_node = [(pos, p) for pos, (p, v) in enumerate(zip(filters, vectorised, strict=True)) if v is None]
    rejected_by = np.full(n, -1, np.int32)
    first_at = np.full(n, count, np.int32) if per_node else None  # profile position of the first
    found: list[Status] = []  # vectorised rejection: per-node plugins before it still run
    position: list[int] = []  # per status in `found`: its plugin's position in the profile
    for pos, (p, v) in enumerate(zip(filters, vectorised, strict=True)):
        if v is None:
            continue
        t0 = time.perf_counter()
        res = v.filter_all(state, pod, snapshot)
        if observer is not None:
            observer(p.name, "Filter", time.perf_counter() - t0)
        record_rejections(res, p.name, rejected_by, found)
        position.extend([pos] * (len(found) - len(position)))
    if first_at is not None and found:
        rejected = rejected_by >= 0
        first_at[rejected] = np.array(position, np.int32).take(rejected_by[rejected])
    checked: dict[int, Status | None] = {}
    if first_at is None:
        feasible, processed = _vectorised_window(rejected_by < 0, k, start, nominated, checked)
    else:
        walk = _RowWalk(per_node, count, observer, state, pod, snapshot, rejected_by, found)
        feasible, processed = walk.run(first_at, k, start, nominated, checked)
    if nominated is not None:
        _nominated_statuses(nominated, checked, n, start, processed, rejected_by, found)
    if processed < n:  # rows not processed get no status
        a, left = (start + processed) % n, n - processed
        rejected_by[a : a + left] = -1
        rejected_by[: max(0, a + left - n)] = -1
    return Window(np.sort(feasible), rejected_by, found, processed)


def _vectorised_window(
    passed: npt.NDArray[np.bool_],
    k: int,
    start: int,
    nominated: NominatedCheck | None,
    checked: dict[int, Status | None],
) -> tuple[IntArray, int]:
    """Every filter vectorised: the k-th feasible row in rotation order by numpy; a feasible row
    holding nominated pods is checked with them before it counts (then the window moves on)."""
    n = len(passed)
    while True:
        at = np.flatnonzero(_rotated(passed, start))
        processed = int(at[k - 1]) + 1 if len(at) >= k else n
        if nominated is None:
            break
        pending = [
            i for i in nominated.rows if i not in checked and passed[i] and (i - start) % n < processed
        ]
        if not pending:
            break
        for i in pending:
            st = checked[i] = nominated.check(i)
            if st is not None:
                passed[i] = False
    return (at[:k] + start) % n, processed


class _RowWalk:
    """Rows in rotation order through the per-node filters (each only where no earlier plugin in
    profile order rejected the row), until k rows pass."""

    def __init__(
        self,
        per_node: list[tuple[int, FilterPlugin | FilterAllPlugin]],
        count: int,
        observer: Callable[[str, str, float], None] | None,
        state: CycleState,
        pod: Pod,
        snapshot: Snapshot,
        rejected_by: npt.NDArray[np.int32],
        found: list[Status],
    ) -> None:
        self.per_node = [(pos, cast(FilterPlugin, p)) for pos, p in per_node]
        self.count, self.observer = count, observer
        self.state, self.pod, self.snapshot = state, pod, snapshot
        self.rejected_by, self.found = rejected_by, found
        self.index: dict[tuple[int, Status], int] = {}

    def _reject(self, i: int, pos: int, st: Status, name: str) -> None:
        at = self.index.get((pos, st))
        if at is None:
            at = self.index[pos, st] = len(self.found)
            self.found.append(st.with_plugin(name))
        self.rejected_by[i] = at

    def run(
        self,
        first_at: npt.NDArray[np.int32],
        k: int,
        start: int,
        nominated: NominatedCheck | None,
        checked: dict[int, Status | None],
    ) -> tuple[IntArray, int]:
        n, count = self.snapshot.n, self.count
        state, pod, snapshot = self.state, self.pod, self.snapshot
        # Rows a vectorised plugin rejects before the first per-node one are settled already.
        need = (np.flatnonzero(_rotated(first_at > self.per_node[0][0], start)) + start) % n
        spent = [0.0] * len(self.per_node)
        timed = self.observer is not None
        nominated_rows = nominated.rows if nominated is not None else ()
        feasible: list[int] = []
        last = -1
        for i in need.tolist():
            fa = int(first_at[i])
            passed = True
            for j, (pos, p) in enumerate(self.per_node):
                if pos >= fa:
                    break
                t0 = time.perf_counter() if timed else 0.0
                st = p.filter(state, pod, snapshot, i)
                if timed:
                    spent[j] += time.perf_counter() - t0
                if not st.is_success():
                    self._reject(i, pos, st, p.name)
                    passed = False
                    break
            if not passed or fa < count:
                continue
            if i in nominated_rows:
                assert nominated is not None
                st_nom = checked[i] = nominated.check(i)
                if st_nom is not None:
                    continue  # its status: _nominated_statuses
            feasible.append(i)
            if len(feasible) == k:
                last = i
                break
        if self.observer is not None:
            for (_, p), seconds in zip(self.per_node, spent, strict=True):
                self.observer(p.name, "Filter", seconds)
        processed = n if last < 0 else int(_positions(n, start, np.array([last]))[0]) + 1
        return np.array(feasible, np.int64), processed


def _nominated_statuses(
    nominated: NominatedCheck,
    checked: dict[int, Status | None],
    n: int,
    start: int,
    processed: int,
    rejected_by: npt.NDArray[np.int32],
    found: list[Status],
) -> None:
    """A processed row holding nominated pods that fails with them gets that status (kube's first
    pass decides), whatever the filters alone said."""
    for i in nominated.rows:
        if (i - start) % n >= processed:
            continue
        st = checked[i] if i in checked else nominated.check(i)
        if st is not None:
            rejected_by[i] = len(found)
            found.append(st)
