"""LoadAwareScheduling's per-node inputs as arrays aligned to the snapshot rows (a ``Snapshot.view``):
what Filter and Score read of each node, derived once per change so that one pod's evaluation is a
handful of numpy operations (scheduler.plugins.loadaware.rules).

A row's inputs (``Row``) come from the Node object (capacity, threshold profile: re-derived only when
the row's node dict is replaced) and from the plugin's caches (the NodeMetric entry and the assigned-pod
sums: re-derived when the snapshot re-copies the row or the assign cache marks the node dirty). The
thresholds and existing usage a pod reads depend only on whether it is a Prod pod, so both variants
are kept (index 0: other pods, 1: Prod pods). ``Block`` holds the arrays; values are exact int64 when
every value of a row has magnitude at most ``EXACT_LIMIT`` and capacities are non-negative (then
numpy's int64 sums and float64 conversions equal Go's and Python's), and such rows are all but a few;
the others (``big``) are evaluated from a Python-int ``Block`` of just those rows, by the same rules.
Imports: the standard library, numpy, scheduler.framework.snapshot, scheduler.plugins.loadaware.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.loadaware.args import LoadAwareSchedulingArgs
from scheduler.plugins.loadaware.assign_cache import AssignCache
from scheduler.plugins.loadaware.nodemetric_cache import NodeMetricCache
from scheduler.plugins.loadaware.profile import ThresholdProfile, Vector, node_capacity, node_profile
from scheduler.plugins.loadaware.usage import existing_usage

#: Largest magnitude kept in the int64 block: sums of two stay exact, ``(cap − used) × 100`` cannot
#: overflow, and float64 holds every value (thresholds compare exactly).
EXACT_LIMIT: Final = 1 << 53


@dataclass(frozen=True, slots=True)
class Row:
    """One node's inputs, in resource-vector order; ``*2`` fields are (other pods, Prod pods)."""

    capacity: Vector
    thresholds2: tuple[Vector, Vector]
    aggregated2: tuple[bool, bool]  # the thresholds are the aggregated ones (reason wording)
    existing2: tuple[Vector, Vector]  # Filter's existing usage
    score_usage: Vector  # Score's existing usage (node or aggregated, per the args)
    prod_usage: Vector  # Score's existing usage for Prod pods with scoreAccordingProdUsage
    has_entry: bool
    has_node_metric: bool
    update_time: float  # NaN: unset

    def exact(self) -> bool:
        """Every value in the int64 block's range (a negative capacity, which no sane node reports,
        could make Score's weighted sums overflow: it takes the Python-int path too)."""
        if any(v < 0 for v in self.capacity):
            return False
        values = (*self.capacity, *self.score_usage, *self.prod_usage)
        values += (*self.thresholds2[0], *self.thresholds2[1], *self.existing2[0], *self.existing2[1])
        return all(-EXACT_LIMIT <= v <= EXACT_LIMIT for v in values)


def _clip(v: Vector) -> Vector:
    return tuple(max(-EXACT_LIMIT, min(EXACT_LIMIT, e)) for e in v)


class Block:
    """The rows' arrays: ``(n, R)`` vectors and ``(n,)`` flags. ``dtype`` int64: a big row's vectors
    are clipped into range only so that they fit (they are never read from here); object: Python ints."""

    def __init__(self, rows: Sequence[Row], r: int, dtype: type[Any]) -> None:
        n = len(rows)
        self.n, self.r = n, r
        fits = [True] * n if dtype is object else [x.exact() for x in rows]

        def mat(get: Callable[[Row], Vector]) -> npt.NDArray[Any]:
            values = [get(x) if ok else _clip(get(x)) for x, ok in zip(rows, fits, strict=True)]
            if dtype is object:
                out = np.empty((n, r), object)
                for i, v in enumerate(values):
                    out[i] = v
                return out
            return np.array(values, np.int64).reshape(n, r)

        self.capacity = mat(lambda x: x.capacity)
        self.thresholds = [mat(lambda x, k=k: x.thresholds2[k]) for k in (0, 1)]  # type: ignore[misc]
        self.aggregated = [np.array([x.aggregated2[k] for x in rows], np.bool_).reshape(n) for k in (0, 1)]
        self.existing = [mat(lambda x, k=k: x.existing2[k]) for k in (0, 1)]  # type: ignore[misc]
        self.score_usage = mat(lambda x: x.score_usage)
        self.prod_usage = mat(lambda x: x.prod_usage)
        self.has_entry = np.array([x.has_entry for x in rows], np.bool_).reshape(n)
        self.has_node_metric = np.array([x.has_node_metric for x in rows], np.bool_).reshape(n)
        self.update_time = np.array([x.update_time for x in rows], np.float64).reshape(n)

    def write(self, i: int, x: Row) -> None:
        """Row ``i`` of an int64 block."""
        fit = (lambda v: v) if x.exact() else _clip
        self.capacity[i] = fit(x.capacity)
        for k in (0, 1):
            self.thresholds[k][i] = fit(x.thresholds2[k])
            self.aggregated[k][i] = x.aggregated2[k]
            self.existing[k][i] = fit(x.existing2[k])
        self.score_usage[i] = fit(x.score_usage)
        self.prod_usage[i] = fit(x.prod_usage)
        self.has_entry[i] = x.has_entry
        self.has_node_metric[i] = x.has_node_metric
        self.update_time[i] = x.update_time


class LoadRows:
    """The view: ``rows`` (Python), ``block`` (int64 arrays of every row) and ``big`` (rows outside
    the exact range, ascending)."""

    def __init__(self, args: LoadAwareSchedulingArgs, resources: Sequence[str], metrics: NodeMetricCache,
                 assign: AssignCache) -> None:  # fmt: skip
        self.args = args
        self.resources = tuple(resources)
        self.metrics = metrics
        self.assign = assign
        agg = args.aggregated if args.aggregated is not None and args.aggregated.score_enabled else None
        self.score_agg = (
            ("", 0) if agg is None else (agg.score_aggregation_type, agg.score_aggregated_duration)
        )
        self.names: list[str] = []
        self.rows: list[Row] = []
        self.block = Block([], len(self.resources), np.int64)
        self.big: list[int] = []
        # per row: the node dict its Node-derived part was derived from (the scheduler cache replaces
        # node dicts, never mutates them), with that part
        self._static: list[tuple[Mapping[str, Any], Vector, ThresholdProfile] | None] = []

    def _node_static(self, i: int, node: Mapping[str, Any]) -> tuple[Vector, ThresholdProfile]:
        known = self._static[i]
        if known is not None and known[0] is node:
            return known[1], known[2]
        capacity = node_capacity(self.resources, node)
        profile = node_profile(self.args, self.resources, node)
        self._static[i] = (node, capacity, profile)
        return capacity, profile

    def _row(self, i: int, name: str, node: Mapping[str, Any]) -> Row:
        capacity, profile = self._node_static(i, node)
        entry = self.metrics.get(name)
        other = profile.aggregated if profile.aggregated is not None else profile.usage
        prod = profile.prod if profile.prod_set else other
        agg2 = (profile.aggregated is not None, profile.aggregated is not None and not profile.prod_set)
        zero = (0,) * len(self.resources)
        if entry is None or not entry.has_node_metric:
            update_time = math.nan if entry is None or entry.update_time is None else entry.update_time
            return Row(capacity, (other, prod), agg2, (zero, zero), zero, zero, entry is not None, False,
                       update_time)  # fmt: skip
        sums = self.assign.sums_of(name)
        e_other = existing_usage(entry, sums, False, profile.agg_type, profile.agg_duration)
        e_prod = existing_usage(entry, sums, True, "", 0)
        e_score = existing_usage(entry, sums, False, *self.score_agg)
        update_time = math.nan if entry.update_time is None else entry.update_time
        return Row(capacity, (other, prod), agg2, (e_other, e_prod if profile.prod_set else e_other), e_score,
                   e_prod, True, True, update_time)  # fmt: skip

    # --- RowView ----------------------------------------------------------------------------------
    def rebuild(self, snapshot: Snapshot) -> None:
        old = dict(zip(self.names, self._static, strict=True))
        self.names = list(snapshot.names)
        self._static = [old.get(name) for name in self.names]
        self.rows = [self._row(i, info.name, info.node) for i, info in enumerate(snapshot.infos)]
        self.big = [i for i, x in enumerate(self.rows) if not x.exact()]
        self.block = Block(self.rows, len(self.resources), np.int64)

    def refresh(self, snapshot: Snapshot, rows: Sequence[int]) -> None:
        infos = snapshot.infos
        for i in rows:
            self._set(i, self._row(i, infos[i].name, infos[i].node))

    def refresh_names(self, snapshot: Snapshot, names: Iterable[str]) -> None:
        """Rows of nodes whose metric or assigned pods changed (names not in the snapshot are skipped)."""
        index, infos = snapshot.index, snapshot.infos
        for name in names:
            i = index.get(name)
            if i is not None:
                self._set(i, self._row(i, name, infos[i].node))

    def _set(self, i: int, x: Row) -> None:
        was_big = not self.rows[i].exact()
        self.rows[i] = x
        self.block.write(i, x)
        if was_big != (not x.exact()):
            self.big = [k for k, row in enumerate(self.rows) if not row.exact()]

    def big_block(self, all_rows: bool = False) -> Block:
        """The big rows (or every row) as Python ints, in row order."""
        rows = self.rows if all_rows else [self.rows[i] for i in self.big]
        return Block(rows, len(self.resources), object)
