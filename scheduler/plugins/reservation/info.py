"""``ReservationInfo``: the scheduler's view of one reservation — allocatable, allocated (from its
assigned owner pods, never ``status.allocated``), inner reserved, resource names, available and whether
it is matchable (docs/rules/scheduler-reservation.md#reservationinfo).
Imports: the standard library and apis (pod, quantity, reservation, reservation_pod). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from apis.labelselector import LabelSelectorError
from apis.pod import ResourceList, pod_key, pod_requests
from apis.quantity import Quantity
from apis.reservation import (
    LABEL_RESERVATION_ORDER,
    POLICY_RESTRICTED,
    Reservation,
    inner_reserved,
    is_available,
    reservation_requests,
)
from apis.reservation_pod import OwnerMatcher, owner_matchers, restricted_options, restricted_resources

ZERO = Quantity("0")


def subtract(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    """``quotav1.Subtract``: every name of either side, ``a − b`` (may be negative)."""
    out = {n: q - b[n] if n in b else q for n, q in a.items()}
    for n, q in b.items():
        out.setdefault(n, ZERO - q)
    return out


def subtract_non_negative(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    """``quotav1.SubtractWithNonNegativeResult``."""
    return {n: max(q, ZERO) for n, q in subtract(a, b).items()}


def mask(a: Mapping[str, Quantity], names: Sequence[str]) -> ResourceList:
    return {n: q for n, q in a.items() if n in names}


def add(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    out = dict(a)
    for n, q in b.items():
        out[n] = out[n] + q if n in out else q
    return out


def parse_order(labels: Mapping[str, str]) -> int:
    """The ``reservation-order`` label as int64; 0 when absent or invalid."""
    text = labels.get(LABEL_RESERVATION_ORDER, "")
    try:
        value = int(text, 10) if text.lstrip("+-").isdigit() and text.isascii() else 0
    except ValueError:
        return 0
    return value if -(2**63) <= value < 2**63 else 0


@dataclass
class ReservationInfo:
    """One reservation as the plugin sees it; ``assigned`` maps owner pod keys to their requests."""

    reservation: Reservation
    allocatable: ResourceList
    reserved: ResourceList | None
    resource_names: list[str]
    matchers: list[OwnerMatcher] | None  # None: the owners or restricted options did not parse
    assigned: dict[str, ResourceList] = field(default_factory=dict)
    allocated: ResourceList = field(default_factory=dict)
    order: int = 0

    @classmethod
    def of(cls, r: Reservation) -> ReservationInfo:
        allocatable = reservation_requests(r)
        names = sorted(allocatable)
        ok = True
        if r.allocate_policy == POLICY_RESTRICTED:
            try:
                names = restricted_resources(names, restricted_options(r.annotations))
            except ValueError:
                ok = False
        try:
            matchers: list[OwnerMatcher] | None = owner_matchers(r.owners) if ok else None
        except LabelSelectorError:
            matchers = None
        return cls(
            r, allocatable, inner_reserved(r.annotations), names, matchers, order=parse_order(r.labels)
        )

    @property
    def name(self) -> str:
        return self.reservation.name

    @property
    def uid(self) -> str:
        return self.reservation.uid

    @property
    def policy(self) -> str:
        return self.reservation.allocate_policy

    @property
    def allocated_pods(self) -> int:
        return len(self.assigned)

    def add_pod(self, pod: Mapping[str, Any]) -> None:
        key = pod_key(pod)
        if key in self.assigned:
            return
        requests = pod_requests(pod)
        self.assigned[key] = requests
        self.allocated = add(self.allocated, mask(requests, self.resource_names))

    def remove_pod(self, pod: Mapping[str, Any]) -> None:
        requests = self.assigned.pop(pod_key(pod), None)
        if requests:
            self.allocated = subtract_non_negative(self.allocated, mask(requests, self.resource_names))

    @property
    def available(self) -> ResourceList:
        """``max(allocatable − allocated − reserved, 0)``: only the last step clamps."""
        return subtract_non_negative(subtract(self.allocatable, self.allocated), self.reserved or {})

    @property
    def matchable(self) -> bool:
        return (
            is_available(self.reservation)
            and self.matchers is not None
            and not (self.reservation.is_allocate_once and self.allocated_pods > 0)
        )


def info_with_pods(r: Reservation, pods: Sequence[Mapping[str, Any]]) -> ReservationInfo:
    info = ReservationInfo.of(r)
    for p in pods:
        info.add_pod(p)
    return info
