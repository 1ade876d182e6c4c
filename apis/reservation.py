"""Koordinator's Reservation (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped): the object parsed
from its JSON with errors naming the field and value (docs/rules/scheduler-reservation.md#the-crd), the
labels and annotations (docs/rules/scheduler-reservation.md#labels-and-annotations), the status
predicates and condition writers (docs/rules/scheduler-reservation.md#status) and the reservation
requests (docs/rules/scheduler-reservation.md#requests). The reserve pod, owner matching, the
reservation affinity, restricted resources and exact match live in apis.reservation_pod.

Imports: the standard library and apis (duration, kubeobjects, objectcheck, pod, quantity,
reservation_fields). Pure.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from apis.duration import DurationError, parse_go_duration
from apis.kubeobjects import Pod
from apis.objectcheck import check_object
from apis.pod import ResourceList, pod_requests
from apis.quantity import Quantity, QuantityError, parse_resource_list
from apis.reservation_fields import (
    as_object,
    bool_at,
    condition,
    list_at,
    object_ref,
    owner_term,
    show,
    str_at,
    str_map_at,
    taint,
    time_at,
)

# --- labels and annotations (docs/rules/scheduler-reservation.md#labels-and-annotations) -------------
GROUP: Final = "scheduling.koordinator.sh"
ANNOTATION_RESERVATION_AFFINITY: Final = GROUP + "/reservation-affinity"
ANNOTATION_RESERVATION_ALLOCATED: Final = GROUP + "/reservation-allocated"
LABEL_RESERVATION_IGNORED: Final = GROUP + "/reservation-ignored"
LABEL_RESERVATION_ORDER: Final = GROUP + "/reservation-order"
ANNOTATION_RESTRICTED_OPTIONS: Final = GROUP + "/reservation-restricted-options"
ANNOTATION_EXACT_MATCH: Final = GROUP + "/exact-match-reservation"
ANNOTATION_RESIZE_ALLOCATABLE: Final = GROUP + "/reservation-resize-allocatable"
LABEL_PRE_ALLOCATION_REQUIRED: Final = GROUP + "/pre-allocation-required"
ANNOTATION_NODE_RESERVATION: Final = "node.koordinator.sh/reservation"
ANNOTATION_RESERVE_POD: Final = GROUP + "/reserve-pod"
ANNOTATION_RESERVATION_NAME: Final = GROUP + "/reservation-name"
ANNOTATION_RESERVATION_NODE: Final = GROUP + "/reservation-node"
ANNOTATION_IS_PRE_ALLOCATION: Final = GROUP + "/is-pre-allocation"
LABEL_POD_PRIORITY: Final = "koordinator.sh/priority"

PHASE_PENDING: Final = "Pending"
PHASE_AVAILABLE: Final = "Available"
PHASE_SUCCEEDED: Final = "Succeeded"
PHASE_WAITING: Final = "Waiting"
PHASE_FAILED: Final = "Failed"
PHASES: Final = (PHASE_PENDING, PHASE_AVAILABLE, PHASE_SUCCEEDED, PHASE_WAITING, PHASE_FAILED)
CONDITION_SCHEDULED: Final = "Scheduled"
CONDITION_READY: Final = "Ready"
REASON_SCHEDULED: Final = "Scheduled"
REASON_UNSCHEDULABLE: Final = "Unschedulable"
REASON_AVAILABLE: Final = "Available"
REASON_SUCCEEDED: Final = "Succeeded"
REASON_EXPIRED: Final = "Expired"
POLICY_DEFAULT: Final = ""
POLICY_ALIGNED: Final = "Aligned"
POLICY_RESTRICTED: Final = "Restricted"
POLICIES: Final = (POLICY_DEFAULT, POLICY_ALIGNED, POLICY_RESTRICTED)
DEFAULT_TTL_NS: Final = 24 * 3600 * 10**9  # the CRD's default "24h"

Condition = dict[str, str]


# --- parsing (docs/rules/scheduler-reservation.md#the-crd; field readers: apis.reservation_fields) --
def resources(value: object, where: str) -> ResourceList:
    """A ResourceList (absent or null: empty); ValueError names the resource."""
    raw = as_object(value, where)
    try:
        return parse_resource_list(raw)
    except QuantityError as e:
        raise ValueError(f"{where}: {e}") from None


@dataclass(frozen=True)
class Reservation:
    """The fields of a Reservation koord reads. ``template`` is the raw PodTemplateSpec (None when
    absent); ``owners`` the raw owner terms (their selectors are compiled by apis.reservation_pod);
    ``ttl_ns`` None means unset (``0`` disables expiration)."""

    name: str = ""
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    creation: _dt.datetime | None = None
    deleting: bool = False
    template: Mapping[str, Any] | None = None
    owners: Sequence[Mapping[str, Any]] = ()
    ttl_ns: int | None = DEFAULT_TTL_NS
    expires: _dt.datetime | None = None
    pre_allocation: bool = False
    allocate_once: bool | None = None
    allocate_policy: str = POLICY_DEFAULT
    unschedulable: bool = False
    taints: Sequence[Mapping[str, str]] = ()
    phase: str = PHASE_PENDING
    conditions: Sequence[Condition] = ()
    current_owners: Sequence[Mapping[str, str]] = ()
    node_name: str = ""
    allocatable: ResourceList = field(default_factory=dict)
    allocated: ResourceList = field(default_factory=dict)

    @property
    def is_allocate_once(self) -> bool:
        """Unset means true (docs/rules/scheduler-reservation.md#quirks)."""
        return self.allocate_once is not False

    @property
    def template_node_name(self) -> str:
        spec = (self.template or {}).get("spec")
        value = spec.get("nodeName") if isinstance(spec, Mapping) else None
        return value if isinstance(value, str) else ""


def parse_reservation(value: object, where: str = "reservation") -> Reservation:
    """A Reservation from its JSON; ValueError names the field and value. Absent fields take the CRD's
    defaults (``ttl`` 24h, phase Pending); a ``null`` field is an unset one."""
    obj = as_object(value, where, absent_ok=False)
    meta = as_object(obj.get("metadata"), f"{where}.metadata")
    spec = as_object(obj.get("spec"), f"{where}.spec")
    status = as_object(obj.get("status"), f"{where}.status")
    m, s, st = f"{where}.metadata", f"{where}.spec", f"{where}.status"
    template = spec.get("template")
    if template is not None:  # a PodTemplateSpec has a pod's metadata and spec: checked as one
        template = check_object(template, Pod, f"{s}.template")
    ttl: int | None = DEFAULT_TTL_NS
    if "ttl" in spec:
        raw_ttl = spec["ttl"]
        if raw_ttl is None:
            ttl = None
        else:
            try:
                ttl = parse_go_duration(raw_ttl)
            except DurationError as e:
                raise ValueError(f"{s}.ttl={show(raw_ttl)}: {e}") from None
    policy = str_at(spec, "allocatePolicy", s)
    if policy not in POLICIES:
        raise ValueError(f'{s}.allocatePolicy={show(policy)}: must be one of "", Aligned, Restricted')
    phase = str_at(status, "phase", st) or PHASE_PENDING
    if phase not in PHASES:
        raise ValueError(f"{st}.phase={show(phase)}: must be one of {', '.join(PHASES)}")
    owners_raw = list_at(spec, "owners", s)
    current_raw = list_at(status, "currentOwners", st)
    conditions_raw = list_at(status, "conditions", st)
    return Reservation(
        name=str_at(meta, "name", m),
        uid=str_at(meta, "uid", m),
        labels=str_map_at(meta, "labels", m),
        annotations=str_map_at(meta, "annotations", m),
        creation=time_at(meta, "creationTimestamp", m),
        deleting=time_at(meta, "deletionTimestamp", m) is not None,
        template=template,
        owners=tuple(owner_term(o, f"{s}.owners[{i}]") for i, o in enumerate(owners_raw)),
        ttl_ns=ttl,
        expires=time_at(spec, "expires", s),
        pre_allocation=bool(bool_at(spec, "preAllocation", s)),
        allocate_once=bool_at(spec, "allocateOnce", s),
        allocate_policy=policy,
        unschedulable=bool(bool_at(spec, "unschedulable", s)),
        taints=tuple(taint(t, f"{s}.taints[{i}]") for i, t in enumerate(list_at(spec, "taints", s))),
        phase=phase,
        conditions=tuple(condition(c, f"{st}.conditions[{i}]") for i, c in enumerate(conditions_raw)),
        current_owners=tuple(object_ref(o, f"{st}.currentOwners[{i}]") for i, o in enumerate(current_raw)),
        node_name=str_at(status, "nodeName", st),
        allocatable=resources(status.get("allocatable"), f"{st}.allocatable"),
        allocated=resources(status.get("allocated"), f"{st}.allocated"),
    )  # fmt: skip


# --- status (docs/rules/scheduler-reservation.md#status) -------------------------------------------
def is_available(r: Reservation | None) -> bool:
    return r is not None and r.node_name != "" and r.phase == PHASE_AVAILABLE


def is_active(r: Reservation | None) -> bool:
    return r is not None and r.node_name != "" and r.phase in (PHASE_AVAILABLE, PHASE_WAITING)


def is_succeeded(r: Reservation | None) -> bool:
    return r is not None and r.phase == PHASE_SUCCEEDED


def is_failed(r: Reservation | None) -> bool:
    return r is not None and r.phase == PHASE_FAILED


def is_expired(r: Reservation | None) -> bool:
    """Failed and the *first* Ready condition is False with reason Expired."""
    if r is None or r.phase != PHASE_FAILED:
        return False
    ready = next((c for c in r.conditions if c.get("type") == CONDITION_READY), None)
    return ready is not None and ready.get("status") == "False" and ready.get("reason") == REASON_EXPIRED


def _last(conditions: list[Condition], kind: str) -> int:
    return next((i for i in range(len(conditions) - 1, -1, -1) if conditions[i].get("type") == kind), -1)


def _cond(kind: str, status: str, reason: str, message: str, now: str) -> Condition:
    return {
        "type": kind, "status": status, "reason": reason, "message": message,
        "lastProbeTime": now, "lastTransitionTime": now,
    }  # fmt: skip


def set_unschedulable(r: Reservation, message: str, now: str) -> Reservation:
    """``SetReservationUnschedulable``: the phase is kept; the last Scheduled condition is updated."""
    conditions = [dict(c) for c in r.conditions]
    i = _last(conditions, CONDITION_SCHEDULED)
    if i < 0:
        conditions.append(_cond(CONDITION_SCHEDULED, "False", REASON_UNSCHEDULABLE, message, now))
    elif conditions[i].get("status") == "True":
        conditions[i]["lastProbeTime"] = now
    else:
        conditions[i].update(reason=REASON_UNSCHEDULABLE, message=message, lastProbeTime=now)
    return dataclasses.replace(r, conditions=tuple(conditions))


def set_expired(r: Reservation, now: str) -> Reservation:
    """``SetReservationExpired``: phase Failed, the last Ready condition False/Expired."""
    conditions = [dict(c) for c in r.conditions]
    i = _last(conditions, CONDITION_READY)
    if i < 0:
        conditions.append(_cond(CONDITION_READY, "False", REASON_EXPIRED, "", now))
    elif conditions[i].get("status") == "True":
        conditions[i] = _cond(CONDITION_READY, "False", REASON_EXPIRED, "", now)
    else:
        conditions[i].update(reason=REASON_EXPIRED, lastProbeTime=now)
    return dataclasses.replace(r, phase=PHASE_FAILED, conditions=tuple(conditions))


def set_succeeded(r: Reservation, now: str) -> Reservation:
    """``SetReservationSucceeded``: phase Succeeded, the last Ready condition False/Succeeded."""
    conditions = [dict(c) for c in r.conditions]
    i = _last(conditions, CONDITION_READY)
    if i < 0:
        conditions.append(_cond(CONDITION_READY, "False", REASON_SUCCEEDED, "", now))
    else:
        conditions[i].update(
            status="False", reason=REASON_SUCCEEDED, lastProbeTime=now, lastTransitionTime=now
        )
    return dataclasses.replace(r, phase=PHASE_SUCCEEDED, conditions=tuple(conditions))


def set_available(r: Reservation, node: str, now: str) -> Reservation:
    """``SetReservationAvailable``: allocatable = requests with the resize entries on top, the node,
    phase Available and the conditions replaced by Scheduled/True and Ready/True."""
    allocatable = dict(reservation_requests(r))
    allocatable.update(resize_allocatable(r.annotations))
    conditions = (
        _cond(CONDITION_SCHEDULED, "True", REASON_SCHEDULED, "", now),
        _cond(CONDITION_READY, "True", REASON_AVAILABLE, "", now),
    )
    return dataclasses.replace(
        r, allocatable=allocatable, node_name=node, phase=PHASE_AVAILABLE, conditions=conditions
    )


# --- requests (docs/rules/scheduler-reservation.md#requests) ---------------------------------------
def reservation_requests(r: Reservation | None) -> ResourceList:
    """``status.allocatable`` when available, else the template's pod requests, else empty."""
    if r is None:
        return {}
    if is_available(r):
        return dict(r.allocatable)
    if r.template is not None:
        return pod_requests({"spec": r.template.get("spec") or {}})
    return {}


def json_annotation(annotations: Mapping[str, str], key: str) -> Any:
    text = annotations.get(key, "")
    if not text:
        return None
    return json.loads(text)


def resize_allocatable(annotations: Mapping[str, str]) -> ResourceList:
    """The resize-allocatable annotation's ``resources`` (empty when absent or unparsable)."""
    try:
        raw = json_annotation(annotations, ANNOTATION_RESIZE_ALLOCATABLE)
        return parse_resource_list(raw.get("resources") or {}) if isinstance(raw, dict) else {}
    except (ValueError, AttributeError):
        return {}


def inner_reserved(annotations: Mapping[str, str]) -> ResourceList | None:
    """``node.koordinator.sh/reservation``'s resources, ``reservedCPUs`` (a cpuset) setting cpu; None
    when absent or unparsable."""
    try:
        raw = json_annotation(annotations, ANNOTATION_NODE_RESERVATION)
        if not isinstance(raw, dict):
            return None
        out = parse_resource_list(raw.get("resources") or {})
        cpus = raw.get("reservedCPUs") or ""
        if cpus:
            out["cpu"] = Quantity(str(_cpuset_size(cpus)))
        return out
    except (ValueError, AttributeError, TypeError):
        return None


def _cpuset_size(text: object) -> int:
    if not isinstance(text, str):
        raise ValueError("reservedCPUs")
    count = 0
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        first, last = int(lo), int(hi or lo)
        if first < 0 or last < first:
            raise ValueError(part)
        count += last - first + 1
    return count
