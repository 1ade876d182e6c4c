"""ScarceDevice: scarce GPU models kept for the pods that need them
(docs/rules/scheduler-nodepool.md#scarcedevice), koord's own plugin.

A node's model is the value of the args' ``label`` (default ``node.koordinator.sh/gpu-model``); the
model is scarce when it is one of the args' ``models``, or, with ``models`` empty, whatever it is. A pod
asks for the models its nodeSelector or required node affinity (``In``) names
(docs/rules/scheduler-nodepool.md#asking-for-a-value); requesting a GPU resource without naming a model
asks for none (docs/rules/scheduler-nodepool.md#gpu-requests-without-a-model).

- ``mode: Hard`` (default; PreFilter + Filter): a node with a scarce model rejects a pod that did not
  ask for that model, UNSCHEDULABLE_AND_UNRESOLVABLE, reason
  ``node(s) have a scarce device model the pod did not ask for``.
- ``mode: Soft`` (PreScore + Score, no filter): 0 on those nodes, 100 elsewhere, so they are used
  last; no NormalizeScore (the scores are already 0 or 100).

As NodePool's, the modes are two classes (``ScarceDevice.from_args`` picks one) and the rule is
vectorised: the asked models once per cycle, one lookup per distinct label value, one gather over the
rows of a label column view.
Imports: scheduler.framework, scheduler.plugins (poollabels, nodeaffinity_terms).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import BoolArray, FilterResult, IntArray, Pod
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.nodeaffinity_terms import LabelColumn
from scheduler.plugins.poollabels import (
    HARD,
    asked_values,
    bad_values,
    check_fields,
    filter_result,
    label_arg,
    label_column,
    mode_arg,
    scores_of,
    values_arg,
)

NAME: Final = "ScarceDevice"
DEFAULT_LABEL: Final = "node.koordinator.sh/gpu-model"
ERR_REASON: Final = "node(s) have a scarce device model the pod did not ask for"
STATE_KEY: Final = "PreFilter" + NAME
SCORE_STATE_KEY: Final = "PreScore" + NAME
_FIELDS: Final = frozenset({"label", "models", "mode"})


@dataclass(frozen=True, slots=True)
class ScarceDeviceArgs:
    label: str = DEFAULT_LABEL
    models: frozenset[str] = frozenset()  # empty: every value of the label is scarce
    mode: str = HARD

    @classmethod
    def from_args(cls, args: Mapping[str, Any] | None) -> ScarceDeviceArgs:
        """Defaults for absent (or null) fields; ValueError names the bad field and its value."""
        raw: Mapping[str, Any] = {} if args is None else args
        check_fields(raw, _FIELDS)
        return cls(label_arg(raw, DEFAULT_LABEL), frozenset(values_arg(raw, "models")), mode_arg(raw))

    def is_scarce(self, model: str) -> bool:
        return not self.models or model in self.models


def pod_models(pod: Pod, label: str) -> frozenset[str]:
    """The models the pod asks for (its own labels do not count: a model is hardware it needs)."""
    return asked_values(pod, label)


class _ScarceDeviceBase:
    def __init__(self, args: ScarceDeviceArgs | None = None) -> None:
        self.args = args or ScarceDeviceArgs()

    @classmethod
    def from_args(cls, args: Mapping[str, Any] | None) -> ScarceDevice | ScarceDeviceScore:
        """The Hard (Filter) or Soft (Score) plugin the args' ``mode`` selects."""
        parsed = ScarceDeviceArgs.from_args(args)
        return ScarceDevice(parsed) if parsed.mode == HARD else ScarceDeviceScore(parsed)

    @property
    def name(self) -> str:
        return NAME

    def _kept_from(self, models: frozenset[str], snapshot: Snapshot) -> tuple[LabelColumn, BoolArray | None]:
        """The model label's column, and which of its values are scarce models the pod did not ask for."""
        column = label_column(snapshot, NAME, self.args.label)
        scarce = self.args.is_scarce
        return column, bad_values(column, lambda v: scarce(v) and v not in models)

    def _models(self, state: CycleState, key: str, pod: Pod) -> frozenset[str]:
        models = state.get(key)
        if not isinstance(models, frozenset):
            models = pod_models(pod, self.args.label)
            state.write(key, models)
        return models


class ScarceDevice(_ScarceDeviceBase):
    """``mode: Hard``: PreFilter + Filter; see the module docstring."""

    def __init__(self, args: ScarceDeviceArgs | None = None) -> None:
        super().__init__(args)
        self._status = Status.unresolvable(ERR_REASON, plugin=NAME)

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        state.write(STATE_KEY, pod_models(pod, self.args.label))
        return Status.success()

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        column, kept = self._kept_from(self._models(state, STATE_KEY, pod), snapshot)
        return filter_result(column, kept, self._status)


class ScarceDeviceScore(_ScarceDeviceBase):
    """``mode: Soft``: PreScore + Score; see the module docstring."""

    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> Status:
        state.write(SCORE_STATE_KEY, pod_models(pod, self.args.label))
        return Status.success()

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        return scores_of(*self._kept_from(self._models(state, SCORE_STATE_KEY, pod), snapshot))
