"""Oracle for InterPodAffinity: kube-scheduler 1.20.2's rules node by node over the snapshot's
NodeInfos, in plain Python — every pod of every node visited each cycle, (topologyKey, value) maps as
dicts, Go's loops as written (docs/rules/scheduler-interpodaffinity.md). Parsing a pod's terms is the
production code's (``parse_pod_terms``; its unit tests pin it); matching, counting and scoring are
restated here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from apis.jsonfields import as_mapping
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import IntArray, Pod
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import MAX_NODE_SCORE, Status
from scheduler.plugins.interpodaffinity.terms import AffinityTerm, PodTerms, parse_pod_terms

NAME = "InterPodAffinity"
Pair = tuple[str, str]


def _labels(obj: Mapping[str, Any]) -> dict[str, str]:
    raw = as_mapping(as_mapping(obj.get("metadata")).get("labels"))
    return {str(k): v if isinstance(v, str) else "" for k, v in raw.items()}


def _ns(pod: Mapping[str, Any]) -> str:
    v = as_mapping(pod.get("metadata")).get("namespace")
    return v if isinstance(v, str) else ""


def matches(pod: Mapping[str, Any], term: AffinityTerm) -> bool:
    if _ns(pod) not in term.namespaces or term.selector is None:
        return False
    labels = _labels(pod)
    sel = term.selector
    if any(labels.get(k) != v for k, v in sel.match_labels.items()):
        return False
    for r in sel.match_expressions:
        has = r.key in labels
        ok = {
            "In": has and labels.get(r.key) in r.values,
            "NotIn": not has or labels.get(r.key) not in r.values,
            "Exists": has,
            "DoesNotExist": not has,
        }[r.operator]
        if not ok:
            return False
    return True


def matches_all(pod: Mapping[str, Any], terms: tuple[AffinityTerm, ...]) -> bool:
    return bool(terms) and all(matches(pod, t) for t in terms)


@dataclass
class OracleFilterState:
    terms: PodTerms
    existing: dict[Pair, int] = field(default_factory=dict)
    affinity: dict[Pair, int] = field(default_factory=dict)
    anti: dict[Pair, int] = field(default_factory=dict)


class InterPodAffinityOracle:
    name = NAME

    def __init__(self, hard_pod_affinity_weight: int = 1) -> None:
        self.hard = hard_pod_affinity_weight

    # --- filter -------------------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        terms = parse_pod_terms(pod)
        if terms.error is not None:
            return Status.unresolvable(f"parsing pod: {terms.error}", plugin=NAME)
        s = OracleFilterState(terms)
        for info in snapshot.infos:
            node_labels = _labels(info.node)
            for pi in info.pods.values():
                existing = parse_pod_terms(pi.pod)
                for t in existing.required_anti:
                    if matches(pod, t) and t.topology_key in node_labels:
                        pair = (t.topology_key, node_labels[t.topology_key])
                        s.existing[pair] = s.existing.get(pair, 0) + 1
                if matches_all(pi.pod, terms.required_affinity):
                    for t in terms.required_affinity:
                        if t.topology_key in node_labels:
                            pair = (t.topology_key, node_labels[t.topology_key])
                            s.affinity[pair] = s.affinity.get(pair, 0) + 1
                for t in terms.required_anti:
                    if matches(pi.pod, t) and t.topology_key in node_labels:
                        pair = (t.topology_key, node_labels[t.topology_key])
                        s.anti[pair] = s.anti.get(pair, 0) + 1
        state.write("oracle" + NAME, s)
        return Status.success()

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> Status:
        s = state.get("oracle" + NAME)
        if not isinstance(s, OracleFilterState):
            self.pre_filter(state, pod, snapshot)
            s = state.get("oracle" + NAME)
            assert isinstance(s, OracleFilterState)
        labels = _labels(snapshot.infos[i].node)
        general = "node(s) didn't match pod affinity/anti-affinity"
        if not self._affinity_ok(s, pod, labels):
            return Status.unresolvable(general, "node(s) didn't match pod affinity rules", plugin=NAME)
        for t in s.terms.required_anti:
            if t.topology_key in labels and s.anti.get((t.topology_key, labels[t.topology_key]), 0) > 0:
                return Status.unschedulable(
                    general, "node(s) didn't match pod anti-affinity rules", plugin=NAME
                )
        for pair in labels.items():
            if s.existing.get(pair, 0) > 0:
                return Status.unschedulable(
                    general, "node(s) didn't satisfy existing pods anti-affinity rules", plugin=NAME
                )
        return Status.success()

    @staticmethod
    def _affinity_ok(s: OracleFilterState, pod: Pod, labels: dict[str, str]) -> bool:
        pods_exist = True
        for t in s.terms.required_affinity:
            if t.topology_key not in labels:
                return False
            if s.affinity.get((t.topology_key, labels[t.topology_key]), 0) <= 0:
                pods_exist = False
        if pods_exist:
            return True
        # the first pod of a group that has affinity to itself
        return not s.affinity and matches_all(pod, s.terms.required_affinity)

    # --- score --------------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> Status:
        terms = parse_pod_terms(pod)
        if terms.error is not None:
            return Status.error(f"parsing pod: {terms.error}", plugin=NAME)
        topo: dict[str, dict[str, int]] = {}

        def add(
            term: AffinityTerm, weight: int, target: Mapping[str, Any], node_labels: dict[str, str]
        ) -> None:
            if matches(target, term) and term.topology_key in node_labels:
                by_value = topo.setdefault(term.topology_key, {})
                value = node_labels[term.topology_key]
                by_value[value] = by_value.get(value, 0) + _int32(weight)

        for info in snapshot.infos:
            node_labels = _labels(info.node)
            for pi in info.pods.values():
                for w in terms.preferred_affinity:
                    add(w.term, w.weight, pi.pod, node_labels)
                for w in terms.preferred_anti:
                    add(w.term, -w.weight, pi.pod, node_labels)
                existing = parse_pod_terms(pi.pod)
                if self.hard > 0:
                    for t in existing.required_affinity:
                        add(t, self.hard, pod, node_labels)
                for w in existing.preferred_affinity:
                    add(w.term, w.weight, pod, node_labels)
                for w in existing.preferred_anti:
                    add(w.term, -w.weight, pod, node_labels)
        state.write("oracleScore" + NAME, topo)
        return Status.success()

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> tuple[int, Status]:
        topo = state.get("oracleScore" + NAME)
        if not isinstance(topo, dict):
            self.pre_score(state, pod, snapshot, snapshot_rows(snapshot))
            topo = state.get("oracleScore" + NAME)
            assert isinstance(topo, dict)
        labels = _labels(snapshot.infos[i].node)
        total = 0
        for key, by_value in topo.items():
            if key in labels:
                total += by_value.get(labels[key], 0)
        return total, Status.success()

    def normalize_scores(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        hi, lo = 0, 0
        for s in scores.tolist():
            hi, lo = max(hi, s), min(lo, s)
        diff = hi - lo
        for k, s in enumerate(scores.tolist()):
            f = float(MAX_NODE_SCORE) * (float(s - lo) / float(diff)) if diff > 0 else 0.0
            scores[k] = int(f)
        return Status.success()


def _int32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def snapshot_rows(snapshot: Snapshot) -> IntArray:
    return np.arange(snapshot.n, dtype=np.int64)
