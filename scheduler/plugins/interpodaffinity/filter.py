"""InterPodAffinity's Filter over every row (docs/rules/scheduler-interpodaffinity.md#filter), checks
in kube-scheduler 1.20.2's order, the first failing one deciding the node's status:

1. the incoming pod's required affinity: every term's topology key must be on the node, and each
   term's (key, node value) must have a matching pod — unless no pod anywhere matches (the
   ``affinity`` counts are empty) and the pod matches all its own terms (the first pod of a group).
   Else UNSCHEDULABLE_AND_UNRESOLVABLE;
2. the incoming pod's required anti-affinity: no term's (key, node value) may have a matching pod.
   Else UNSCHEDULABLE;
3. existing pods' required anti-affinity: no (key, node value) of ``existing`` may count a pod.
   Else UNSCHEDULABLE.
Counts are read through the state's value index, so any snapshot works (one node apart, for
preemption and nominated pods). Every status carries two reasons: ``node(s) didn't match pod
affinity/anti-affinity`` and the check's.
Imports: numpy, scheduler.framework, scheduler.plugins.interpodaffinity.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from scheduler.framework.interfaces import BoolArray, FilterResult
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.interpodaffinity.prefilter import FilterState, affinity_empty
from scheduler.plugins.interpodaffinity.topology import NAME, column, is_empty, per_row

ERR_REASON_AFFINITY_NOT_MATCH: Final = "node(s) didn't match pod affinity/anti-affinity"
ERR_REASON_AFFINITY_RULES: Final = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES: Final = "node(s) didn't match pod anti-affinity rules"
ERR_REASON_EXISTING_ANTI_AFFINITY: Final = "node(s) didn't satisfy existing pods anti-affinity rules"

STATUSES: Final = (
    Status.unresolvable(ERR_REASON_AFFINITY_NOT_MATCH, ERR_REASON_AFFINITY_RULES, plugin=NAME),
    Status.unschedulable(ERR_REASON_AFFINITY_NOT_MATCH, ERR_REASON_ANTI_AFFINITY_RULES, plugin=NAME),
    Status.unschedulable(ERR_REASON_AFFINITY_NOT_MATCH, ERR_REASON_EXISTING_ANTI_AFFINITY, plugin=NAME),
)


def _affinity_fails(state: FilterState, snapshot: Snapshot) -> BoolArray | None:
    terms = state.terms.required_affinity
    if not terms:
        return None
    missing = np.zeros(snapshot.n, np.bool_)
    none_there = np.zeros(snapshot.n, np.bool_)
    for key in dict.fromkeys(t.topology_key for t in terms):
        missing |= column(snapshot, key).codes < 0
        none_there |= per_row(state.affinity, snapshot, key, state.index) <= 0
    if affinity_empty(state) and state.self_match:
        return missing  # the first pod of its group: only the topology keys are required
    return missing | none_there


def _anti_fails(state: FilterState, snapshot: Snapshot) -> BoolArray | None:
    if is_empty(state.anti):
        return None
    fails = np.zeros(snapshot.n, np.bool_)
    for key in dict.fromkeys(t.topology_key for t in state.terms.required_anti):
        fails |= per_row(state.anti, snapshot, key, state.index) > 0
    return fails


def _existing_fails(state: FilterState, snapshot: Snapshot) -> BoolArray | None:
    if is_empty(state.existing):
        return None
    fails = np.zeros(snapshot.n, np.bool_)
    for key in state.existing:
        fails |= per_row(state.existing, snapshot, key, state.index) > 0
    return fails


def filter_rows(state: FilterState, snapshot: Snapshot) -> FilterResult:
    n = snapshot.n
    which = np.full(n, -1, np.int32)
    any_failed = False
    # Later checks first, so an earlier check's status overwrites: the first failing check wins.
    for k, check in ((2, _existing_fails), (1, _anti_fails), (0, _affinity_fails)):
        fails = check(state, snapshot)
        if fails is not None and np.count_nonzero(fails):
            which[fails] = k
            any_failed = True
    return FilterResult(which, STATUSES) if any_failed else FilterResult.all_pass(n)
