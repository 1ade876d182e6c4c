"""NodePool: private node pools (docs/rules/scheduler-nodepool.md#nodepool), koord's own plugin.

A node carrying the args' ``label`` (default ``node.koordinator.sh/pool``) is in the private pool named
by its value; a node without it is in no pool. A pod asks for the pools its nodeSelector, required node
affinity (``In``) or own label names (docs/rules/scheduler-nodepool.md#asking-for-a-value).

- ``mode: Hard`` (default; a PreFilter + Filter plugin): a pool node rejects a pod that did not ask for
  its pool, UNSCHEDULABLE_AND_UNRESOLVABLE (no preemption changes a label), reason
  ``node(s) belong to a private pool the pod did not ask for``; nodes in no pool accept everyone.
- ``mode: Soft`` (a PreScore + Score plugin, no filter): 100 on nodes the pod may use without taking
  someone's pool (no pool, or one it asked for), 0 on other pools' nodes, so those are used last. The
  scores are already 0 or 100: there is no NormalizeScore.

The two modes are two classes (``NodePool.from_args`` picks one), so a Soft plugin has no Filter and a
Hard one no Score: the profile puts each only where it acts. Vectorised: the pod's asked pools are
computed once per cycle (PreFilter/PreScore), then one lookup per distinct pool value and one gather
over the rows of a label column view.
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
)

NAME: Final = "NodePool"
DEFAULT_LABEL: Final = "node.koordinator.sh/pool"
ERR_REASON: Final = "node(s) belong to a private pool the pod did not ask for"
_FIELDS: Final = frozenset({"label", "mode"})


@dataclass(frozen=True, slots=True)
class NodePoolArgs:
    label: str = DEFAULT_LABEL
    mode: str = HARD

    @classmethod
    def from_args(cls, args: Mapping[str, Any] | None) -> NodePoolArgs:
        """Defaults for absent (or null) fields; ValueError names the bad field and its value."""
        raw: Mapping[str, Any] = {} if args is None else args
        check_fields(raw, _FIELDS)
        return cls(label_arg(raw, DEFAULT_LABEL), mode_arg(raw))


def pod_pools(pod: Pod, label: str) -> frozenset[str]:
    """The pools the pod asks for (its own label counts)."""
    return asked_values(pod, label, own_label=True)


class _NodePoolBase(LabelRule):
    NAME = NAME
    REASON = ERR_REASON

    def __init__(self, args: NodePoolArgs | None = None) -> None:
        self.args = args or NodePoolArgs()
        super().__init__(self.args.label)

    @classmethod
    def from_args(cls, args: Mapping[str, Any] | None) -> NodePool | NodePoolScore:
        """The Hard (Filter) or Soft (Score) plugin the args' ``mode`` selects."""
        parsed = NodePoolArgs.from_args(args)
        return NodePool(parsed) if parsed.mode == HARD else NodePoolScore(parsed)

    def asked(self, pod: Pod) -> frozenset[str]:
        return pod_pools(pod, self.args.label)

    def excluded(self, value: str, asked: frozenset[str]) -> bool:
        return value not in asked


class NodePool(_NodePoolBase, HardLabelRule):
    """``mode: Hard``: PreFilter + Filter; see the module docstring."""


class NodePoolScore(_NodePoolBase, SoftLabelRule):
    """``mode: Soft``: PreScore + Score; see the module docstring."""
