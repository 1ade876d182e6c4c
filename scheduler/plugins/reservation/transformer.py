"""Which reservations a pod may use on a node (``checkReservationMatchedOrIgnored``) and the node's
reservation state with the restored requested resources (docs/rules/scheduler-reservation.md#matching,
docs/rules/scheduler-reservation.md#restoration).
Imports: the standard library, apis (pod, reservation, reservation_pod), scheduler.plugins
(nodeaffinity_terms), this package's info.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from apis.pod import ResourceList
from apis.reservation_pod import ReservationAffinity, exact_match, match_owners, tolerations_tolerate
from scheduler.framework.units import to_values
from scheduler.plugins.nodeaffinity_terms import (
    DOES_NOT_EXIST,
    EXISTS,
    FIELD_NODE_NAME,
    GT,
    IN,
    LT,
    NOT_IN,
    LabelReq,
    Term,
    parse_int64,
    parse_term,
)
from scheduler.plugins.reservation.info import ReservationInfo

DO_NOT_SCHEDULE = frozenset({"NoSchedule", "NoExecute"})


def _label_matches(req: LabelReq, labels: Mapping[str, str]) -> bool:
    present = req.key in labels
    value = labels.get(req.key, "")
    if req.op == IN:
        return present and value in req.values
    if req.op == NOT_IN:
        return not present or value not in req.values
    if req.op == EXISTS:
        return present
    if req.op == DOES_NOT_EXIST:
        return not present
    parsed = parse_int64(value) if present else None
    if parsed is None:
        return False
    return parsed > req.bound if req.op == GT else req.op == LT and parsed < req.bound


def _term_matches(term: Term, labels: Mapping[str, str], node_name: str) -> bool:
    if term.labels is not None and not all(_label_matches(r, labels) for r in term.labels):
        return False
    if term.fields is not None:
        for f in term.fields:
            value = node_name if f.key == FIELD_NODE_NAME else ""
            if (value == f.value) != f.equal:
                return False
    return True


def affinity_matches(affinity: ReservationAffinity, labels: Mapping[str, str], node_name: str) -> bool:
    """The selector and the required terms (ORed; an empty or invalid term selects nothing) against the
    fake node's labels."""
    if any(labels.get(k) != v for k, v in affinity.selector.items()):
        return False
    if affinity.terms is None:
        return True
    for raw in affinity.terms:
        term = parse_term(raw)
        if isinstance(term, Term) and _term_matches(term, labels, node_name):
            return True
    return False


@dataclass(frozen=True)
class PodMatchFacts:
    """What matching needs of the pod: the pod itself (owners), its affinity, its exact-match names, its
    requests and whether it ignores reservations."""

    pod: Mapping[str, Any]
    affinity: ReservationAffinity
    exact_names: Sequence[str] | None
    requests: ResourceList
    ignored: bool


def is_matched(
    facts: PodMatchFacts, r: ReservationInfo, node_labels: Mapping[str, str], node_name: str
) -> bool:
    """Rules 1-7 for one matchable reservation on the node."""
    if facts.ignored:
        return True
    if r.matchers is None or not match_owners(facts.pod, r.matchers):
        return False
    aff = facts.affinity
    if aff.name:
        return aff.name == r.name and exact_match(facts.requests, r.allocatable, facts.exact_names)
    spec = r.reservation
    if (spec.unschedulable or spec.deleting) and not aff.tolerate_unschedulable:
        return False
    for t in spec.taints:
        effect = t.get("effect", "")
        if effect in DO_NOT_SCHEDULE and not tolerations_tolerate(
            aff.tolerations, t.get("key", ""), t.get("value", ""), effect
        ):
            return False
    if aff.present and not affinity_matches(aff, {**node_labels, **spec.labels}, node_name):
        return False
    return exact_match(facts.requests, r.allocatable, facts.exact_names)


@dataclass
class NodeState:
    """A node's reservation state for one pod: matched (or ignored) reservations, the unmatched ones
    with owners, the node's requested resources after restoration and Σ allocated of the matched."""

    matched: list[ReservationInfo] = field(default_factory=list)
    unmatched: list[ReservationInfo] = field(default_factory=list)
    requested: dict[str, int] = field(default_factory=dict)
    reserved_allocated: dict[str, int] = field(default_factory=dict)


def _minus(a: dict[str, int], b: ResourceList) -> None:
    for n, v in to_values(b).items():
        a[n] = a.get(n, 0) - v


def node_state(
    facts: PodMatchFacts,
    infos: Sequence[ReservationInfo],
    node_name: str,
    node_labels: Mapping[str, str],
    node_requested: Mapping[str, int],
) -> NodeState | None:
    """The state of a node holding ``infos`` (its matchable reservations), or None when the node gets
    none: no matched reservation and none with owners, or with affinity no matched one."""
    state = NodeState()
    for r in infos:
        if is_matched(facts, r, node_labels, node_name):
            state.matched.append(r)
        elif r.allocated_pods > 0:
            state.unmatched.append(r)
    if not state.matched and (not state.unmatched or facts.affinity.present):
        return None
    state.requested = dict(node_requested)
    for r in state.unmatched:
        _minus(state.requested, r.allocated)
    for r in state.matched:
        for n, v in to_values(r.allocated).items():
            state.reserved_allocated[n] = state.reserved_allocated.get(n, 0) + v
    return state
