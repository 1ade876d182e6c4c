"""Per-node arrays aligned to the snapshot rows, so Filter and Score of one pod are a handful of numpy
operations over every node. Rows are re-derived from the sources (Node object → profile and capacity,
NodeMetric entry, assigned-pod sums) only when the snapshot layout changes (all rows), when a row's
NodeInfo generation changes, or when its NodeMetric/assigned pods changed (the assign cache's dirty set).

Filter's ``round_half_away(x) > T`` (x = estimated / capacity × 100 in float64, Go's order) is evaluated
as ``x >= b`` with ``b = T + 0.5`` for T ≥ 0 and the next double above ``T + 0.5`` for T < 0, which is
exact for every double x; disabled thresholds (0, or capacity 0) get ``b = +inf``.
Imports: numpy, scheduler.framework.snapshot, scheduler.plugins.loadaware (args, profile,
nodemetric_cache, assign_cache, reference).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.loadaware.args import LoadAwareSchedulingArgs
from scheduler.plugins.loadaware.assign_cache import AssignCache
from scheduler.plugins.loadaware.nodemetric_cache import NodeMetricCache
from scheduler.plugins.loadaware.profile import Vector, node_capacity, node_profile
from scheduler.plugins.loadaware.reference import existing_usage

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]


def exceed_bound(threshold: int, capacity: int) -> float:
    """The smallest double x with ``round_half_away(x) > threshold`` (inf when the check is off)."""
    if threshold == 0 or capacity == 0:
        return math.inf
    b = threshold + 0.5
    return b if threshold >= 0 else math.nextafter(b, math.inf)


class RowTable:
    """The aligned arrays (n rows × R resources)."""

    def __init__(
        self,
        args: LoadAwareSchedulingArgs,
        resources: Sequence[str],
        metrics: NodeMetricCache,
        assign: AssignCache,
    ) -> None:
        self.args = args
        self.resources = tuple(resources)
        self.metrics = metrics
        self.assign = assign
        self.layout = -1
        self.snapshot_id = 0
        score_agg = args.aggregated if args.aggregated is not None and args.aggregated.score_enabled else None
        self.score_agg = (
            ("", 0)
            if score_agg is None
            else (
                score_agg.score_aggregation_type,
                score_agg.score_aggregated_duration,
            )
        )
        self._alloc(0)

    def _alloc(self, n: int) -> None:
        r = len(self.resources)
        self.n = n
        self.names: list[str] = []
        self.gen: I64 = np.full(n, -1, np.int64)
        self.cap: I64 = np.zeros((n, r), np.int64)
        self.capf: F64 = np.ones((n, r), np.float64)
        self.cap_safe: I64 = np.ones((n, r), np.int64)
        self.cap_zero: Bools = np.zeros((n, r), np.bool_)
        self.bound_np: F64 = np.full((n, r), np.inf)
        self.bound_prod: F64 = np.full((n, r), np.inf)
        self.np_active: Bools = np.zeros(n, np.bool_)
        self.prod_active: Bools = np.zeros(n, np.bool_)
        self.prod_set: Bools = np.zeros(n, np.bool_)
        self.agg_offset: npt.NDArray[np.int32] = np.zeros(n, np.int32)
        self.has_metric: Bools = np.zeros(n, np.bool_)
        self.has_ut: Bools = np.zeros(n, np.bool_)
        self.ut: F64 = np.zeros(n, np.float64)
        self.nm_ok: Bools = np.zeros(n, np.bool_)
        self.e_prod: I64 = np.zeros((n, r), np.int64)
        self.e_filter: I64 = np.zeros((n, r), np.int64)
        self.e_score: I64 = np.zeros((n, r), np.int64)

    # --- synchronisation --------------------------------------------------------------------------
    def sync(self, snapshot: Snapshot) -> None:
        """Bring the rows up to date with ``snapshot`` and the caches."""
        if self.layout != snapshot.layout or self.snapshot_id != id(snapshot) or self.n != snapshot.n:
            self._alloc(snapshot.n)
            self.names = list(snapshot.names)
            self.layout, self.snapshot_id = snapshot.layout, id(snapshot)
            self.assign.dirty.clear()
            for i in range(self.n):
                self.fill_row(snapshot, i)
            return
        rows = set(np.flatnonzero(self.gen != snapshot.generation).tolist())
        if self.assign.dirty:
            index = snapshot.index
            rows.update(index[name] for name in self.assign.dirty if name in index)
            self.assign.dirty.clear()
        for i in rows:
            self.fill_row(snapshot, i)

    def fill_row(self, snapshot: Snapshot, i: int) -> None:
        """Re-derive row ``i`` from its Node object, NodeMetric entry and assigned-pod sums."""
        info = snapshot.infos[i]
        resources = self.resources
        self.gen[i] = snapshot.generation[i]
        capacity = node_capacity(resources, info.node)
        profile = node_profile(self.args, resources, info.node)
        self.cap[i] = capacity
        self.cap_zero[i] = [v == 0 for v in capacity]
        self.capf[i] = [float(v) if v != 0 else 1.0 for v in capacity]
        self.cap_safe[i] = [v if v != 0 else 1 for v in capacity]
        np_thresholds: Vector = profile.aggregated if profile.aggregated is not None else profile.usage
        self.bound_np[i] = [exceed_bound(t, v) for t, v in zip(np_thresholds, capacity, strict=True)]
        self.bound_prod[i] = [exceed_bound(t, v) for t, v in zip(profile.prod, capacity, strict=True)]
        self.np_active[i] = any(t != 0 for t in np_thresholds)
        self.prod_active[i] = any(t != 0 for t in profile.prod)
        self.prod_set[i] = profile.prod_set
        self.agg_offset[i] = len(resources) if profile.aggregated is not None else 0
        entry = self.metrics.get(info.name)
        self.has_metric[i] = entry is not None
        if entry is None:
            self.has_ut[i], self.ut[i], self.nm_ok[i] = False, 0.0, False
            self.e_prod[i] = self.e_filter[i] = self.e_score[i] = 0
            return
        self.has_ut[i] = entry.update_time is not None
        self.ut[i] = 0.0 if entry.update_time is None else entry.update_time
        self.nm_ok[i] = entry.has_node_metric
        sums = self.assign.sums_of(info.name)
        if not entry.has_node_metric:
            self.e_prod[i] = self.e_filter[i] = self.e_score[i] = 0
            return
        self.e_prod[i] = existing_usage(entry, sums, True, "", 0)
        self.e_filter[i] = existing_usage(entry, sums, False, profile.agg_type, profile.agg_duration)
        self.e_score[i] = existing_usage(entry, sums, False, *self.score_agg)

    # --- per-pod evaluation -----------------------------------------------------------------------
    def expired(self, now: float) -> Bools:
        """Rows whose NodeMetric exists and is expired at ``now``."""
        with np.errstate(invalid="ignore"):
            late: Bools = (now - self.ut) >= float(self.args.node_metric_expiration_seconds)
        return self.has_metric & (~self.has_ut | late)

    def filter_which(self, est: I64, prod: bool, now: float) -> npt.NDArray[np.int32]:
        """FilterResult.which: -1 pass, 0 expired, 1 + j (+R for aggregated wording) resource j over."""
        args = self.args
        if prod and bool(self.prod_set.any()):
            use = self.prod_set
            col = use[:, None]
            bound = np.where(col, self.bound_prod, self.bound_np)
            existing = np.where(col, self.e_prod, self.e_filter)
            active = np.where(use, self.prod_active, self.np_active)
            agg_offset = np.where(use, 0, self.agg_offset).astype(np.int32)
        else:
            bound, existing = self.bound_np, self.e_filter
            active, agg_offset = self.np_active, self.agg_offset
        gate = active & self.has_metric
        if args.filter_expired_node_metrics:
            expired = gate & self.expired(now)
            check = gate & ~expired & self.nm_ok
            fail_expired = None if args.enable_schedule_when_node_metrics_expired else expired
        else:
            check, fail_expired = gate & self.nm_ok, None
        x = (existing + est).astype(np.float64)
        x /= self.capf
        x *= 100.0
        exceed = x >= bound
        fail = exceed.any(axis=1)
        fail &= check
        first = exceed.argmax(axis=1).astype(np.int32)
        first += 1
        first += agg_offset
        otherwise = np.int32(-1) if fail_expired is None else np.where(fail_expired, 0, -1).astype(np.int32)
        return np.where(fail, first, otherwise).astype(np.int32)

    def scores(self, est: I64, prod: bool, now: float, weights: I64, weight_sum: int) -> I64:
        """Scores of every row (0 where the NodeMetric is missing, expired or has no nodeMetric)."""
        args = self.args
        existing = self.e_prod if (prod and args.score_according_prod_usage) else self.e_score
        used = existing + est
        least = self.cap - used
        least *= 100
        least //= self.cap_safe
        least[(used > self.cap) | self.cap_zero] = 0
        node_score: I64 = least @ weights
        total = weight_sum
        dominant_weight = args.dominant_resource_weight
        if dominant_weight > 0:
            dominant = np.minimum(least.min(axis=1, initial=100), 100)
            node_score += dominant * dominant_weight
            total += dominant_weight
        valid = self.has_metric & self.nm_ok & ~self.expired(now)
        if total <= 0:
            return np.zeros(self.n, np.int64)
        out: I64 = np.where(valid, node_score // total, 0)
        return out
