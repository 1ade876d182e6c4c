"""``koord simulate`` for kind ``Reservation``
(docs/rules/scheduler-reservation.md#koord-simulate-kind-reservation): one operation per file, each
running the very functions the plugin and the controller run. Bad input raises ValueError naming the
field. Pure: no clock is read (``now`` is the scenario's).
Imports: the standard library, apis (objectcheck, pod, quantity, reservation, reservation_pod, rfc3339),
scheduler.framework (status, units), this package.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping
from typing import Any, Final

from apis.objectcheck import as_node, as_pod, show
from apis.pod import ResourceList, pod_requests
from apis.quantity import Quantity, format_resource_list
from apis.reservation import (
    Reservation,
    is_active,
    is_available,
    is_expired,
    is_failed,
    is_succeeded,
    parse_reservation,
    resources,
    set_unschedulable,
)
from apis.reservation_pod import (
    exact_match,
    exact_match_names,
    is_reservation_ignored,
    new_reserve_pod,
    parse_affinity,
    reservation_matches_owner,
    restricted_resources,
    scheduler_name,
)
from apis.rfc3339 import parse_rfc3339
from scheduler.framework.status import Code, Status
from scheduler.framework.units import MILLI_RESOURCES, to_values
from scheduler.plugins.nodeaffinity_terms import node_labels
from scheduler.plugins.reservation.controller import sync
from scheduler.plugins.reservation.filtering import (
    Ignored,
    NodeFacts,
    PodFacts,
    filter_normal_pod,
    filter_reserve_pod,
)
from scheduler.plugins.reservation.info import ReservationInfo, info_with_pods
from scheduler.plugins.reservation.scoring import (
    MOST_PREFERRED_SCORE,
    default_normalize,
    nominate,
    preferred_node,
    score_reservation,
)
from scheduler.plugins.reservation.transformer import PodMatchFacts, node_state

EPOCH: Final = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
CODES: Final = {
    Code.SUCCESS: "Success",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
}

Scenario = Mapping[str, Any]


# --- input -------------------------------------------------------------------------------------------
def _bool(s: Scenario, key: str, default: bool = False) -> bool:
    value = s.get(key, default)
    if not isinstance(value, bool):
        raise ValueError(f"{key}: expected a boolean, got {show(value)}")
    return value


def _string(s: Scenario, key: str) -> str:
    value = s.get(key, "")
    if not isinstance(value, str):
        raise ValueError(f"{key}: expected a string, got {show(value)}")
    return value


def _int(s: Scenario, key: str) -> int:
    value = s.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**31:
        raise ValueError(f"{key}: expected a non-negative integer below 2^31, got {show(value)}")
    return value


def _names(value: object, where: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where}: expected a list of strings, got {show(value)}")
    return value


def _names_of(value: object, where: str, key: str) -> list[str] | None:
    """``{key: [names]}`` or null."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected an object or null, got {show(value)}")
    return _names(value.get(key), f"{where}.{key}") or []


def _list(s: Scenario, key: str) -> list[Any]:
    value = s.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{key}: expected a list, got {show(value)}")
    return value


def _time(value: object, where: str) -> _dt.datetime:
    if value is None:
        return EPOCH
    try:
        return parse_rfc3339(value)
    except ValueError as e:
        raise ValueError(f"{where}={show(value)}: {e}") from None


def _reservation(s: Scenario, key: str = "reservation") -> Reservation:
    return parse_reservation(s.get(key), key)


def _entry(raw: object, where: str) -> ReservationInfo:
    """``{"reservation", "assignedPods"?, "allocated"?}`` as the plugin's ReservationInfo."""
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected an object, got {show(raw)}")
    r = parse_reservation(raw.get("reservation"), f"{where}.reservation")
    pods = raw.get("assignedPods")
    if pods is not None and not isinstance(pods, list):
        raise ValueError(f"{where}.assignedPods: expected a list, got {show(pods)}")
    info = info_with_pods(r, [as_pod(p, f"{where}.assignedPods[{i}]") for i, p in enumerate(pods or [])])
    if raw.get("allocated") is not None:
        info.allocated = resources(raw["allocated"], f"{where}.allocated")
    return info


def _status(st: Status) -> dict[str, Any]:
    return {"status": CODES[st.code], "reasons": list(st.reasons)}


def _values(s: Scenario, key: str) -> dict[str, int]:
    return to_values(resources(s.get(key), key))


# --- operations ----------------------------------------------------------------------------------------
def _op_status(s: Scenario) -> dict[str, Any]:
    r = None if s.get("reservation") is None else _reservation(s)
    return {
        "active": is_active(r), "available": is_available(r), "succeeded": is_succeeded(r),
        "failed": is_failed(r), "expired": is_expired(r),
    }  # fmt: skip


def _op_match_owner(s: Scenario) -> dict[str, Any]:
    return {"matched": reservation_matches_owner(as_pod(s.get("pod"), "pod"), _reservation(s))}


def _op_reserve_pod(s: Scenario) -> dict[str, Any]:
    r = _reservation(s)
    return {"reservePod": new_reserve_pod(r), "schedulerName": scheduler_name(r)}


def _op_requests(s: Scenario) -> dict[str, Any]:
    return {"requests": format_resource_list(ReservationInfo.of(_reservation(s)).allocatable)}


def _op_exact_match(s: Scenario) -> dict[str, Any]:
    pod = resources(s.get("podRequests"), "podRequests")
    alloc = resources(s.get("reservationAllocatable"), "reservationAllocatable")
    names = _names_of(s.get("exactMatchSpec"), "exactMatchSpec", "resourceNames")
    return {"matched": exact_match(pod, alloc, names)}


def _op_restricted(s: Scenario) -> dict[str, Any]:
    names = _names(s.get("resourceNames"), "resourceNames") or []
    options = _names_of(s.get("options"), "options", "resources")
    return {"resourceNames": restricted_resources(names, options)}


def _op_affinity(s: Scenario) -> dict[str, Any]:
    pod = as_pod(s.get("pod"), "pod")
    try:
        aff = parse_affinity(pod)
    except ValueError as e:
        raise ValueError(f"pod.{e}") from None
    return {"hasAffinity": aff.present, "tolerateUnschedulable": aff.tolerate_unschedulable}


def _op_set_unschedulable(s: Scenario) -> dict[str, Any]:
    r = set_unschedulable(_reservation(s), _string(s, "message"), "")
    keys = ("type", "status", "reason", "message")
    return {"phase": r.phase, "conditions": [{k: c.get(k, "") for k in keys} for c in r.conditions]}


def _ignored(s: Scenario) -> Ignored:
    args = s.get("args")
    if args is None:
        return Ignored()
    if not isinstance(args, dict):
        raise ValueError(f"args: expected an object, got {show(args)}")
    names = _names(args.get("ignoredResources"), "args.ignoredResources") or []
    groups = _names(args.get("ignoredResourceGroups"), "args.ignoredResourceGroups") or []
    return Ignored(frozenset(names), frozenset(groups))


def _op_filter(s: Scenario) -> dict[str, Any]:
    node = as_node(s.get("node"), "node")
    pod = as_pod(s.get("pod"), "pod") if s.get("pod") is not None else {}
    requests = (
        resources(s["podRequests"], "podRequests") if s.get("podRequests") is not None else pod_requests(pod)
    )
    facts = PodFacts(
        requests, _bool(s, "hasAffinity"), _string(s, "reservationName"), is_reservation_ignored(pod)
    )
    matched = [_entry(e, f"reservations[{i}]") for i, e in enumerate(_list(s, "reservations"))]
    in_rrs_raw = s.get("preemptibleInReservations")
    in_rrs: dict[str, ResourceList] | None = None
    if in_rrs_raw is not None:
        if not isinstance(in_rrs_raw, dict):
            raise ValueError(f"preemptibleInReservations: expected an object, got {show(in_rrs_raw)}")
        in_rrs = {uid: resources(v, f"preemptibleInReservations.{uid}") for uid, v in in_rrs_raw.items()}
    node_facts = NodeFacts(
        to_values(resources(node.get("status", {}).get("allocatable"), "node.status.allocatable")),
        _int(s, "nodePodCount"),
        _values(s, "nodeRequested"),
        _values(s, "reservedAllocated"),
        resources(s.get("preemptible"), "preemptible"),
        in_rrs,
    )
    skip = _bool(s, "enableSkipReservationFitsNode")
    return _status(filter_normal_pod(facts, node_facts, matched, _ignored(s), skip))


def _op_filter_reserve_pod(s: Scenario) -> dict[str, Any]:
    node = as_node(s.get("node"), "node")
    name = str(node.get("metadata", {}).get("name", ""))
    r = _reservation(s)
    pinned = new_reserve_pod(r)["metadata"]["annotations"].get(
        "scheduling.koordinator.sh/reservation-node", ""
    )
    others = [
        ReservationInfo.of(parse_reservation(o, f"reservations[{i}]"))
        for i, o in enumerate(_list(s, "reservations"))
    ]
    policies = [o.policy for o in others if o.reservation.node_name == name and o.matchable]
    return _status(filter_reserve_pod(name, pinned, r.allocate_policy, policies))


def _op_score(s: Scenario) -> dict[str, Any]:
    nodes = [as_node(n, f"nodes[{i}]") for i, n in enumerate(_list(s, "nodes"))]
    pod = as_pod(s.get("pod"), "pod")
    infos = [_entry(e, f"reservations[{i}]") for i, e in enumerate(_list(s, "reservations"))]
    names = [str(n.get("metadata", {}).get("name", "")) for n in nodes]
    try:
        affinity_name = parse_affinity(pod).name
    except ValueError as e:
        raise ValueError(f"pod.{e}") from None
    facts = PodFacts(pod_requests(pod), _bool(s, "hasAffinity"), affinity_name, is_reservation_ignored(pod))
    matched = {n: [i for i in infos if i.reservation.node_name == n] for n in names}
    scores = dict.fromkeys(names, 0)
    preferred = None if facts.ignored else preferred_node(names, matched)
    for node, name in zip(nodes, names, strict=True):
        if facts.ignored or not matched[name]:
            continue
        if name == preferred:
            scores[name] = MOST_PREFERRED_SCORE
            continue
        alloc = to_values(resources(node.get("status", {}).get("allocatable"), f"nodes[{names.index(name)}]"))
        chosen = nominate(facts, NodeFacts(alloc), matched[name])
        if chosen is not None:
            scores[name] = score_reservation(facts.requests, chosen)
    return {"score": scores, "normalizedScore": default_normalize(scores), "preferredNode": preferred}


def _op_match(s: Scenario) -> dict[str, Any]:
    """A koord addition: which of the node's matchable reservations the pod matches, and the node
    state's restored resources (docs/rules/scheduler-reservation.md#matching)."""
    node = as_node(s.get("node"), "node")
    pod = as_pod(s.get("pod"), "pod")
    try:
        facts = PodMatchFacts(pod, parse_affinity(pod), exact_match_names(pod), pod_requests(pod),
                              is_reservation_ignored(pod))  # fmt: skip
    except ValueError as e:
        raise ValueError(f"pod.{e}") from None
    infos = [_entry(e, f"reservations[{i}]") for i, e in enumerate(_list(s, "reservations"))]
    name = str(node.get("metadata", {}).get("name", ""))
    matchable = [i for i in infos if i.matchable and i.reservation.node_name == name]
    state = node_state(facts, matchable, name, node_labels(node), _values(s, "nodeRequested"))
    if state is None:
        return {"matched": [], "unmatched": [], "hasState": False}
    return {
        "matched": [r.name for r in state.matched],
        "unmatched": [r.name for r in state.unmatched],
        "hasState": True,
        "nodeRequested": _quantities(state.requested),
        "reservedAllocated": _quantities(state.reserved_allocated),
    }


def _quantities(values: Mapping[str, int]) -> dict[str, str]:
    return {n: str(Quantity(f"{v}m" if n in MILLI_RESOURCES else str(v))) for n, v in values.items()}


def _op_controller_sync(s: Scenario) -> dict[str, Any]:
    r = _reservation(s)
    nodes = [as_node(n, f"nodes[{i}]") for i, n in enumerate(_list(s, "nodes"))]
    pods = [as_pod(p, f"pods[{i}]") for i, p in enumerate(_list(s, "pods"))]
    new, requeue = sync(
        r, {str(n.get("metadata", {}).get("name", "")) for n in nodes}, pods, _time(s.get("now"), "now")
    )
    return {
        "phase": new.phase,
        "expired": is_expired(new),
        "requeueAfterSeconds": requeue / 1e9,
        "conditions": [{k: c.get(k, "") for k in ("type", "status", "reason")} for c in new.conditions],
        "allocated": format_resource_list(new.allocated),
        "currentOwners": [dict(o) for o in new.current_owners],
    }


OPERATIONS: Final[dict[str, Callable[[Scenario], dict[str, Any]]]] = {
    "status": _op_status,
    "matchOwner": _op_match_owner,
    "reservePod": _op_reserve_pod,
    "requests": _op_requests,
    "exactMatch": _op_exact_match,
    "restrictedResources": _op_restricted,
    "affinity": _op_affinity,
    "setUnschedulable": _op_set_unschedulable,
    "filter": _op_filter,
    "filterReservePod": _op_filter_reserve_pod,
    "score": _op_score,
    "controllerSync": _op_controller_sync,
    "match": _op_match,
}


def simulate(scenario: Scenario) -> dict[str, Any]:
    operation = scenario.get("operation")
    if not isinstance(operation, str) or operation not in OPERATIONS:
        raise ValueError(f"operation={show(operation)}: must be one of {', '.join(OPERATIONS)}")
    return OPERATIONS[operation](scenario)
