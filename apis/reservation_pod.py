"""A Reservation seen from pods: the reserve pod that stands for it in the scheduler
(docs/rules/scheduler-reservation.md#reserve-pod), owner matching
(docs/rules/scheduler-reservation.md#owner-matching), a pod's reservation affinity and exact-match
annotations (docs/rules/scheduler-reservation.md#reservation-affinity), the restricted resources and the
exact-match rule (docs/rules/scheduler-reservation.md#exact-match).

Imports: the standard library and apis (labelselector, pod, podgroup, quantity, reservation). Pure.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from apis.labelselector import LabelSelector, LabelSelectorError
from apis.pod import pod_annotations, pod_labels, pod_requests
from apis.podgroup import go_parse_int32
from apis.quantity import Quantity, format_resource_list
from apis.reservation import (
    ANNOTATION_EXACT_MATCH,
    ANNOTATION_IS_PRE_ALLOCATION,
    ANNOTATION_RESERVATION_AFFINITY,
    ANNOTATION_RESERVATION_NAME,
    ANNOTATION_RESERVATION_NODE,
    ANNOTATION_RESERVE_POD,
    ANNOTATION_RESTRICTED_OPTIONS,
    LABEL_POD_PRIORITY,
    LABEL_RESERVATION_IGNORED,
    Reservation,
    is_available,
    is_expired,
    is_failed,
    is_succeeded,
    json_annotation,
)

DEFAULT_SCHEDULER: Final = "default-scheduler"
MAX_INT32: Final = 2**31 - 1
FAKE_CONTAINER: Final = "__internal_fake_container__"
TAINT_UNSCHEDULABLE: Final = "node.kubernetes.io/unschedulable"


# --- reserve pod (docs/rules/scheduler-reservation.md#reserve-pod) ---------------------------------
def scheduler_name(r: Reservation | None) -> str:
    spec = (r.template or {}).get("spec") if r is not None else None
    name = spec.get("schedulerName") if isinstance(spec, Mapping) else None
    return name if isinstance(name, str) and name else DEFAULT_SCHEDULER


def is_reserve_pod(pod: Mapping[str, Any]) -> bool:
    return pod_annotations(pod).get(ANNOTATION_RESERVE_POD) == "true"


def new_reserve_pod(r: Reservation) -> dict[str, Any]:
    """``NewReservePod``: the fake pod of the reservation (a fresh JSON object)."""
    template = copy.deepcopy(dict(r.template)) if r.template is not None else {}
    meta: dict[str, Any] = dict(template.get("metadata") or {})
    spec: dict[str, Any] = dict(template.get("spec") or {})
    meta["name"] = r.uid
    meta["uid"] = r.uid
    if not meta.get("namespace"):
        meta["namespace"] = "default"
    meta["labels"] = {**(meta.get("labels") or {}), **r.labels}
    annotations = {**(meta.get("annotations") or {}), **r.annotations}
    annotations[ANNOTATION_RESERVE_POD] = "true"
    annotations[ANNOTATION_RESERVATION_NAME] = r.name
    if r.pre_allocation:
        annotations[ANNOTATION_IS_PRE_ALLOCATION] = "true"
    if spec.get("nodeName"):
        annotations[ANNOTATION_RESERVATION_NODE] = spec["nodeName"]
        spec.pop("nodeName")
    meta["annotations"] = annotations
    if r.node_name:
        spec["nodeName"] = r.node_name
    if not isinstance(spec.get("priority"), int):
        spec["priority"] = MAX_INT32
        text = r.labels.get(LABEL_POD_PRIORITY, "")
        if text:
            with contextlib.suppress(ValueError):
                spec["priority"] = go_parse_int32(text)
    spec["schedulerName"] = scheduler_name(r)
    pod: dict[str, Any] = {"metadata": meta, "spec": spec}
    if is_succeeded(r):
        pod["status"] = {"phase": "Succeeded"}
    elif is_expired(r) or is_failed(r):
        pod["status"] = {"phase": "Failed"}
    if is_available(r):
        requests = pod_requests(pod)
        if requests.keys() != r.allocatable.keys() or any(requests[k] != r.allocatable[k] for k in requests):
            _with_allocatable(spec, {**requests, **r.allocatable})
    return pod


def _with_allocatable(spec: dict[str, Any], requests: Mapping[str, Any]) -> None:
    """``UpdateReservePodWithAllocatable``: every container's resources emptied, one fake container."""
    spec.pop("overhead", None)
    for key in ("initContainers", "containers"):
        spec[key] = [{**c, "resources": {}} for c in spec.get(key) or [] if isinstance(c, Mapping)]
    amounts = format_resource_list(requests)
    fake = {"name": FAKE_CONTAINER, "resources": {"limits": dict(amounts), "requests": dict(amounts)}}
    spec["containers"] = [*spec["containers"], fake]


# --- owners (docs/rules/scheduler-reservation.md#owner-matching) ------------------------------------
@dataclass(frozen=True)
class OwnerMatcher:
    """One owner term with its label selector compiled (None: no selector)."""

    term: Mapping[str, Any]
    selector: LabelSelector | None


def owner_matchers(owners: Sequence[Mapping[str, Any]]) -> list[OwnerMatcher]:
    """The compiled terms; LabelSelectorError when a selector does not parse (the reservation then
    matches nothing)."""
    out: list[OwnerMatcher] = []
    for i, term in enumerate(owners):
        raw = term.get("labelSelector")
        try:
            selector = LabelSelector.from_dict(raw) if raw is not None else None
        except LabelSelectorError as e:
            raise LabelSelectorError(f"owners[{i}].labelSelector", raw, str(e)) from None
        out.append(OwnerMatcher(term, selector))
    return out


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = pod.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _match_object(pod: Mapping[str, Any], ref: Mapping[str, Any] | None) -> bool:
    if ref is None:
        return True
    meta = _meta(pod)
    have = {"uid": meta.get("uid"), "name": meta.get("name"), "namespace": meta.get("namespace"),
            "apiVersion": pod.get("apiVersion")}  # fmt: skip
    return all(not ref.get(k) or ref.get(k) == (have[k] or "") for k in have)


def _match_controller(pod: Mapping[str, Any], ref: Mapping[str, Any] | None) -> bool:
    if ref is None:
        return True
    meta = _meta(pod)
    if ref.get("namespace") and ref["namespace"] != (meta.get("namespace") or ""):
        return False
    owners = meta.get("ownerReferences")
    for owner in owners if isinstance(owners, list) else ():
        if not isinstance(owner, Mapping):
            continue
        wanted = ref.get("controller")
        if wanted is not None and owner.get("controller") != wanted:
            continue
        if all(not ref.get(k) or ref.get(k) == owner.get(k) for k in ("uid", "name", "kind", "apiVersion")):
            return True
    return False


def match_owners(pod: Mapping[str, Any], matchers: Sequence[OwnerMatcher]) -> bool:
    """``MatchReservationOwners``: some term has every present selector matching (``[]`` matches
    nothing, ``[{}]`` everything)."""
    labels = {str(k): v for k, v in pod_labels(pod).items() if isinstance(v, str)}
    for m in matchers:
        obj, ctrl = m.term.get("object"), m.term.get("controller")
        if (
            _match_object(pod, obj if isinstance(obj, Mapping) else None)
            and _match_controller(pod, ctrl if isinstance(ctrl, Mapping) else None)
            and (m.selector is None or m.selector.matches(labels))
        ):
            return True
    return False


def reservation_matches_owner(pod: Mapping[str, Any], r: Reservation) -> bool:
    try:
        return match_owners(pod, owner_matchers(r.owners))
    except LabelSelectorError:
        return False


# --- affinity (docs/rules/scheduler-reservation.md#reservation-affinity) ---------------------------
@dataclass(frozen=True)
class ReservationAffinity:
    """The pod's ``reservation-affinity`` annotation: ``present`` is hasAffinity; ``terms`` None means
    no required terms (``[]`` means terms that match nothing)."""

    present: bool = False
    name: str = ""
    selector: Mapping[str, str] = field(default_factory=dict)
    terms: Sequence[Mapping[str, Any]] | None = None
    tolerations: Sequence[Mapping[str, Any]] = ()

    @property
    def tolerate_unschedulable(self) -> bool:
        return tolerations_tolerate(self.tolerations, TAINT_UNSCHEDULABLE, "", "NoSchedule")


def tolerates(tol: Mapping[str, Any], key: str, value: str, effect: str) -> bool:
    """Kubernetes ``Toleration.ToleratesTaint``."""
    t_effect, t_key, op = tol.get("effect") or "", tol.get("key") or "", tol.get("operator") or ""
    if t_effect and t_effect != effect:
        return False
    if t_key and t_key != key:
        return False
    if op in ("", "Equal"):
        return (tol.get("value") or "") == value
    return bool(op == "Exists")


def tolerations_tolerate(tolerations: Sequence[Mapping[str, Any]], key: str, value: str, effect: str) -> bool:
    return any(tolerates(t, key, value, effect) for t in tolerations)


def _type_error(where: str, expected: str, value: object) -> ValueError:
    return ValueError(f"{where}: expected {expected}, got {json.dumps(value)[:80]}")


def parse_affinity(pod: Mapping[str, Any]) -> ReservationAffinity:
    """The affinity annotation (present even as ``""``); ValueError names the annotation when its JSON
    does not decode into a ReservationAffinity."""
    annotations = pod_annotations(pod)
    if ANNOTATION_RESERVATION_AFFINITY not in annotations:
        return ReservationAffinity()
    text = annotations[ANNOTATION_RESERVATION_AFFINITY]
    where = f"metadata.annotations.{ANNOTATION_RESERVATION_AFFINITY}"
    try:
        raw = json.loads(text) if isinstance(text, str) and text else {}
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: invalid JSON: {e}") from None
    if not isinstance(raw, dict):
        raise _type_error(where, "an object", raw)
    name = raw.get("name") or ""
    selector = raw.get("reservationSelector") or {}
    required = raw.get("requiredDuringSchedulingIgnoredDuringExecution")
    tolerations = raw.get("tolerations") or []
    if not isinstance(name, str):
        raise _type_error(f"{where}.name", "a string", name)
    if not isinstance(selector, dict) or not all(isinstance(v, str) for v in selector.values()):
        raise _type_error(f"{where}.reservationSelector", "an object of strings", selector)
    if not isinstance(tolerations, list) or not all(isinstance(t, dict) for t in tolerations):
        raise _type_error(f"{where}.tolerations", "a list of objects", tolerations)
    terms: list[Mapping[str, Any]] | None = None
    if required is not None:
        if not isinstance(required, dict):
            raise _type_error(
                f"{where}.requiredDuringSchedulingIgnoredDuringExecution", "an object", required
            )
        raw_terms = required.get("reservationSelectorTerms") or []
        if not isinstance(raw_terms, list) or not all(isinstance(t, dict) for t in raw_terms):
            raise _type_error(f"{where}.reservationSelectorTerms", "a list of objects", raw_terms)
        terms = raw_terms
    return ReservationAffinity(True, name, selector, terms, tolerations)


def is_reservation_ignored(pod: Mapping[str, Any]) -> bool:
    return pod_labels(pod).get(LABEL_RESERVATION_IGNORED) == "true"


def exact_match_names(pod: Mapping[str, Any]) -> list[str] | None:
    """The exact-match annotation's ``resourceNames`` (None when absent); ValueError when it does not
    parse."""
    text = pod_annotations(pod).get(ANNOTATION_EXACT_MATCH)
    if not text:
        return None
    where = f"metadata.annotations.{ANNOTATION_EXACT_MATCH}"
    try:
        raw = json.loads(text) if isinstance(text, str) else None
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: invalid JSON: {e}") from None
    if not isinstance(raw, dict):
        raise _type_error(where, "an object", raw)
    names = raw.get("resourceNames") or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise _type_error(f"{where}.resourceNames", "a list of strings", names)
    return names


# --- restricted resources and exact match (docs/rules/scheduler-reservation.md#requests,
# docs/rules/scheduler-reservation.md#exact-match) ----------------------------------------------
def restricted_options(annotations: Mapping[str, str]) -> list[str] | None:
    """The restricted-options annotation's resource names (None when absent); ValueError when it does
    not parse."""
    raw = json_annotation(annotations, ANNOTATION_RESTRICTED_OPTIONS)
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError(f"{ANNOTATION_RESTRICTED_OPTIONS}: expected an object")
    names = raw.get("resources") or []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"{ANNOTATION_RESTRICTED_OPTIONS}.resources: expected a list of strings")
    return names


def restricted_resources(names: Sequence[str], options: Sequence[str] | None) -> list[str]:
    """``GetReservationRestrictedResources``: the names listed in the options (input order), or all of
    them when the options are null or leave none."""
    if options is None:
        return list(names)
    wanted = set(options)
    kept = [n for n in names if n in wanted]
    return kept or list(names)


def exact_match(
    pod_requests_: Mapping[str, Quantity], allocatable: Mapping[str, Quantity], names: Sequence[str] | None
) -> bool:
    """``ExactMatchReservation``; quirk: a name absent on both sides ends the check with true."""
    for name in names or ():
        a, b = pod_requests_.get(name), allocatable.get(name)
        if a is None and b is None:
            return True
        if a is None or b is None or a != b:
            return False
    return True
