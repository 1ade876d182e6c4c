"""The framework runtime's plumbing (scheduler.framework.runtime): which plugins run at each extension
point of a profile (its lists, or every plugin implementing the point), the score weights checked as
kube's NewFramework checks them, and the adapters that run a per-node Filter or Score plugin over rows.
Imports: numpy, scheduler.framework.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterPlugin, FilterResult, IntArray, Plugin, Pod, ScorePlugin
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import MAX_NODE_SCORE, Status

MAX_TOTAL_SCORE = 2**63 - 1  # kube's framework.MaxTotalScore

__all__ = ["MAX_TOTAL_SCORE", "ExtensionPoints", "filter_rows", "score_rows", "score_weights"]


def score_weights(scores: Sequence[Plugin], weights: Mapping[str, int]) -> list[int]:
    """Each score plugin's weight (1 unless `weights` names it), validated; kube's NewFramework check
    that the weighted sum of every node's scores fits an int64."""
    names = [p.name for p in scores]
    for name, w in weights.items():
        if name not in names:
            raise ValueError(f"scoreWeights.{name}: no such score plugin in the profile")
        if not isinstance(w, int) or isinstance(w, bool) or w < 1:
            raise ValueError(f"scoreWeights.{name}={w!r}: must be a positive integer")
    out = [weights.get(p.name, 1) for p in scores]
    if sum(w * MAX_NODE_SCORE for w in out) > MAX_TOTAL_SCORE:
        raise ValueError("total score of Score plugins could overflow")
    return out


class ExtensionPoints:
    """The plugins of each extension point: those `points` names there, in its order, each checked to
    implement the point; by default every plugin that implements it."""

    def __init__(self, plugins: Sequence[Plugin], points: Mapping[str, Sequence[str]] | None) -> None:
        self.plugins = plugins
        self.by_name = {p.name: p for p in plugins}
        self.points = points

    def get(self, point: str, kind: Any) -> list[Any]:
        if self.points is None or point not in self.points:
            return [p for p in self.plugins if isinstance(p, kind)]
        out = []
        for name in self.points[point]:
            p = self.by_name.get(name)
            if p is None:
                raise ValueError(f"plugins.{point}: {name!r} is not a plugin of the profile")
            if not isinstance(p, kind):
                raise ValueError(
                    f"plugins.{point}: plugin {name!r} does not extend the {point} extension point"
                )
            out.append(p)
        return out


def filter_rows(
    p: FilterPlugin, state: CycleState, pod: Pod, snapshot: Snapshot, rows: IntArray
) -> FilterResult:
    """A per-node Filter over `rows` (the others pass), as one FilterResult."""
    which = np.full(snapshot.n, -1, np.int32)
    found: dict[Status, int] = {}
    for i in rows.tolist():
        st = p.filter(state, pod, snapshot, i)
        if not st.is_success():
            which[i] = found.setdefault(st, len(found))
    return FilterResult(which, tuple(found))


def score_rows(
    p: ScorePlugin, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray
) -> IntArray:
    out = np.zeros(len(feasible), np.int64)
    for k, i in enumerate(feasible.tolist()):
        score, st = p.score(state, pod, snapshot, i)
        if not st.is_success():
            raise RuntimeError(f"{p.name}: score of {snapshot.names[i]}: {st.message()}")
        out[k] = score
    return out
