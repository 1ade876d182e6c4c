"""Per-node arrays aligned to the snapshot rows, so Filter and Score of one pod are a handful of numpy
operations over every node, with the per-pod work reduced to one comparison per resource for Filter.

Row state is split by what it depends on. The Node object alone → ``NodeStatic`` (capacity, thresholds,
smallest failing sums), re-derived only when the row's node dict is replaced. The NodeMetric entry and
the assigned-pod sums → the row's columns below, recomputed for the one row whose metric or pods
changed (the assign cache's ``dirty`` set) in O(R) Python, written with three column stores.

Columns (``k`` = 0..R-1):
* ``heads[k]`` / ``heads[R+k]``: for pods judged by node thresholds / Prod pods, the smallest estimate
  that fails resource k (``min_exceeding_sum − existing``, exact integers; ``NEVER`` when the check is
  off): Filter's ``round_half_away(x) > T`` is ``estimate >= head`` (``exact``).
* ``codes``: the FilterResult status index of that rejection.
* ``floats[k]`` / ``floats[R+k]``: ``100 × (capacity − existing)`` for Score (node / Prod usage);
  ``floats[2R+k]``: capacity (``inf`` for 0); ``floats[3R]``, ``[3R+1]``: the expiry instant for the
  Filter modes (NaN: never, the node is not checked); ``floats[3R+2]``: Score's (``-inf``: always 0).
Score's float64 form is exact when capacities, existing usages and the estimate are integers in
``[0, 2**46]``: ``d = 100 × (cap − used)`` is then exact, ``floor(d / cap)`` equals the integer division
because ``d + cap ≤ 101 × 2**46 < 2**53`` (a quotient just below an integer is at least ``1/cap`` below
it, more than half an ulp), negative ``d`` (used > cap) floors below 0 and is clamped, ``x / inf = 0``
gives the capacity-0 rule, and the weighted sums are small integers. Rows outside that range
(``irregular``) and such pods are evaluated by the per-node reference instead.
Imports: the standard library, numpy, scheduler.framework.snapshot, scheduler.plugins.loadaware.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.loadaware.args import LoadAwareSchedulingArgs
from scheduler.plugins.loadaware.assign_cache import AssignCache
from scheduler.plugins.loadaware.bulk import bulk_rows
from scheduler.plugins.loadaware.exact import exceed_bound, expiry_instant
from scheduler.plugins.loadaware.node_static import SCORE_EXACT_LIMIT, NodeStatic, NodeStatics
from scheduler.plugins.loadaware.nodemetric_cache import MetricEntry, NodeMetricCache
from scheduler.plugins.loadaware.percall import Block, EstimateMemo, Idx
from scheduler.plugins.loadaware.reference import NodeSums, existing_usage

I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
F64 = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]

INT64_MIN: Final = -(1 << 63)
NEVER: Final = (1 << 63) - 1
_LOG_LIMIT: Final = 1 << 16

__all__ = ["NEVER", "RowTable", "exceed_bound"]


def _head(bound: int | None, existing: int) -> int:
    """The smallest estimate that fails (``bound − existing``) clipped into int64; ``NEVER`` when the
    check is off or no int64 estimate below 2**63−1 can reach it."""
    if bound is None:
        return NEVER
    return min(max(bound - existing, INT64_MIN), NEVER)


def _in_range(values: Sequence[int]) -> bool:
    return all(0 <= v <= SCORE_EXACT_LIMIT for v in values)


class RowTable:
    """The aligned arrays; ``sync`` brings them up to date with a snapshot and the caches."""

    def __init__(
        self,
        args: LoadAwareSchedulingArgs,
        resources: Sequence[str],
        metrics: NodeMetricCache,
        assign: AssignCache,
    ) -> None:
        self.args = args
        self.resources = tuple(resources)
        self.r = len(self.resources)
        self.metrics = metrics
        self.assign = assign
        self.statics = NodeStatics(args, self.resources)
        self.expiration = args.node_metric_expiration_seconds
        agg = args.aggregated if args.aggregated is not None and args.aggregated.score_enabled else None
        self.score_agg = (
            ("", 0) if agg is None else (agg.score_aggregation_type, agg.score_aggregated_duration)
        )
        self.snapshot: Snapshot | None = None
        self.layout = -1
        self._alloc(0)

    def _alloc(self, n: int) -> None:
        r = self.r
        self.n = n
        self.names: list[str] = []
        self.nodes: list[Mapping[str, Any]] = []
        self.irregular: set[int] = set()
        self.row_statics: list[NodeStatic | None] = [None] * n  # whose codes are in each column
        self.gen: I64 = np.full(n, -1, np.int64)
        self.heads: I64 = np.full((2 * r, n), NEVER, np.int64)
        self.codes: I32 = np.zeros((2 * r, n), np.int32)
        self.floats: F64 = np.zeros((3 * r + 3, n), np.float64)
        self._mask: Bools = np.zeros(n, np.bool_)
        self._forget()

    # --- synchronisation --------------------------------------------------------------------------
    def sync(self, snapshot: Snapshot) -> None:
        """Bring the rows up to date with ``snapshot`` (new layout: every row; else rows whose node dict
        was replaced) and with the caches (rows of the assign cache's dirty nodes)."""
        if self.snapshot is not snapshot or self.layout != snapshot.layout or self.n != snapshot.n:
            self._rebuild(snapshot)
            return
        rows: set[int] = set()
        changed = np.flatnonzero(np.not_equal(self.gen, snapshot.generation, out=self._mask))
        if len(changed):
            infos, nodes = snapshot.infos, self.nodes
            self.gen[changed] = snapshot.generation[changed]
            rows.update(i for i in changed.tolist() if infos[i].node is not nodes[i])
        for i in rows:
            self._refresh(snapshot, i)
        self.sync_caches()

    def sync_caches(self) -> None:
        """Refresh the rows of the nodes whose metric or assigned pods changed (same snapshot)."""
        dirty, snapshot = self.assign.dirty, self.snapshot
        if dirty and snapshot is not None:
            index = snapshot.index
            rows = [index[name] for name in dirty if name in index]
            dirty.clear()
            for i in rows:
                self._refresh(snapshot, i)

    def _rebuild(self, snapshot: Snapshot) -> None:
        self._alloc(snapshot.n)
        self.snapshot, self.layout = snapshot, snapshot.layout
        self.names = list(snapshot.names)
        self.nodes = [info.node for info in snapshot.infos]
        self.gen[:] = snapshot.generation
        self.assign.dirty.clear()
        self.statics.forget_others(self.names)
        if not self.n:
            return
        statics = [self.statics.of(name, node) for name, node in zip(self.names, self.nodes, strict=True)]
        entries = [self.metrics.get(name) for name in self.names]
        sums = [self.assign.sums_of(name) for name in self.names]
        self.codes[:] = np.array([st.np_codes + st.pp_codes for st in statics], np.int32).T
        self.row_statics = list(statics)
        special = bulk_rows(self, statics, entries, sums)
        for i in special:
            row_ints, row_floats, regular = self._row(statics[i], entries[i], sums[i])
            self.heads[:, i] = row_ints
            self.floats[:, i] = row_floats
            if not regular:
                self.irregular.add(i)

    def _refresh(self, snapshot: Snapshot, i: int) -> None:
        info = snapshot.infos[i]
        self.nodes[i] = info.node
        st = self.statics.of(info.name, info.node)
        row_ints, row_floats, regular = self._row(
            st, self.metrics.get(info.name), self.assign.sums_of(info.name)
        )
        self.heads[:, i] = row_ints
        if st is not self.row_statics[i]:
            self.codes[:, i] = st.np_codes + st.pp_codes
            self.row_statics[i] = st
        self.floats[:, i] = row_floats
        self.changes.append(i)
        for row, (lo, _) in list(self._soonest.items()):  # still lower bounds, maybe no longer minima
            t = row_floats[row]
            self._soonest[row] = (lo if not t < lo else t, False)
        if len(self.changes) >= _LOG_LIMIT:  # start afresh rather than grow the log
            self._forget()
        if regular:
            self.irregular.discard(i)
        else:
            self.irregular.add(i)

    def _row(
        self, st: NodeStatic, entry: MetricEntry | None, sums: NodeSums
    ) -> tuple[list[int], list[float], bool]:
        """One row's ``heads``, ``floats`` and whether it is regular (see the module docstring)."""
        r = self.r
        never = [NEVER] * (2 * r)
        if entry is None:  # no metric: Filter passes, Score is 0
            return never, [0.0] * (2 * r) + list(st.capacity_f) + [math.nan, math.nan, -math.inf], st.regular
        t = -math.inf if entry.update_time is None else expiry_instant(entry.update_time, self.expiration)
        expiry = [t if st.np_active else math.nan, t if st.pp_active else math.nan]
        if not entry.has_node_metric:  # Filter passes unless expired, Score is 0
            return never, [0.0] * (2 * r) + list(st.capacity_f) + [*expiry, -math.inf], st.regular
        profile = st.profile
        e_np = existing_usage(entry, sums, False, profile.agg_type, profile.agg_duration)
        e_prod = existing_usage(entry, sums, True, "", 0)
        agg = self.score_agg
        same = agg[0] == profile.agg_type and agg[1] == profile.agg_duration
        e_score = e_np if same else existing_usage(entry, sums, False, *agg)
        heads_np = (
            [_head(b, e) for b, e in zip(st.np_bounds, e_np, strict=True)] if st.np_active else [NEVER] * r
        )
        if profile.prod_set:  # a set prod vector has a non-zero value: always checked
            heads_pp = [_head(b, e) for b, e in zip(st.pp_bounds, e_prod, strict=True)]
        else:
            heads_pp = heads_np
        regular = st.regular and _in_range(e_score) and _in_range(e_prod)
        if not regular:
            return heads_np + heads_pp, [0.0] * (2 * r) + list(st.capacity_f) + [*expiry, -math.inf], False
        cap = st.capacity
        free = [float(100 * (c - e)) for c, e in zip(cap, e_score, strict=True)]
        free += [float(100 * (c - e)) for c, e in zip(cap, e_prod, strict=True)]
        return heads_np + heads_pp, free + list(st.capacity_f) + [*expiry, t], True

    # --- per-pod evaluation -----------------------------------------------------------------------
    # Score's results before the expiry rule are kept per estimate (``percall``); ``changes`` logs the
    # rows rewritten since ``_alloc`` so those results are patched rather than recomputed. (Filter's
    # few integer comparisons cost less than such a patch.)
    def _forget(self) -> None:
        self.changes: list[int] = []
        self._memos: dict[Hashable, EstimateMemo] = {}
        self._soonest: dict[int, tuple[float, bool]] = {}  # expiry row → (lower bound, is the minimum)

    def _memo(self, key: Hashable, dtype: type[Any], est_dtype: type[Any], block: Block) -> EstimateMemo:
        memo = self._memos.get(key)
        if memo is None:
            memo = self._memos[key] = EstimateMemo(self.n, dtype, self.r, est_dtype, block)
        return memo

    def _expired(self, row: int, now: float) -> Bools | None:
        """Rows whose expiry instant (``floats[row]``) is reached at ``now`` (into a shared buffer); None
        when there is none (``now`` before a lower bound of the instants, kept in ``_soonest``)."""
        lo, exact = self._soonest.get(row, (-math.inf, False))
        for _ in range(2):
            if now < lo or (now != now and lo > -math.inf):
                return None
            if exact:
                break
            found = np.fmin.reduce(self.floats[row]) if self.n else math.nan  # NaN: never
            lo, exact = (math.inf if found != found else float(found)), True
            self._soonest[row] = (lo, True)
        mask = self._mask
        if now != now:  # NaN: only metrics without updateTime count as expired
            np.equal(self.floats[row], -math.inf, out=mask)
        else:
            np.less_equal(self.floats[row], now, out=mask)
        return mask

    def filter_which(self, est: Sequence[int], prod: bool, now: float) -> I32:
        """FilterResult.which for regular rows: -1 pass, 0 expired, 1 + j (+R for the aggregated
        wording) resource j over. Irregular rows pass here (the plugin evaluates them itself)."""
        r, args = self.r, self.args
        base = r if prod else 0
        which: I32 = np.full(self.n, -1, np.int32)
        mask = self._mask
        for j in range(r - 1, -1, -1):  # the first failing resource wins: write it last
            np.less_equal(self.heads[base + j], min(int(est[j]), NEVER - 1), out=mask)
            np.copyto(which, self.codes[base + j], where=mask)
        if args.filter_expired_node_metrics:
            expired = self._expired(3 * r + (1 if prod else 0), now)
            if expired is not None:
                np.copyto(which, -1 if args.enable_schedule_when_node_metrics_expired else 0, where=expired)
        return which

    @staticmethod
    def exact_pod(est: Sequence[int]) -> bool:
        """Whether Score's float64 form is exact for this estimate."""
        return _in_range(est)

    def _score_block(
        self,
        prod_usage: bool,
        weights: F64 | None,
        weight_sum: int,
        dominant: int,
        ests: F64,
        rows: Idx | None,
    ) -> I64:
        """Score's results without the expiry rule for ``ests`` (K, R) = 100 × estimate and ``rows``.
        Every float below is a non-negative integer or an exact quotient about to be floored (module
        docstring), so truncation by ``astype`` is the floor."""
        r = self.r
        lo = r if prod_usage else 0
        if rows is not None and len(rows) == 1:  # one rewritten row: (R, K) operands, same values
            f1 = self.floats[: 3 * r, int(rows[0])]
            q = np.subtract(f1[lo : lo + r, None], ests.T)[:, :, None]  # (R, K, 1)
            cap = f1[2 * r : 3 * r, None, None]
        else:
            f = self.floats[: 3 * r] if rows is None else self.floats[: 3 * r, rows]
            q = f[lo : lo + r, None, :] - ests.T[:, :, None]  # (R, K, m)
            cap = f[2 * r : 3 * r, None, :]
        np.maximum(q, 0.0, out=q)  # used > cap → 0
        np.divide(q, cap, out=q)
        np.floor(q, out=q)  # leastUsed per resource, integers in [0, 100]
        # sums of small integers: exact in any order
        out = np.add.reduce(q, axis=0) if weights is None else np.tensordot(weights, q, axes=1)
        total = weight_sum
        if dominant > 0:
            least = np.minimum.reduce(q, axis=0)
            least *= float(dominant)
            out += least
            total += dominant
        if total != 1:
            out /= float(total)
        result: I64 = out.astype(np.int64)
        return result

    def scores(
        self,
        est: Sequence[int],
        prod_usage: bool,
        now: float,
        weights: F64 | None,
        weight_sum: int,
        dominant: int,
    ) -> I64:
        """Scores of the regular rows (0 where the metric is missing, expired or has no nodeMetric);
        requires ``exact_pod(est)``; ``weights`` None means every weight is 1 (R ≥ 2)."""
        config = (prod_usage, None if weights is None else weights.tobytes(), weight_sum, dominant)
        memo = self._memo(
            ("score", config),
            np.int64,
            np.float64,
            lambda ests, rows: self._score_block(prod_usage, weights, weight_sum, dominant, ests, rows),
        )
        key = tuple([int(e) for e in est])
        out: I64 = memo.get(key, [100.0 * e for e in est], self.changes).copy()
        expired = self._expired(3 * self.r + 2, now)
        if expired is not None:
            np.copyto(out, 0, where=expired)
        return out
