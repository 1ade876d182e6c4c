"""InterPodAffinity's PreFilter (docs/rules/scheduler-interpodaffinity.md#prefilter): the per-cycle
topology-pair counts Filter reads, as kube-scheduler 1.20.2's ``preFilterState``:

- ``existing``: per (topologyKey, value), the existing pods' required anti-affinity terms that match the
  incoming pod, at the value of the existing pod's node (``topologyToMatchedExistingAntiAffinityTerms``);
- ``affinity``: per (topologyKey, value), the existing pods that match *all* the incoming pod's required
  affinity terms, counted once per term at that term's key on the existing pod's node;
- ``anti``: per (topologyKey, value), the existing pods matching each required anti-affinity term of
  the incoming pod.
Costs O(existing pods' anti-affinity term groups that can match the incoming pod's labels) + O(pods the
incoming terms match) (PodIndex, TermIndex).
``update_with_pod`` is kube's ``updateWithPod``, for the PreFilter extensions
(docs/rules/scheduler-interpodaffinity.md#prefilter-extensions): a pod added to (+1) or removed from
(-1) a node changes the three counts at that node's values, on a state ``clone()`` made first.
Imports: numpy, scheduler.framework, scheduler.plugins.interpodaffinity.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from apis.kubeobjects import Node
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
from scheduler.plugins.interpodaffinity.topology import (
    NAME,
    Index,
    TopologyCounts,
    add_rows,
    bump,
    columns_index,
    is_empty,
)
from scheduler.plugins.nodeaffinity_terms import node_labels


@dataclass(slots=True)
class FilterState:
    """The counts by value code; ``index`` gives each key's codes, so the state reads on any snapshot.
    Arrays and indexes are never written once made (``bump`` replaces them): ``clone`` copies the maps
    only."""

    terms: PodTerms
    existing: TopologyCounts
    affinity: TopologyCounts
    anti: TopologyCounts
    self_match: bool  # the pod matches all its own required affinity terms (the first pod of a group)
    pod: Pod | None = None  # the incoming pod
    index: Index = field(default_factory=dict)

    def clone(self) -> FilterState:
        return FilterState(
            self.terms,
            dict(self.existing),
            dict(self.affinity),
            dict(self.anti),
            self.self_match,
            self.pod,
            dict(self.index),
        )

    def update_with_pod(self, updated: Pod, node: Node, delta: int) -> None:
        """kube's ``updateWithPod``: ``updated`` added to (``delta`` 1) or removed from (-1) ``node``."""
        labels = node_labels(node)
        ns, pod_labels = pod_namespace(updated), pod_label_set(updated)
        if self.pod is not None:
            in_ns, in_labels = pod_namespace(self.pod), pod_label_set(self.pod)
            for t in parse_pod_terms(updated).required_anti:
                if t.matches(in_ns, in_labels) and t.topology_key in labels:
                    bump(self.existing, self.index, t.topology_key, labels[t.topology_key], delta)
        if matches_all(self.terms.required_affinity, ns, pod_labels):
            for t in self.terms.required_affinity:
                if t.topology_key in labels:
                    bump(self.affinity, self.index, t.topology_key, labels[t.topology_key], delta)
        for t in self.terms.required_anti:
            if t.matches(ns, pod_labels) and t.topology_key in labels:
                bump(self.anti, self.index, t.topology_key, labels[t.topology_key], delta)


def pod_index(snapshot: Snapshot) -> PodIndex:
    return snapshot.view((NAME, "pods"), PodIndex)


def compute_filter_state(pod: Pod, snapshot: Snapshot, terms: PodTerms | None = None) -> FilterState:
    """The counts for ``pod`` (its parse error is the caller's to check)."""
    terms = parse_pod_terms(pod) if terms is None else terms
    index = pod_index(snapshot)
    ns, labels = pod_namespace(pod), pod_label_set(pod)
    existing: TopologyCounts = {}
    for g in index.anti_matching(ns, labels):
        add_rows(existing, snapshot, g[1].topology_key, index.group_rows(g))
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
    codes: Index = {}
    for counts in (existing, affinity, anti):
        columns_index(snapshot, counts, codes)
    return FilterState(terms, existing, affinity, anti, self_match, pod, codes)


def affinity_empty(state: FilterState) -> bool:
    return is_empty(state.affinity)
