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
Imports: numpy, scheduler.framework, scheduler.plugins (poollabels, nodeaffinity_terms).
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
)

NAME: Final = "NodePool"
DEFAULT_LABEL: Final = "node.koordinator.sh/pool"
ERR_REASON: Final = "node(s) belong to a private pool the pod did not ask for"
STATE_KEY: Final = "PreFilter" + NAME
SCORE_STATE_KEY: Final = "PreScore" + NAME
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


class _NodePoolBase:
    def __init__(self, args: NodePoolArgs | None = None) -> None:
        self.args = args or NodePoolArgs()

    @classmethod
    def from_args(cls, args: Mapping[str, Any] | None) -> NodePool | NodePoolScore:
        """The Hard (Filter) or Soft (Score) plugin the args' ``mode`` selects."""
        parsed = NodePoolArgs.from_args(args)
        return NodePool(parsed) if parsed.mode == HARD else NodePoolScore(parsed)

    @property
    def name(self) -> str:
        return NAME

    def _outside(self, pools: frozenset[str], snapshot: Snapshot) -> tuple[LabelColumn, BoolArray | None]:
        """The pool label's column, and which of its values are pools the pod did not ask for."""
        column = label_column(snapshot, NAME, self.args.label)
        return column, bad_values(column, lambda v: v not in pools)

    def _pools(self, state: CycleState, key: str, pod: Pod) -> frozenset[str]:
        pools = state.get(key)
        if not isinstance(pools, frozenset):
            pools = pod_pools(pod, self.args.label)
            state.write(key, pools)
        return pools


class NodePool(_NodePoolBase):
    """``mode: Hard``: PreFilter + Filter; see the module docstring."""

    def __init__(self, args: NodePoolArgs | None = None) -> None:
        super().__init__(args)
        self._status = Status.unresolvable(ERR_REASON, plugin=NAME)

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        state.write(STATE_KEY, pod_pools(pod, self.args.label))
        return Status.success()

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        column, outside = self._outside(self._pools(state, STATE_KEY, pod), snapshot)
        return filter_result(column, outside, self._status)


class NodePoolScore(_NodePoolBase):
    """``mode: Soft``: PreScore + Score; see the module docstring."""

    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> Status:
        state.write(SCORE_STATE_KEY, pod_pools(pod, self.args.label))
        return Status.success()

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        return scores_of(*self._outside(self._pools(state, SCORE_STATE_KEY, pod), snapshot))
