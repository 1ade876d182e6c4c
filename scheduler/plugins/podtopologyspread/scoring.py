"""PodTopologySpread's PreScore, Score and NormalizeScore
(docs/rules/scheduler-spread.md#podtopologyspread-score), as kube-scheduler v1.20.2, over the
feasible rows at once.

PreScore takes the pod's ScheduleAnyway constraints (or the default ones). Feasible nodes missing a
constraint's key are ignored (raw score 0, final score 0). Each constraint gets the weight
``log(size + 2)`` (Go's ``math.Log``): size is the number of feasible non-ignored nodes for
``kubernetes.io/hostname``, else the number of distinct values the key takes on them (0 for a later
constraint on a key already seen, as kube counts a domain once). A node's raw score is, constraints in
order, ``Σ float64(count)·weight + float64(maxSkew-1)`` truncated to int64, where count is the node's
own matching pods for the hostname key and otherwise its domain's, counted on every node that passes
the pod's node selector/affinity and carries all the keys.

NormalizeScore: with ``min``/``max`` over the non-ignored raw scores (max starting at 0), a node scores
``100·(max + min - s) / max`` (int64 division), 100 for every node when max is 0, 0 when ignored.
Imports: numpy, apis.kubeobjects, scheduler.framework, scheduler.plugins.podtopologyspread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from apis.kubeobjects import Pod
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import BoolArray, IntArray, uniform_scores
from scheduler.framework.listers import ClusterObjects
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import MAX_NODE_SCORE, Status
from scheduler.plugins.podtopologyspread.constraints import (
    LABEL_HOSTNAME,
    SCHEDULE_ANYWAY,
    Constraint,
    ConstraintError,
    DefaultConstraint,
    go_log,
)
from scheduler.plugins.podtopologyspread.filtering import (
    NAME,
    constraints_for,
    counts,
    domain_counts,
    eligible_rows,
    has_keys,
    label_column,
)

PRE_SCORE_STATE_KEY: Final = "PreScore" + NAME


@dataclass(frozen=True, slots=True)
class ScoreState:
    """PreScore's result: the raw score of every row (0 where ignored or not feasible) and which of
    the `feasible` rows are ignored (None: none is)."""

    feasible: IntArray
    raw: IntArray
    ignored: BoolArray | None


def pre_score_state(
    state: CycleState,
    pod: Pod,
    snapshot: Snapshot,
    feasible: IntArray,
    defaults: Sequence[DefaultConstraint],
    objects: ClusterObjects | None,
) -> ScoreState:
    """Raises ConstraintError (as kube's PreScore fails). Computed over every row (no gathers of the
    feasible ones, which cost more than the rows they skip); only the sizes read the feasible set."""
    constraints = constraints_for(pod, SCHEDULE_ANYWAY, defaults, objects)
    n = snapshot.n
    if not constraints:  # every row 0 and none ignored: normalised, every row gets 100
        return ScoreState(feasible, uniform_scores(n, 0), None)
    keys = [c.topology_key for c in constraints]
    has_all = has_keys(snapshot, keys)
    if len(feasible) == n:
        scored = has_all  # the feasible rows that are not ignored
    else:
        scored = np.zeros(n, np.bool_)
        scored[feasible] = True
        scored &= has_all
    eligible = eligible_rows(state, pod, snapshot, has_all)
    score = np.zeros(n, np.float64)
    seen: set[str] = set()
    domains: dict[str, IntArray] = {}
    for c in constraints:
        cnt, size = _counts_and_size(snapshot, pod, constraints, c, scored, eligible, seen, domains)
        term = cnt.astype(np.float64) * go_log(float(size + 2))
        term += float(c.max_skew - 1)
        score += term
    raw = score.astype(np.int64)  # Go's int64(float64): truncation (scores are ≥ 0)
    raw[~scored] = 0
    ignored = None if has_all.all() else ~has_all[feasible]
    return ScoreState(feasible, raw, ignored)


def _counts_and_size(
    snapshot: Snapshot,
    pod: Pod,
    constraints: Sequence[Constraint],
    c: Constraint,
    scored: BoolArray,
    eligible: BoolArray,
    seen: set[str],
    domains: dict[str, IntArray],
) -> tuple[IntArray, int]:
    """Constraint c's count for every row (meaningful on the scored ones) and its topology size."""
    key = c.topology_key
    if key == LABEL_HOSTNAME:
        return counts(snapshot, pod, c.selector), int(np.count_nonzero(scored))
    column = label_column(snapshot, key)
    size = 0
    if key not in seen:
        seen.add(key)
        present = np.zeros(len(column.values) + 1, np.bool_)
        present[column.codes[scored]] = True
        size = int(np.count_nonzero(present))
    total = domains.get(key)
    if total is None:
        total = domains[key] = domain_counts(snapshot, pod, constraints, key, eligible)
    return total[column.codes], size  # code -1 (no label: not scored) reads the last slot


def normalize(state: ScoreState, scores: IntArray) -> None:
    """NormalizeScore in place over the feasible rows' scores."""
    ignored = state.ignored
    if ignored is not None and len(ignored) != len(scores):
        raise ValueError(f"{NAME}: {len(scores)} scores for {len(ignored)} rows scored in PreScore")
    valid = scores if ignored is None else scores[~ignored]
    lo = int(valid.min()) if len(valid) else 2**63 - 1
    hi = max(int(valid.max()), 0) if len(valid) else 0
    if hi == 0:
        scores[:] = MAX_NODE_SCORE
    else:
        scores[:] = MAX_NODE_SCORE * (hi + lo - scores) // hi  # all terms ≥ 0: floor is truncation
    if ignored is not None:
        scores[ignored] = 0


def pre_score_error(e: ConstraintError, own: bool) -> Status:
    what = "obtaining pod's soft" if own else "setting default soft"
    return Status.error(f"calculating preScoreState: {what} topology spread constraints: {e}", plugin=NAME)
