"""NodeResourcesBalancedAllocation Score plugin of kube-scheduler v1.20: favours nodes whose cpu and
memory would be equally used after placing the pod. With ``requested`` the node's pods' non-zero
requests plus the pod's (as LeastAllocated) and ``fraction = requested / allocatable`` in float64 (1
when allocatable is 0): 0 when either fraction is ≥ 1, else ``int64((1 - |cpu - memory|) * 100)``
(docs/rules/scheduler-basic.md#noderesourcesbalancedallocation). No args; the volume term of the alpha
gate ``BalanceAttachedNodeVolumes`` (off by default) is not implemented.

Vectorised through the shared resource-allocation scoring (scheduler.plugins.noderesources_scoring).
Imports: scheduler.framework, scheduler.plugins.noderesources_scoring.
"""

from __future__ import annotations

from typing import Final

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import IntArray, Pod
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.noderesources_scoring import BALANCED_STRATEGY, score_all

NAME: Final = "NodeResourcesBalancedAllocation"


class NodeResourcesBalancedAllocation:
    """Score plugin; see the module docstring."""

    @property
    def name(self) -> str:
        return NAME

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        """Every row's score (kept: the rule costs the same for every row)."""
        return score_all(BALANCED_STRATEGY, state, pod, snapshot)
