"""What evicting lower-priority pods could free on every node at once
(docs/rules/scheduler-preemption.md#pruning): a snapshot view holding, per resource column (plus one row
for the pod count), a ``(levels, nodes)`` int64 array of the requests (``PodInfo.requests``, what
``NodeInfo.requested`` and so NodeResourcesFit count) of each node's pods grouped by priority level.
`FreeableView.freeable(p)` sums the levels below ``p``: one numpy reduction over all nodes.

Levels are the distinct pod priorities, sorted, while there are at most `max_levels` of them; beyond
that a level is a bucket ``[bound, next bound)`` that may hold several priorities (an *inexact*
level). A query counts every level whose bound is below ``p``, so where the bucket holding ``p`` is
inexact it over-counts: `freeable` is then an upper bound, never less than the truth, which is all
pruning needs (a node is dropped only when even the upper bound cannot make room). A new priority gets
its own level when there is room and the level it falls in holds one priority only (its pods then stay
where they are); otherwise it joins that level, which becomes inexact. A rebuild (new rows or
columns) chooses the levels afresh.

The snapshot tells a view which rows changed, not which pods: each row keeps the ids of the PodInfos
it counted, a refresh compares them with the row's pods (dict and set operations in C, over the pods
of the changed rows only) and applies the difference: O(1) item updates per pod added or removed.
Nodes joining or leaving in place (``resize``) move the rows' sums (``RowChange.array``: in place) and
keep the levels: a removed node's pods leave as if deleted one by one (a level may be left empty, or
marked inexact with one priority left: still an upper bound, as after any refresh); a new node's pods
come by `refresh`.
Imports: standard library, numpy, scheduler.framework.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import Final

import numpy as np

from scheduler.framework.nominated import priority
from scheduler.framework.rows import RowChange
from scheduler.framework.snapshot import I64, PodInfo, Snapshot

MAX_LEVELS: Final = 32
VIEW_KEY: Final = ("DefaultPreemption", "freeable")


class FreeableView:
    """A `RowView` (scheduler.framework.snapshot): per node, the requests of its pods by priority level."""

    reads_pods = True

    def __init__(self, max_levels: int = MAX_LEVELS) -> None:
        if max_levels < 1:
            raise ValueError(f"FreeableView: max_levels={max_levels}: must be at least 1")
        self.max_levels = max_levels
        self.bounds: list[int] = []  # each level's lowest priority, ascending
        self.exact: list[bool] = []  # whether the level holds pods of priority == its bound only
        self.col: dict[str, int] = {}
        self.count_row = 0  # the row of `sums` holding pod counts (after the resource columns)
        self.sums: I64 = np.zeros((1, 0, 0), np.int64)  # (resources + 1, levels, nodes)
        # per node: pod key -> (the PodInfo counted, its priority); and id(PodInfo) by key to diff fast
        self._counted: list[dict[str, tuple[PodInfo, int]]] = []
        self._ids: list[dict[str, int]] = []
        self.version = 0
        self._memo: tuple[int, int, I64] | None = None

    # -- RowView -------------------------------------------------------------------------------------
    def rebuild(self, snapshot: Snapshot) -> None:
        n = snapshot.n
        self.col = dict(snapshot.col)
        self.count_row = len(snapshot.resources)
        found = [[(pi, priority(pi.pod)) for pi in info.pods.values()] for info in snapshot.infos]
        distinct = sorted({q for pods in found for _, q in pods})
        if len(distinct) <= self.max_levels:
            self.bounds, self.exact = distinct, [True] * len(distinct)
        else:  # evenly spaced over the distinct priorities; a level is exact if it got only its bound
            step = len(distinct) / self.max_levels
            picks = sorted({int(k * step) for k in range(self.max_levels)})
            self.bounds = [distinct[k] for k in picks]
            self.exact = [b - a == 1 for a, b in zip(picks, [*picks[1:], len(distinct)], strict=True)]
        self.sums = np.zeros((self.count_row + 1, len(self.bounds), n), np.int64)
        self._counted = [{} for _ in range(n)]
        self._ids = [{} for _ in range(n)]
        for i, pods in enumerate(found):
            for pi, q in pods:
                self._add(i, pi, q)
        self._changed()

    def refresh(self, snapshot: Snapshot, rows: Sequence[int]) -> None:
        for i in rows:
            pods = snapshot.infos[i].pods
            ids = dict(zip(pods.keys(), map(id, pods.values()), strict=True))
            old = self._ids[i]
            if ids == old:
                continue
            counted = self._counted[i]
            for key, _ in old.items() - ids.items():
                pi, q = counted.pop(key)
                self._apply(i, pi, self._level_of(q), -1)
            for key, _ in ids.items() - old.items():
                pi = pods[key]
                self._add(i, pi, priority(pi.pod))
            self._ids[i] = ids
        self._changed()

    def resize(self, snapshot: Snapshot, change: RowChange) -> None:
        self.sums = change.array(self.sums, 0)
        change.list(self._counted)
        change.list(self._ids)
        for i in change.added:
            self._counted[i], self._ids[i] = {}, {}
        self._changed()

    # -- queries -------------------------------------------------------------------------------------
    def levels_below(self, p: int) -> int:
        """How many levels a query for priority `p` sums (those whose bound is below `p`)."""
        return bisect_left(self.bounds, p)

    def freeable(self, p: int) -> I64:
        """``(resources + 1, nodes)``: per resource column (then the pod count) the requests of every
        node's pods with priority below `p` — an upper bound when the level holding `p` is inexact."""
        k = self.levels_below(p)
        memo = self._memo
        if memo is not None and memo[0] == self.version and memo[1] == k:
            return memo[2]
        sums = self.sums
        out: I64 = sums[:, :k, :].sum(axis=1) if k else np.zeros((sums.shape[0], sums.shape[2]), np.int64)
        self._memo = (self.version, k, out)
        return out

    def is_exact(self, p: int) -> bool:
        """Whether `freeable(p)` is exact (not only an upper bound)."""
        k = self.levels_below(p)
        return k == 0 or self.exact[k - 1] or (k < len(self.bounds) and self.bounds[k] == p)

    # -- updates -------------------------------------------------------------------------------------
    def _changed(self) -> None:
        self.version += 1
        self._memo = None

    def _level_of(self, q: int) -> int:
        """The level a counted pod of priority `q` is in (bounds only split exact levels, so a pod
        never changes level but by an insertion below it)."""
        return max(bisect_right(self.bounds, q) - 1, 0)

    def _add(self, i: int, pi: PodInfo, q: int) -> None:
        self._counted[i][pi.key] = (pi, q)
        self._ids[i][pi.key] = id(pi)
        self._apply(i, pi, self._level_for(q), 1)

    def _level_for(self, q: int) -> int:
        """The level a new pod of priority `q` goes to; makes one when that keeps levels exact."""
        bounds = self.bounds
        j = bisect_right(bounds, q) - 1
        if j >= 0 and bounds[j] == q:
            return j
        if len(bounds) < self.max_levels and (j < 0 or self.exact[j]):
            bounds.insert(j + 1, q)
            self.exact.insert(j + 1, True)
            self.sums = np.insert(self.sums, j + 1, 0, axis=1)
            return j + 1
        if j < 0:  # below every level with no room left: the lowest level reaches down to q
            bounds[0] = q
            j = 0
        self.exact[j] = False
        return j

    def _apply(self, i: int, pi: PodInfo, level: int, sign: int) -> None:
        sums, col = self.sums, self.col
        for r, v in pi.requests.items():
            sums[col[r], level, i] += sign * v
        sums[self.count_row, level, i] += sign
