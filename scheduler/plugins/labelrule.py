"""The plugin skeleton NodePool and ScarceDevice share (docs/rules/scheduler-nodepool.md): a rule over
one node label key that keeps some label values away from a pod, in two modes. Each rule says which
values a pod asks for (``asked``) and which node values it keeps away given those (``excluded``);
the rest is the same: the pod's asked values once per cycle, kept in CycleState, then one boolean per
distinct label value gathered over the rows of the key's label column view (scheduler.plugins.poollabels).

- HardLabelRule (PreFilter + Filter): an excluded node rejects the pod, UNSCHEDULABLE_AND_UNRESOLVABLE
  (no preemption changes a label), with the rule's reason.
- SoftLabelRule (PreScore + Score): 0 on excluded nodes, 100 elsewhere; no NormalizeScore.
Imports: scheduler.framework, scheduler.plugins (poollabels, nodeaffinity_terms).
"""

from __future__ import annotations

from typing import ClassVar

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import BoolArray, FilterResult, IntArray, Pod
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.nodeaffinity_terms import LabelColumn
from scheduler.plugins.poollabels import bad_values, filter_result, label_column, scores_of

__all__ = ["HardLabelRule", "LabelRule", "SoftLabelRule"]


class LabelRule:
    """A rule over label ``label``; subclasses set NAME and REASON and define asked/excluded."""

    NAME: ClassVar[str]
    REASON: ClassVar[str]

    def __init__(self, label: str) -> None:
        self.label = label
        self._status = Status.unresolvable(self.REASON, plugin=self.NAME)

    @property
    def name(self) -> str:
        return self.NAME

    def asked(self, pod: Pod) -> frozenset[str]:
        """The label values ``pod`` asks for."""
        raise NotImplementedError

    def excluded(self, value: str, asked: frozenset[str]) -> bool:
        """Whether a node whose label is ``value`` is kept from a pod that asked for ``asked``."""
        raise NotImplementedError

    def _rows(
        self, state: CycleState, key: str, pod: Pod, snapshot: Snapshot
    ) -> tuple[LabelColumn, BoolArray | None]:
        asked = state.get(key)
        if not isinstance(asked, frozenset):
            asked = self.asked(pod)
            state.write(key, asked)
        column = label_column(snapshot, self.NAME, self.label)
        return column, bad_values(column, lambda v: self.excluded(v, asked))


class HardLabelRule(LabelRule):
    """``mode: Hard``: PreFilter + Filter."""

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        state.write("PreFilter" + self.NAME, self.asked(pod))
        return Status.success()

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        return filter_result(*self._rows(state, "PreFilter" + self.NAME, pod, snapshot), self._status)


class SoftLabelRule(LabelRule):
    """``mode: Soft``: PreScore + Score."""

    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> Status:
        state.write("PreScore" + self.NAME, self.asked(pod))
        return Status.success()

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        return scores_of(*self._rows(state, "PreScore" + self.NAME, pod, snapshot))
