"""InterPodAffinity's PreScore, Score and NormalizeScore (docs/rules/scheduler-interpodaffinity.md#score),
as kube-scheduler 1.20.2's ``topologyScore``: per (topologyKey, value) the sum of

- each preferred affinity term of the incoming pod (+weight) and preferred anti-affinity term (-weight)
  over the existing pods it matches, at the existing pod's node value;
- symmetrically, each existing pod's required affinity term that the incoming pod matches
  (+``hardPodAffinityWeight``, when above 0), preferred affinity term (+weight) and preferred
  anti-affinity term (-weight).
Weights are int32 products (``weight * multiplier``), sums int64. A node's score is the sum over the
topology keys it carries of its value's entry; normalisation maps the feasible nodes' scores to
``int64(100 * (s - min) / (max - min))`` in float64, with min ≤ 0 ≤ max (both start at 0), all 0 when
max = min.
Imports: numpy, scheduler.framework, scheduler.plugins.interpodaffinity.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scheduler.framework.interfaces import IntArray, Pod, uniform_scores
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import MAX_NODE_SCORE
from scheduler.plugins.interpodaffinity.podindex import HARD, Existing
from scheduler.plugins.interpodaffinity.prefilter import pod_index
from scheduler.plugins.interpodaffinity.terms import PodTerms, int32, pod_label_set, pod_namespace
from scheduler.plugins.interpodaffinity.topology import TopologyCounts, add_rows, per_row


@dataclass(slots=True)
class ScoreState:
    scores: TopologyCounts  # topology key → summed weight per value code

    @property
    def empty(self) -> bool:
        return not self.scores


def _rows(found: list[Existing]) -> IntArray:
    return np.fromiter((e.row for e in found), np.int64, len(found))


def compute_score_state(pod: Pod, terms: PodTerms, snapshot: Snapshot, hard_weight: int) -> ScoreState:
    index = pod_index(snapshot)
    scores: TopologyCounts = {}
    for w in terms.preferred_affinity:
        add_rows(scores, snapshot, w.term.topology_key, _rows(index.matching(w.term)), int32(w.weight))
    for w in terms.preferred_anti:
        add_rows(scores, snapshot, w.term.topology_key, _rows(index.matching(w.term)), int32(-w.weight))
    ns, labels = pod_namespace(pod), pod_label_set(pod)
    for g in index.score_matching(ns, labels, hard_weight > 0):
        kind, term, weight = g
        weight = hard_weight if kind == HARD else weight
        add_rows(scores, snapshot, term.topology_key, index.group_rows(g), weight)
    return ScoreState(scores)


def score_rows(state: ScoreState, snapshot: Snapshot) -> IntArray:
    """Every row's raw score (a kept read-only zeros array when nothing scores)."""
    n = snapshot.n
    if state.empty:
        return uniform_scores(n, 0)
    total = np.zeros(n, np.int64)
    for key in state.scores:
        total += per_row(state.scores, snapshot, key)
    return total


def normalize(scores: IntArray) -> None:
    """In place, as kube's NormalizeScore (float64, truncated toward zero)."""
    if not len(scores):
        return
    hi = max(int(scores.max()), 0)
    lo = min(int(scores.min()), 0)
    diff = hi - lo
    if diff <= 0:
        scores[:] = 0
        return
    f = float(MAX_NODE_SCORE) * ((scores - lo).astype(np.float64) / np.float64(diff))
    scores[:] = f.astype(np.int64)
