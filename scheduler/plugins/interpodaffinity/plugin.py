"""The InterPodAffinity plugin (docs/rules/scheduler-interpodaffinity.md#interpodaffinity): PreFilter,
Filter (vectorised over rows), PreScore, Score (vectorised) and NormalizeScore, with kube-scheduler
1.20.2's semantics; weight 1 in the default profile. A pod whose terms do not parse is rejected at
PreFilter (UNSCHEDULABLE_AND_UNRESOLVABLE, ``parsing pod: …``). Filter and Score compute their state
themselves when PreFilter/PreScore did not run in the cycle. PreFilterExtensions (``add_pod``/
``remove_pod``, docs/rules/scheduler-interpodaffinity.md#prefilter-extensions) update the PreFilter
counts of a cloned state for preemption and nominated pods; an ERROR status when PreFilter's state is
missing, as kube's.
Imports: numpy, scheduler.framework, scheduler.plugins.interpodaffinity.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterResult, IntArray, Pod
from scheduler.framework.podupdates import update_with_pod
from scheduler.framework.snapshot import NodeInfo, Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.interpodaffinity.args import InterPodAffinityArgs
from scheduler.plugins.interpodaffinity.filter import filter_rows
from scheduler.plugins.interpodaffinity.prefilter import FilterState, compute_filter_state
from scheduler.plugins.interpodaffinity.score import ScoreState, compute_score_state, normalize, score_rows
from scheduler.plugins.interpodaffinity.terms import PodTerms, parse_pod_terms
from scheduler.plugins.interpodaffinity.topology import NAME

PRE_FILTER_KEY: Final = "PreFilter" + NAME
PRE_SCORE_KEY: Final = "PreScore" + NAME
DEFAULT_WEIGHT: Final = 1  # in kube-scheduler 1.20.2's default profile


class InterPodAffinity:
    """See the module docstring."""

    normalizes_by_range = True  # (docs/architecture.md#uniform-scores)

    def __init__(self, args: InterPodAffinityArgs | None = None) -> None:
        self.args = args or InterPodAffinityArgs()

    @classmethod
    def from_args(cls, args: Mapping[str, Any] | None) -> InterPodAffinity:
        return cls(InterPodAffinityArgs.from_args(args))

    @property
    def name(self) -> str:
        return NAME

    # --- filtering --------------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        terms = parse_pod_terms(pod)
        if terms.error is not None:
            return Status.unresolvable(f"parsing pod: {terms.error}", plugin=NAME)
        state.write(PRE_FILTER_KEY, compute_filter_state(pod, snapshot, terms))
        return Status.success()

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        found = state.get(PRE_FILTER_KEY)
        if not isinstance(found, FilterState):
            found = compute_filter_state(pod, snapshot)
            state.write(PRE_FILTER_KEY, found)
        return filter_rows(found, snapshot)

    # --- PreFilter extensions ----------------------------------------------------------------------
    def _update(self, state: CycleState, updated: Pod, info: NodeInfo, delta: int) -> Status:
        missing = f'error reading "{PRE_FILTER_KEY}" from cycleState: not found'
        return update_with_pod(state, PRE_FILTER_KEY, FilterState, NAME, missing, updated, info, delta)

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, info: NodeInfo) -> Status:
        return self._update(state, pod_to_add, info, 1)

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, info: NodeInfo) -> Status:
        return self._update(state, pod_to_remove, info, -1)

    # --- scoring ----------------------------------------------------------------------------------
    def _score_state(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, terms: PodTerms | None
    ) -> ScoreState:
        terms = parse_pod_terms(pod) if terms is None else terms
        found = compute_score_state(pod, terms, snapshot, self.args.hard_pod_affinity_weight)
        state.write(PRE_SCORE_KEY, found)
        return found

    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> Status:
        if not len(feasible):
            return Status.success()
        terms = parse_pod_terms(pod)
        if terms.error is not None:
            return Status.error(f"parsing pod: {terms.error}", plugin=NAME)
        self._score_state(state, pod, snapshot, terms)
        return Status.success()

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        found = state.get(PRE_SCORE_KEY)
        if not isinstance(found, ScoreState):
            found = self._score_state(state, pod, snapshot, None)
        return score_rows(found, snapshot)

    def normalize_scores(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        normalize(scores)
        return Status.success()
