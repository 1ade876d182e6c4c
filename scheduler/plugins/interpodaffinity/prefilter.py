"""InterPodAffinity's PreFilter (docs/rules/scheduler-interpodaffinity.md#prefilter): the per-cycle
topology-pair counts Filter reads, as kube-scheduler 1.20.2's ``preFilterState``:

- ``existing``: per (topologyKey, value), the existing pods' required anti-affinity terms that match the
  incoming pod, at the value of the existing pod's node (``topologyToMatchedExistingAntiAffinityTerms``);
- ``affinity``: per (topologyKey, value), the existing pods that match *all* the incoming pod's required
  affinity terms, counted once per term at that term's key on the existing pod's node;
- ``anti``: per (topologyKey, value), the existing pods matching each required anti-affinity term of
  the incoming pod.
Costs O(distinct anti-affinity terms of existing pods) + O(pods the incoming terms match) (PodIndex).
Imports: numpy, scheduler.framework, scheduler.plugins.interpodaffinity.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scheduler.framework.interfaces import Pod
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.interpodaffinity.podindex import PodIndex
from scheduler.plugins.interpodaffinity.terms import (
    PodTerms,
    matches_all,
    parse_pod_terms,
    pod_label_set,
    pod_namespace,
)
from scheduler.plugins.interpodaffinity.topology import NAME, TopologyCounts, add_rows, is_empty


@dataclass(slots=True)
class FilterState:
    terms: PodTerms
    existing: TopologyCounts
    affinity: TopologyCounts
    anti: TopologyCounts
    self_match: bool  # the pod matches all its own required affinity terms (the first pod of a group)


def pod_index(snapshot: Snapshot) -> PodIndex:
    return snapshot.view((NAME, "pods"), PodIndex)


def compute_filter_state(pod: Pod, snapshot: Snapshot, terms: PodTerms | None = None) -> FilterState:
    """The counts for ``pod`` (its parse error is the caller's to check)."""
    terms = parse_pod_terms(pod) if terms is None else terms
    index = pod_index(snapshot)
    ns, labels = pod_namespace(pod), pod_label_set(pod)
    existing: TopologyCounts = {}
    for g in index.anti_groups:
        term = g[1]
        if term.matches(ns, labels):
            add_rows(existing, snapshot, term.topology_key, index.group_rows(g))
    affinity: TopologyCounts = {}
    if terms.required_affinity:
        first, *rest = terms.required_affinity
        matched = index.matching(first)
        for t in rest:
            if not matched:
                break
            ids = {id(e) for e in index.matching(t)}
            matched = [e for e in matched if id(e) in ids]
        rows = np.fromiter((e.row for e in matched), np.int64, len(matched))
        for t in terms.required_affinity:
            add_rows(affinity, snapshot, t.topology_key, rows)
    anti: TopologyCounts = {}
    for t in terms.required_anti:
        matched = index.matching(t)
        add_rows(
            anti, snapshot, t.topology_key, np.fromiter((e.row for e in matched), np.int64, len(matched))
        )
    self_match = matches_all(terms.required_affinity, ns, labels)
    return FilterState(terms, existing, affinity, anti, self_match)


def affinity_empty(state: FilterState) -> bool:
    return is_empty(state.affinity)
