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
Imports: scheduler.plugins (labelrule, poollabels).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from scheduler.framework.interfaces import Pod
from scheduler.plugins.labelrule import HardLabelRule, LabelRule, SoftLabelRule
from scheduler.plugins.poollabels import (
    HARD,
    asked_values,
    check_fields,
    label_arg,
    mode_arg,
    values_arg,
)

NAME: Final = "ScarceDevice"
DEFAULT_LABEL: Final = "node.koordinator.sh/gpu-model"
ERR_REASON: Final = "node(s) have a scarce device model the pod did not ask for"
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


class _ScarceDeviceBase(LabelRule):
    NAME = NAME
    REASON = ERR_REASON

    def __init__(self, args: ScarceDeviceArgs | None = None) -> None:
        self.args = args or ScarceDeviceArgs()
        super().__init__(self.args.label)

    @classmethod
    def from_args(cls, args: Mapping[str, Any] | None) -> ScarceDevice | ScarceDeviceScore:
        """The Hard (Filter) or Soft (Score) plugin the args' ``mode`` selects."""
        parsed = ScarceDeviceArgs.from_args(args)
        return ScarceDevice(parsed) if parsed.mode == HARD else ScarceDeviceScore(parsed)

    def asked(self, pod: Pod) -> frozenset[str]:
        return pod_models(pod, self.args.label)

    def excluded(self, value: str, asked: frozenset[str]) -> bool:
        return self.args.is_scarce(value) and value not in asked


class ScarceDevice(_ScarceDeviceBase, HardLabelRule):
    """``mode: Hard``: PreFilter + Filter; see the module docstring."""


class ScarceDeviceScore(_ScarceDeviceBase, SoftLabelRule):
    """``mode: Soft``: PreScore + Score; see the module docstring."""
