"""The PodTopologySpread plugin (docs/rules/scheduler-spread.md#podtopologyspread): PreFilter, Filter,
PreScore, Score and NormalizeScore of kube-scheduler v1.20.2, its rules in this package's
``filtering`` and ``scoring`` modules, its args in ``constraints``. Default constraints need the
cluster's Services/RCs/RSs/StatefulSets: the plugin is given the scheduler's ``ClusterObjects``.
PreFilterExtensions (``add_pod``/``remove_pod``,
docs/rules/scheduler-spread.md#podtopologyspread-prefilter-extensions) update the PreFilter counts and
critical paths of a cloned state for preemption and nominated pods.
Imports: numpy, apis.kubeobjects, scheduler.framework, scheduler.plugins.podtopologyspread.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import numpy as np

from apis.kubeobjects import Pod
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterResult, IntArray
from scheduler.framework.listers import ClusterObjects
from scheduler.framework.podupdates import update_with_pod
from scheduler.framework.snapshot import NodeInfo, Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.podtopologyspread.constraints import ConstraintError, SpreadArgs, pod_constraints
from scheduler.plugins.podtopologyspread.filtering import (
    NAME,
    PRE_FILTER_STATE_KEY,
    FilterState,
    filter_rows,
    pre_filter_error,
    pre_filter_state,
)
from scheduler.plugins.podtopologyspread.scoring import (
    PRE_SCORE_STATE_KEY,
    ScoreState,
    normalize,
    pre_score_error,
    pre_score_state,
)

#: The weight of its score in kube-scheduler v1.20's default profile.
DEFAULT_WEIGHT: Final = 2


class PodTopologySpread:
    """PreFilter + Filter (vectorised) + PreScore + Score (vectorised) + NormalizeScore."""

    # Its only uniform scores are a pod's without soft constraints: no row is ignored, so they
    # normalise by their range alone (docs/architecture.md#uniform-scores).
    normalizes_by_range = True

    def __init__(self, objects: ClusterObjects | None = None, args: SpreadArgs | None = None) -> None:
        self.objects = objects
        self.args = args or SpreadArgs()
        self.defaults = self.args.constraints

    @classmethod
    def from_args(cls, args: Mapping[str, Any], objects: ClusterObjects | None = None) -> PodTopologySpread:
        """``PodTopologySpreadArgs`` (v1beta1/v1 spellings) with v1.20's defaults and validation;
        raises ValueError naming the field and value."""
        return cls(objects, SpreadArgs.from_args(args))

    @property
    def name(self) -> str:
        return NAME

    # --- PreFilter / Filter -------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        try:
            state.write(
                PRE_FILTER_STATE_KEY, pre_filter_state(state, pod, snapshot, self.defaults, self.objects)
            )
        except ConstraintError as e:
            return pre_filter_error(e, bool(pod_constraints(pod)))
        return Status.success()

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        found = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(found, FilterState):
            st = self.pre_filter(state, pod, snapshot)
            if not st.is_success():
                return FilterResult.from_mask(np.ones(snapshot.n, np.bool_), st)
            found = state.read(PRE_FILTER_STATE_KEY)
            assert isinstance(found, FilterState)
        return filter_rows(found, snapshot)

    # --- PreFilter extensions ----------------------------------------------------------------------
    def _update(self, state: CycleState, updated: Pod, info: NodeInfo, delta: int) -> Status:
        missing = f'reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found'
        return update_with_pod(state, PRE_FILTER_STATE_KEY, FilterState, NAME, missing, updated, info, delta)

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, info: NodeInfo) -> Status:
        return self._update(state, pod_to_add, info, 1)

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, info: NodeInfo) -> Status:
        return self._update(state, pod_to_remove, info, -1)

    # --- PreScore / Score / NormalizeScore ----------------------------------------------------------
    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> Status:
        try:
            state.write(
                PRE_SCORE_STATE_KEY,
                pre_score_state(state, pod, snapshot, feasible, self.defaults, self.objects),
            )
        except ConstraintError as e:
            return pre_score_error(e, bool(pod_constraints(pod)))
        return Status.success()

    def _score_state(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> ScoreState:
        found = state.get(PRE_SCORE_STATE_KEY)
        if isinstance(found, ScoreState) and (
            found.feasible is feasible or np.array_equal(found.feasible, feasible)
        ):
            return found
        st = self.pre_score(state, pod, snapshot, feasible)
        if not st.is_success():
            raise RuntimeError(st.message())
        found = state.read(PRE_SCORE_STATE_KEY)
        assert isinstance(found, ScoreState)
        return found

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        """The raw scores of every row (PreScore computed them; the runtime reads the feasible ones)."""
        return self._score_state(state, pod, snapshot, feasible).raw

    def normalize_scores(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        found = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(found, ScoreState):
            return Status.error(f'reading "{PRE_SCORE_STATE_KEY}" from cycleState: not found', plugin=NAME)
        normalize(found, scores)
        return Status.success()
