"""DefaultPreemptionArgs (docs/rules/scheduler-preemption.md#args): how many candidate nodes preemption
looks for at least, as a share of the nodes where it might help (``minCandidateNodesPercentage``,
default 10) and as a count (``minCandidateNodesAbsolute``, default 100), v1beta1
``SetDefaults_DefaultPreemptionArgs``; validated as ``ValidateDefaultPreemptionArgs``: the percentage
in [0, 100], the count ≥ 0, not both zero. The spellings are the same in v1beta1 and v1; other keys are
ignored. Invalid args raise ValueError naming the field and its value.
Imports: the standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE: Final = 10
DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE: Final = 100
INT32_MAX: Final = 2**31 - 1


def _int32(field: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ValueError(f"DefaultPreemptionArgs: {field}={value!r}: must be an integer")
    v = int(value)
    if not -(2**31) <= v <= INT32_MAX:
        raise ValueError(f"DefaultPreemptionArgs: {field}={v}: must fit in 32 bits")
    return v


@dataclass(frozen=True, slots=True)
class DefaultPreemptionArgs:
    min_candidate_nodes_percentage: int = DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE
    min_candidate_nodes_absolute: int = DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE

    def __post_init__(self) -> None:
        pct, absolute = self.min_candidate_nodes_percentage, self.min_candidate_nodes_absolute
        if not 0 <= pct <= 100:
            raise ValueError(
                f"DefaultPreemptionArgs: minCandidateNodesPercentage={pct}: is not in the range [0, 100]"
            )
        if absolute < 0:
            raise ValueError(
                f"DefaultPreemptionArgs: minCandidateNodesAbsolute={absolute}: is not in the range [0, inf)"
            )
        if pct == 0 and absolute == 0:
            raise ValueError(
                "DefaultPreemptionArgs: minCandidateNodesPercentage=0, minCandidateNodesAbsolute=0: "
                "both minCandidateNodesPercentage and minCandidateNodesAbsolute cannot be zero"
            )

    @classmethod
    def from_args(cls, args: Mapping[str, Any] | None) -> DefaultPreemptionArgs:
        args = args or {}
        pct = args.get("minCandidateNodesPercentage")
        absolute = args.get("minCandidateNodesAbsolute")
        return cls(
            DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE
            if pct is None
            else _int32("minCandidateNodesPercentage", pct),
            DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE
            if absolute is None
            else _int32("minCandidateNodesAbsolute", absolute),
        )

    def num_candidates(self, num_nodes: int) -> int:
        """kube's ``calculateNumCandidates``: the percentage of `num_nodes` (int32 arithmetic,
        truncated), at least the absolute count, at most `num_nodes`."""
        n = (num_nodes * self.min_candidate_nodes_percentage) // 100
        n = max(n, self.min_candidate_nodes_absolute)
        return min(n, num_nodes)
