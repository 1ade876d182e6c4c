"""LoadAwareScheduling's per-node inputs as arrays aligned to the snapshot rows (a ``Snapshot.view``):
what Filter and Score read of each node, derived once per change so that one pod's evaluation is a
handful of numpy operations (scheduler.plugins.loadaware.rules).

A row's inputs (``Row``) come from the Node object (capacity, threshold profile: re-derived only when
the row's node dict is replaced) and from the plugin's caches (the NodeMetric entry and the assigned-pod
sums: re-derived when the snapshot re-copies the row or the assign cache marks the node dirty). The
thresholds and existing usage a pod reads depend only on whether it is a Prod pod, so both variants
are kept (index 0: other pods, 1: Prod pods). ``Block`` holds the arrays. A row is ``exact`` when every
value has magnitude at most ``EXACT_LIMIT`` and capacities and usages are non-negative: then numpy's
int64 sums and float64 conversions equal Go's and Python's, and, for an estimate that is ``exact`` too,
every result is a small integer (a Filter code, a score in [0, 100]) that ``CODE_DTYPE`` holds. Such
rows are all but a few; the others (``big``) are evaluated from a Python-int ``Block`` of just those
rows, by the same rules. Nodes joining or leaving in place (``resize``) move the arrays
(``RowChange.array``, in place) and the rows' lists, O(moved rows); the new rows are derived by the
snapshot's ``refresh``.
Imports: the standard library, numpy, scheduler.framework (snapshot, rows, rowresults),
scheduler.plugins.loadaware.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from scheduler.framework.rowresults import RowResults
from scheduler.framework.rows import RowChange
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.loadaware.args import LoadAwareSchedulingArgs
from scheduler.plugins.loadaware.assign_cache import AssignCache
from scheduler.plugins.loadaware.freshness import Freshness
from scheduler.plugins.loadaware.nodemetric_cache import NodeMetricCache
from scheduler.plugins.loadaware.profile import (
    ThresholdProfile,
    Vector,
    content_key,
    node_capacity,
    node_profile,
)
from scheduler.plugins.loadaware.usage import existing_usage

#: Largest magnitude kept in the int64 block: sums of two stay exact, ``(cap − used) × 100`` cannot
#: overflow, and float64 holds every value (thresholds compare exactly).
EXACT_LIMIT: Final = 1 << 53
#: The rules' results over exact rows for an exact estimate: Filter codes (-1 .. 2R + 1) and scores (0 ..
#: 100), kept per estimate (``RowResults``) in the dtypes the framework reads (FilterResult.which, scores)
#: so that a pod's evaluation hands them over without a copy.
CODE_DTYPE: Final = np.int32
SCORE_DTYPE: Final = np.int64
_CONTENT_LIMIT: Final = 4096


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
    exact: bool = True  # every value fits the int64 block (see ``make_row``)


def exact_estimate(estimate: Iterable[int]) -> bool:
    """An estimate the int64 block evaluates (non-negative, at most ``EXACT_LIMIT``)."""
    return all(0 <= v <= EXACT_LIMIT for v in estimate)


def make_row(*fields: Any) -> Row:
    """A Row with ``exact`` set: every value within ``EXACT_LIMIT``, and no negative capacity or usage
    (which no sane node reports; they could put a score outside [0, 100])."""
    x = Row(*fields)
    counts = (*x.capacity, *x.score_usage, *x.prod_usage, *x.existing2[0], *x.existing2[1])
    limits = (*x.thresholds2[0], *x.thresholds2[1])
    if (
        min(counts, default=0) >= 0
        and max(counts, default=0) <= EXACT_LIMIT
        and min(limits, default=0) >= -EXACT_LIMIT
        and max(limits, default=0) <= EXACT_LIMIT
    ):
        return x
    return dataclasses.replace(x, exact=False)


def same_inputs(a: Row, b: Row) -> bool:
    """``a`` and ``b`` agree on every field but ``update_time``: the int64 block's ``ints`` and
    ``bools`` (all that Filter's codes and Score's scores read) are the same for both."""
    return (
        a.existing2 == b.existing2
        and a.score_usage == b.score_usage
        and a.prod_usage == b.prod_usage
        and a.capacity == b.capacity
        and a.thresholds2 == b.thresholds2
        and a.aggregated2 == b.aggregated2
        and a.has_entry == b.has_entry
        and a.has_node_metric == b.has_node_metric
        and a.exact == b.exact
    )


def _clip(v: Vector) -> Vector:
    return tuple(max(-EXACT_LIMIT, min(EXACT_LIMIT, e)) for e in v)


def _ints(x: Row, clip: bool) -> list[int]:
    """capacity, capacity with 0 → 1, Score's usage (node or aggregated), Score's Prod usage, Filter's
    usage [k], thresholds [k] (R values each); Filter's code of resource 0 [k]."""
    cap_safe = tuple(c if c != 0 else 1 for c in x.capacity)
    codes = [1 + len(x.capacity) if x.aggregated2[k] else 1 for k in (0, 1)]
    (e0, e1), (t0, t1) = x.existing2, x.thresholds2
    if x.exact or not clip:
        return [*x.capacity, *cap_safe, *x.score_usage, *x.prod_usage, *e0, *e1, *t0, *t1, *codes]
    vectors = [x.capacity, cap_safe, x.score_usage, x.prod_usage, e0, e1, t0, t1]
    return [v for vector in vectors for v in _clip(vector)] + codes


def _active(x: Row) -> tuple[bool, bool]:
    """Some threshold set and a metric entry [k] (a threshold is set when it is not 0)."""
    return (x.has_entry and any(x.thresholds2[0]), x.has_entry and any(x.thresholds2[1]))


def _bools(x: Row, active: tuple[bool, bool] | None = None) -> list[bool]:
    """capacity 0, threshold and capacity non-zero [k] (R each); active [k] and a node metric."""
    zero = [c == 0 for c in x.capacity]
    checked = [t != 0 and not z for k in (0, 1) for t, z in zip(x.thresholds2[k], zero, strict=True)]
    a0, a1 = _active(x) if active is None else active
    return [*zero, *checked, a0 and x.has_node_metric, a1 and x.has_node_metric]


def _flags(x: Row, active: tuple[bool, bool] | None = None) -> list[bool]:
    """has a node metric; active [k]; no updateTime."""
    return [x.has_node_metric, *(_active(x) if active is None else active), math.isnan(x.update_time)]


class Block:
    """The rows' arrays, resource-major so that a rule's per-resource steps are elementwise operations
    over contiguous ``(R, n)`` slices. What Filter and Score read per estimate is packed in two arrays
    (selecting rows is two takes, writing one is two stores): ``ints`` (8R + 2, n), int64 or object
    (Python ints), see ``_ints``; ``bools`` (3R + 2, n), see ``_bools``. What only the per-cycle expiry
    and freshness rules read is kept apart, for every row only: ``update_time`` and ``flags``
    (4, n), see ``_flags``. The rules read named views of these (``capacity``, ``existing[k]``,
    ``checked[k]``, ...).

    [k]: k = 0 other pods, 1 Prod pods. In the int64 block a big row's values are clipped only so that
    they fit: they are never read from there."""

    def __init__(self, rows: Sequence[Row], r: int, dtype: type[Any]) -> None:
        n = len(rows)
        self.n, self.r, self.dtype = n, r, dtype
        self.ints = _columns([_ints(x, dtype is not object) for x in rows], dtype, 8 * r + 2, n)
        self.bools = _columns([_bools(x) for x in rows], np.bool_, 3 * r + 2, n)
        self.update_time = np.array([x.update_time for x in rows], np.float64).reshape(n)
        self.flags = _columns([_flags(x) for x in rows], np.bool_, 4, n)
        self._views()
        self.has_node_metric, self.no_update_time = self.flags[0], self.flags[3]
        self.active = [self.flags[1], self.flags[2]]
        self.fresh = Freshness()

    def _views(self) -> None:
        r, ints, bools = self.r, self.ints, self.bools
        self.capacity, self.cap_safe = ints[0:r], ints[r : 2 * r]
        self.score_usage, self.prod_usage = ints[2 * r : 3 * r], ints[3 * r : 4 * r]
        self.existing = [ints[4 * r : 5 * r], ints[5 * r : 6 * r]]
        self.thresholds = [ints[6 * r : 7 * r], ints[7 * r : 8 * r]]
        self.code_base = [ints[8 * r], ints[8 * r + 1]]
        self.cap_zero, self.checked = bools[0:r], [bools[r : 2 * r], bools[2 * r : 3 * r]]
        self.evaluated = [bools[3 * r], bools[3 * r + 1]]
        self._estimate: tuple[tuple[int, ...], npt.NDArray[Any]] | None = None

    def estimate(self, est: Sequence[int]) -> npt.NDArray[Any]:
        """The estimate as an ``(R, 1)`` column of the block's dtype (kept for the last estimate:
        Filter and Score ask for the same one)."""
        key = tuple(est)
        known = self._estimate
        if known is None or known[0] != key:
            known = (key, np.array(key, self.dtype).reshape(self.r, 1))
            self._estimate = known
        return known[1]

    def select(self, rows: npt.NDArray[np.intp]) -> Block:
        """A block of ``rows`` only (copies), for Filter's codes and Score's scores (not the expiry
        and freshness rules, whose arrays it lacks)."""
        out = object.__new__(Block)
        out.n, out.r, out.dtype = len(rows), self.r, self.dtype
        out.ints, out.bools = self.ints.take(rows, axis=1), self.bools.take(rows, axis=1)
        out._views()
        out._estimate = self._estimate  # an (R, 1) column: it broadcasts over any rows
        return out

    def resize(self, change: RowChange) -> None:
        """The rows in ``change``'s layout (new rows zero: the caller writes them)."""
        self.n = change.n
        self.ints, self.bools = change.array(self.ints, 0), change.array(self.bools, False)
        self.update_time = change.array(self.update_time, math.nan)
        self.flags = change.array(self.flags, False)
        self._views()
        self.has_node_metric, self.no_update_time = self.flags[0], self.flags[3]
        self.active = [self.flags[1], self.flags[2]]
        self.fresh.reset()

    def write(self, rows: Sequence[int], xs: Sequence[Row]) -> None:
        """Rows ``rows`` (distinct) of an int64 block become ``xs``: one store per array."""
        active = [_active(x) for x in xs]
        if len(rows) == 1:
            i, x = rows[0], xs[0]
            self.ints[:, i] = _ints(x, True)
            self.bools[:, i] = _bools(x, active[0])
            self.flags[:, i] = _flags(x, active[0])
            self.update_time[i] = x.update_time
        else:
            at = np.array(rows, np.intp)
            self.ints[:, at] = np.array([_ints(x, True) for x in xs], np.int64).T
            self.bools[:, at] = np.array([_bools(x, a) for x, a in zip(xs, active, strict=True)], np.bool_).T
            self.flags[:, at] = np.array([_flags(x, a) for x, a in zip(xs, active, strict=True)], np.bool_).T
            self.update_time[at] = [x.update_time for x in xs]
        self.fresh.changed(rows)

    def write_times(self, rows: Sequence[int], xs: Sequence[Row]) -> None:
        """Rows ``rows`` (distinct) of an int64 block become ``xs``, which differ from them in
        ``update_time`` only (``same_inputs``): only what the expiry and freshness rules read is stored."""
        for i, x in zip(rows, xs, strict=True):
            self.flags[:, i] = _flags(x)
            self.update_time[i] = x.update_time
        self.fresh.changed(rows)

    def expired(self, expiration_seconds: int, now: float) -> npt.NDArray[np.bool_]:
        """Per row, the metric expired at ``now`` (read-only; kept across cycles, see ``freshness``)."""
        return self.freshness(expiration_seconds, now).expired

    def freshness(self, expiration_seconds: int, now: float) -> Freshness:
        """The expiry rule's masks at ``now`` (``freshness.Freshness``: read-only arrays)."""
        return self.fresh.at(self.update_time, self.no_update_time, self.active, self.has_node_metric,
                             expiration_seconds, now)  # fmt: skip


class LoadRows:
    """The view: ``rows`` (Python), ``block`` (int64 arrays of every row) and ``big`` (rows outside
    the exact range, ascending)."""

    reads_pods = False  # the assigned pods it reads are the assign cache's (``refresh_names``)

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
        # the plugin's Filter codes and Score scores per estimate, patched on ``_set``
        self.results, self.score_results = RowResults(0), RowResults(0)
        self._selected: tuple[bytes, Block] | None = None
        self.rows: list[Row] = []
        self.block = Block([], len(self.resources), np.int64)
        self.big: list[int] = []
        # per row: the node dict its Node-derived part was derived from (the scheduler cache replaces
        # node dicts, never mutates them), with that part
        self._static: list[tuple[Mapping[str, Any], Vector, ThresholdProfile] | None] = []
        # and by content (``profile.content_key``): nodes of one shape share one derivation
        self._by_content: dict[Hashable, tuple[Vector, ThresholdProfile]] = {}

    def _node_static(self, i: int, node: Mapping[str, Any]) -> tuple[Vector, ThresholdProfile]:
        known = self._static[i]
        if known is not None and known[0] is node:
            return known[1], known[2]
        try:
            key: Hashable = content_key(self.resources, node)
        except (TypeError, AttributeError):
            key = None
        found = self._by_content.get(key) if key is not None else None
        if found is None:
            found = (node_capacity(self.resources, node), node_profile(self.args, self.resources, node))
            if key is not None:
                if len(self._by_content) >= _CONTENT_LIMIT:
                    self._by_content.clear()
                self._by_content[key] = found
        self._static[i] = (node, *found)
        return found

    def _row(self, i: int, name: str, node: Mapping[str, Any]) -> Row:
        capacity, profile = self._node_static(i, node)
        entry = self.metrics.get(name)
        other = profile.aggregated if profile.aggregated is not None else profile.usage
        prod = profile.prod if profile.prod_set else other
        agg2 = (profile.aggregated is not None, profile.aggregated is not None and not profile.prod_set)
        zero = (0,) * len(self.resources)
        if entry is None or not entry.has_node_metric:
            update_time = math.nan if entry is None or entry.update_time is None else entry.update_time
            return make_row(capacity, (other, prod), agg2, (zero, zero), zero, zero, entry is not None, False,
                            update_time)  # fmt: skip
        sums = self.assign.sums_of(name)
        e_other = existing_usage(entry, sums, False, profile.agg_type, profile.agg_duration)
        e_prod = existing_usage(entry, sums, True, "", 0)
        same = self.score_agg == (profile.agg_type, profile.agg_duration)  # (the same inputs)
        e_score = e_other if same else existing_usage(entry, sums, False, *self.score_agg)
        update_time = math.nan if entry.update_time is None else entry.update_time
        return make_row(capacity, (other, prod), agg2, (e_other, e_prod if profile.prod_set else e_other),
                        e_score, e_prod, True, True, update_time)  # fmt: skip

    # --- RowView ----------------------------------------------------------------------------------
    def rebuild(self, snapshot: Snapshot) -> None:
        old = dict(zip(self.names, self._static, strict=True))
        self.names = list(snapshot.names)
        self._static = [old.get(name) for name in self.names]
        self.rows = [self._row(i, info.name, info.node) for i, info in enumerate(snapshot.infos)]
        self.big = [i for i, x in enumerate(self.rows) if not x.exact]
        self.block = Block(self.rows, len(self.resources), np.int64)
        self.results, self.score_results = RowResults(len(self.rows)), RowResults(len(self.rows))
        self._selected = None

    def refresh(self, snapshot: Snapshot, rows: Sequence[int]) -> None:
        """Rows whose Node object was replaced (``reads_pods`` is false: the assigned pods the rows
        depend on are the assign cache's, whose changes come through ``refresh_names``)."""
        infos = snapshot.infos
        rows = sorted(set(rows))
        self._set(rows, [self._row(i, infos[i].name, infos[i].node) for i in rows], force=True)

    def resize(self, snapshot: Snapshot, change: RowChange) -> None:
        """The rows follow the new layout; new rows hold a placeholder until ``refresh`` derives them."""
        change.list(self.names, "")
        for i in change.added:
            self.names[i] = snapshot.names[i]
        change.list(self._static)
        zero = (0,) * len(self.resources)
        change.list(self.rows, make_row(zero, (zero, zero), (False, False), (zero, zero), zero, zero,
                                        False, False, math.nan))  # fmt: skip
        if self.big:
            new_of = {old: new for old, new in change.moves}
            gone = set(change.removed)
            self.big = sorted(new_of.get(i, i) for i in self.big if i not in gone)
        self.block.resize(change)
        self.results.resize(change)
        self.score_results.resize(change)
        self._selected = None

    def refresh_names(self, snapshot: Snapshot, names: Iterable[str]) -> None:
        """Rows of nodes whose metric or assigned pods changed (names not in the snapshot are skipped)."""
        index, infos = snapshot.index, snapshot.infos
        found = [(i, name) for i, name in ((index.get(name), name) for name in names) if i is not None]
        if found:  # (names are distinct, so are their rows)
            self._set([i for i, _ in found], [self._row(i, name, infos[i].node) for i, name in found])

    def _set(self, rows: Sequence[int], xs: Sequence[Row], force: bool = False) -> None:
        """Rows ``rows`` (distinct) become ``xs``; ``force``: write every row's arrays (rows of a
        replaced or new Node object, whose arrays may hold ``resize``'s zeros rather than the old row)."""
        if not rows:
            return
        old, big = self.rows, False
        # A row whose Filter/Score inputs are unchanged (a NodeMetric rewrite or a pod event that moved
        # no sum the rules read) keeps its arrays and its kept results; only a new update_time is stored
        # (docs/rules/scheduler.md#loadawarescheduling).
        changed: list[int] = []
        new: list[Row] = []
        timed: list[int] = []
        new_times: list[Row] = []
        for i, x in zip(rows, xs, strict=True):
            o = old[i]
            if force or not same_inputs(o, x):
                big = big or o.exact != x.exact
                changed.append(i)
                new.append(x)
            elif o.update_time != x.update_time and not (
                math.isnan(o.update_time) and math.isnan(x.update_time)
            ):
                timed.append(i)
                new_times.append(x)
            old[i] = x
        if timed:
            self.block.write_times(timed, new_times)
        if not changed:
            return
        self.block.write(changed, new)
        self.results.changed(changed)
        self.score_results.changed(changed)
        self._selected = None
        if big:
            self.big = [k for k, row in enumerate(self.rows) if not row.exact]

    def select(self, rows: npt.NDArray[np.intp] | None) -> Block:
        """The int64 block (``rows`` None) or its ``rows`` (kept for the last rows asked: Filter's codes
        and Score's scores are patched on the same rows)."""
        if rows is None:
            return self.block
        key = rows.tobytes()
        known = self._selected
        if known is None or known[0] != key:
            known = (key, self.block.select(rows))
            self._selected = known
        return known[1]

    def big_block(self, all_rows: bool = False) -> Block:
        """The big rows (or every row) as Python ints, in row order."""
        rows = self.rows if all_rows else [self.rows[i] for i in self.big]
        return Block(rows, len(self.resources), object)


def _columns(values: list[list[Any]], dtype: Any, width: int, n: int) -> npt.NDArray[Any]:
    """Per-row lists of ``width`` values as a C-contiguous (width, n) array."""
    if dtype is object:
        out = np.empty((width, n), object)
        for i, v in enumerate(values):
            out[:, i] = v
        return out
    return np.array(values, dtype).reshape(n, width).T.copy()
