"""PodTopologySpread's PreFilter and Filter (docs/rules/scheduler-spread.md#podtopologyspread-filter),
as kube-scheduler v1.20.2, vectorised over the snapshot's rows.

PreFilter takes the pod's DoNotSchedule constraints (or the default ones of that action when the pod
has none) and counts, per topology domain (key, value), the matching pods on the eligible nodes: those
that pass the pod's nodeSelector and required node affinity and carry every constraint's key.
Constraints sharing a key share its domains' counts, as kube's map keyed by (key, value) does. The
minimum per key is over the domains that exist (int32 max when none does). As in v1.20.2, a domain's
count then takes the matching pods of every node in it, eligible or not, and a node without the key
counts in the domain of the value "" when that domain exists.

Filter, constraints in order, the first failing one deciding: a node without the key is
UNSCHEDULABLE_AND_UNRESOLVABLE ``node(s) didn't match pod topology spread constraints (missing
required label)``; ``count(domain) + self-match - min(key) > maxSkew`` is UNSCHEDULABLE ``node(s)
didn't match pod topology spread constraints``. A domain no eligible node has counts 0.
Imports: numpy, apis.kubeobjects, scheduler.framework, scheduler.plugins (nodeaffinity,
podtopologyspread).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from apis.kubeobjects import Node, Pod
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import BoolArray, FilterResult
from scheduler.framework.listers import ClusterObjects, labels_of, matches, namespace_of
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.nodeaffinity import LabelColumn, NodeAffinity
from scheduler.plugins.podtopologyspread.constraints import (
    DO_NOT_SCHEDULE,
    INT32_MAX,
    Constraint,
    ConstraintError,
    DefaultConstraint,
    Selector,
    default_constraints,
    of_action,
    pod_constraints,
)
from scheduler.plugins.podtopologyspread.podindex import pod_index

NAME: Final = "PodTopologySpread"
ERR_REASON_CONSTRAINTS_NOT_MATCH: Final = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH: Final = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"
PRE_FILTER_STATE_KEY: Final = "PreFilter" + NAME

I64 = npt.NDArray[np.int64]
_AFFINITY: Final = NodeAffinity()


def label_column(snapshot: Snapshot, key: str) -> LabelColumn:
    """Label `key`'s value codes over the rows (a snapshot view)."""
    return snapshot.view((NAME, "label", key), lambda: LabelColumn(key))


def constraints_for(
    pod: Pod, action: str, defaults: Sequence[DefaultConstraint], objects: ClusterObjects | None
) -> tuple[Constraint, ...]:
    """The pod's constraints of `action`, or (the pod having none) the defaults'. Raises
    ConstraintError for a selector kube refuses."""
    raw = pod_constraints(pod)
    if raw:
        return of_action(raw, action)
    return default_constraints(pod, defaults, objects, action)


def has_keys(snapshot: Snapshot, keys: Sequence[str]) -> BoolArray:
    """Rows that carry every key."""
    ok = np.ones(snapshot.n, np.bool_)
    for key in dict.fromkeys(keys):
        ok &= label_column(snapshot, key).codes >= 0
    return ok


def eligible_rows(state: CycleState, pod: Pod, snapshot: Snapshot, with_keys: BoolArray) -> BoolArray:
    """Rows that pass the pod's nodeSelector and required node affinity, among `with_keys`."""
    passed = _AFFINITY.filter_all(state, pod, snapshot)
    return with_keys if not passed.statuses else with_keys & passed.passed


def counts(snapshot: Snapshot, pod: Pod, selector: Selector) -> I64:
    """Matching pods of the pod's namespace per row."""
    return pod_index(snapshot).counts(namespace_of(pod), selector)


def domain_counts(
    snapshot: Snapshot, pod: Pod, constraints: Sequence[Constraint], key: str, rows: BoolArray | None
) -> I64:
    """Per value code of `key` (plus a last slot, which code -1 reaches): the pods the constraints on
    `key` match on `rows`, summed. With `rows` None, every row counts and a row without the key
    counts as the value "" (Go's map lookup), as v1.20.2's PreFilter does."""
    column = label_column(snapshot, key)
    size = len(column.values) + 1
    if rows is None:
        empty = column.index.get("", size - 1)
        codes = np.where(column.codes < 0, empty, column.codes)
    else:
        codes = column.codes[rows]
    total = np.zeros(size, np.int64)
    for c in constraints:
        if c.topology_key == key:
            weights = counts(snapshot, pod, c.selector)
            if rows is not None:
                weights = weights[rows]
            total += np.rint(np.bincount(codes, weights=weights, minlength=size)).astype(np.int64)
    return total


Path = tuple[str, int]  # a critical path: (topology value, matching pods)


def update_paths(paths: tuple[Path, Path], value: str, num: int) -> tuple[Path, Path]:
    """kube's ``criticalPaths.update``: ``paths[0]`` keeps the minimum count; ``paths[1]`` is at
    least as large (not always the second smallest after updates)."""
    p0, p1 = paths
    if value == p0[0] or value == p1[0]:
        p0, p1 = ((value, num), p1) if value == p0[0] else (p0, (value, num))
        return (p1, p0) if p0[1] > p1[1] else (p0, p1)
    if num < p0[1]:
        return (value, num), p0
    if num < p1[1]:
        return p0, (value, num)
    return p0, p1


@dataclass(frozen=True, slots=True)
class FilterState:
    """PreFilter's result: per constraint, whether the pod matches its selector; per key, the
    domains' counts and whether each domain exists (by value code of ``index[key]``, the key's
    column's codes when PreFilter ran, so the state reads on any snapshot), and the critical paths
    (``min_match`` is ``paths[key][0]``'s count). ``update_with_pod`` (kube's ``updateWithPod``, for
    the PreFilter extensions, docs/rules/scheduler-spread.md#podtopologyspread-prefilter-extensions)
    replaces arrays and paths, never writes them: ``clone`` copies the maps only."""

    constraints: tuple[Constraint, ...]
    self_match: tuple[int, ...] = ()
    pair_counts: dict[str, I64] | None = None
    exists: dict[str, BoolArray] | None = None
    min_match: dict[str, int] | None = None
    index: dict[str, dict[str, int]] | None = None
    paths: dict[str, tuple[Path, Path]] | None = None
    namespace: str = ""  # the incoming pod's

    def clone(self) -> FilterState:
        if not self.constraints:
            return self
        assert self.pair_counts is not None and self.min_match is not None and self.paths is not None
        return FilterState(
            self.constraints,
            self.self_match,
            dict(self.pair_counts),
            self.exists,
            dict(self.min_match),
            self.index,
            dict(self.paths),
            self.namespace,
        )

    def update_with_pod(self, updated: Pod, node: Node, delta: int) -> None:
        """``updated`` added to (``delta`` 1) or removed from (-1) ``node``: only a pod of the incoming
        pod's namespace, on a node that carries every constraint's key, and for each constraint whose
        selector matches it (terminating or not, as kube). A domain that does not exist is left alone
        (kube 1.20.2 dereferences a missing counter there)."""
        if not self.constraints or namespace_of(updated) != self.namespace:
            return
        assert self.pair_counts is not None and self.exists is not None and self.index is not None
        assert self.min_match is not None and self.paths is not None
        node_labels = labels_of(node)
        if any(c.topology_key not in node_labels for c in self.constraints):
            return
        labels = labels_of(updated)
        for c in self.constraints:
            if c.selector is None or not matches(c.selector, labels):
                continue
            key = c.topology_key
            value = node_labels[key]
            code = self.index[key].get(value)
            if code is None or code >= len(self.exists[key]) or not self.exists[key][code]:
                continue
            counts = self.pair_counts[key].copy()
            counts[code] += delta
            self.pair_counts[key] = counts
            self.paths[key] = update_paths(self.paths[key], value, int(counts[code]))
            self.min_match[key] = self.paths[key][0][1]


_EMPTY: Final = FilterState(())
_NO_PATHS: Final[tuple[Path, Path]] = (("", INT32_MAX), ("", INT32_MAX))
_NONE_LEFT: Final = np.iinfo(np.int64).max  # (no count reaches it)


def initial_paths(column: LabelColumn, total: I64, present: BoolArray) -> tuple[Path, Path]:
    """The critical paths over the existing domains, as kube builds them: the two smallest counts
    (later domains cannot change them; on ties the lowest code, one of the orders Go's map gives)."""
    n = len(column.values)
    left = np.where(present[:n], total[:n], _NONE_LEFT)
    paths = _NO_PATHS
    for _ in range(min(n, 2)):
        c = int(np.argmin(left))
        if left[c] == _NONE_LEFT:
            break
        paths = update_paths(paths, column.values[c], int(total[c]))
        left[c] = _NONE_LEFT
    return paths


def pre_filter_state(
    state: CycleState,
    pod: Pod,
    snapshot: Snapshot,
    defaults: Sequence[DefaultConstraint],
    objects: ClusterObjects | None,
) -> FilterState:
    """Raises ConstraintError (as kube's PreFilter fails)."""
    constraints = constraints_for(pod, DO_NOT_SCHEDULE, defaults, objects)
    if not constraints:
        return _EMPTY
    keys = [c.topology_key for c in constraints]
    eligible = eligible_rows(state, pod, snapshot, has_keys(snapshot, keys))
    labels = labels_of(pod)
    self_match = tuple(int(c.selector is not None and matches(c.selector, labels)) for c in constraints)
    pair_counts, exists, min_match, index, paths = {}, {}, {}, {}, {}
    for key in dict.fromkeys(keys):
        column = label_column(snapshot, key)
        size = len(column.values) + 1
        present = np.bincount(column.codes[eligible], minlength=size) > 0
        total = domain_counts(snapshot, pod, constraints, key, None)
        pair_counts[key], exists[key], index[key] = total, present, column.index
        paths[key] = initial_paths(column, total, present)
        min_match[key] = paths[key][0][1]
    return FilterState(
        constraints, self_match, pair_counts, exists, min_match, index, paths, namespace_of(pod)
    )


def _domains(state: FilterState, snapshot: Snapshot, key: str) -> tuple[I64, BoolArray]:
    """Per value code of this snapshot's column of ``key`` (plus the last slot, code -1): the
    domain's count and whether it exists, translated value by value when the state was counted on
    another snapshot's codes."""
    assert state.pair_counts is not None and state.exists is not None and state.index is not None
    column = label_column(snapshot, key)
    counts, exists, own = state.pair_counts[key], state.exists[key], state.index[key]
    if own is column.index and len(counts) == len(column.values) + 1:
        return counts, exists
    size = len(column.values) + 1
    out_counts, out_exists = np.zeros(size, np.int64), np.zeros(size, np.bool_)
    for value, c in column.index.items():
        k = own.get(value)
        if k is not None and k < len(counts) - 1:  # (the last slot is no value's)
            out_counts[c], out_exists[c] = counts[k], exists[k]
    return out_counts, out_exists


def filter_rows(state: FilterState, snapshot: Snapshot) -> FilterResult:
    """Filter over every row; statuses: 0 skew violated, 1 missing label."""
    n = snapshot.n
    if not state.constraints:
        return FilterResult.all_pass(n)
    assert state.min_match is not None
    which = np.full(n, -1, np.int32)
    domains: dict[str, tuple[I64, BoolArray]] = {}
    for c, me in zip(state.constraints, state.self_match, strict=True):
        key = c.topology_key
        if key not in domains:
            domains[key] = _domains(state, snapshot, key)
        counts, exists = domains[key]
        codes = label_column(snapshot, key).codes
        missing = codes < 0
        found = np.where(exists[codes], counts[codes], 0)
        failed = found + (me - state.min_match[key]) > c.max_skew
        open_ = which < 0
        which[open_ & missing] = 1
        which[open_ & ~missing & failed] = 0
    if not np.any(which >= 0):
        return FilterResult.all_pass(n)
    return FilterResult(
        which,
        (
            Status.unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH, plugin=NAME),
            Status.unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH, plugin=NAME),
        ),
    )


def pre_filter_error(e: ConstraintError, own: bool) -> Status:
    what = "obtaining pod's hard" if own else "setting default hard"
    return Status.error(f"{what} topology spread constraints: {e}", plugin=NAME)
