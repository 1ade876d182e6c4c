"""kube-scheduler v1.20's separate resource-allocation Score plugins, each a thin shell over the one
scoring implementation (scheduler.plugins.noderesources_scoring) with its args
(docs/rules/scheduler-basic.md#noderesourcesleastallocated-noderesourcesmostallocated-requestedtocapacityratio):

- ``NodeResourcesLeastAllocated`` (``resources``, default cpu and memory with weight 1),
- ``NodeResourcesMostAllocated`` (same args),
- ``RequestedToCapacityRatio`` (``shape`` required, ``resources``).

Score only (no NormalizeScore): vectorised, every row's score at once.
Imports: standard library, scheduler.framework, scheduler.plugins (noderesources_args,
noderesources_scoring).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Self

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import IntArray, Pod
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.noderesources_args import (
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    Strategy,
    allocated_strategy,
    requested_to_capacity_ratio_strategy,
)
from scheduler.plugins.noderesources_scoring import score_all

LEAST_ALLOCATED_NAME: Final = "NodeResourcesLeastAllocated"
MOST_ALLOCATED_NAME: Final = "NodeResourcesMostAllocated"
REQUESTED_TO_CAPACITY_RATIO_NAME: Final = "RequestedToCapacityRatio"


class _AllocationScore:
    """A Score plugin of one strategy; subclasses name it and decode its args."""

    NAME = ""

    def __init__(self, strategy: Strategy) -> None:
        self.strategy = strategy

    @property
    def name(self) -> str:
        return self.NAME

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        """Every row's score (kept: the rule costs the same for every row)."""
        return score_all(self.strategy, state, pod, snapshot)


class NodeResourcesLeastAllocated(_AllocationScore):
    NAME = LEAST_ALLOCATED_NAME

    def __init__(self, strategy: Strategy | None = None) -> None:
        super().__init__(strategy or Strategy(LEAST_ALLOCATED))

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> Self:
        return cls(allocated_strategy(args, LEAST_ALLOCATED))


class NodeResourcesMostAllocated(_AllocationScore):
    NAME = MOST_ALLOCATED_NAME

    def __init__(self, strategy: Strategy | None = None) -> None:
        super().__init__(strategy or Strategy(MOST_ALLOCATED))

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> Self:
        return cls(allocated_strategy(args, MOST_ALLOCATED))


class RequestedToCapacityRatio(_AllocationScore):
    """No default constructor: kube requires a shape."""

    NAME = REQUESTED_TO_CAPACITY_RATIO_NAME

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> Self:
        return cls(requested_to_capacity_ratio_strategy(args))
