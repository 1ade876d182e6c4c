"""Score and the nominator (docs/rules/scheduler-reservation.md#score): the preferred node by the
``reservation-order`` label, the nominated reservation of a node, ``ScoreReservation`` (MostAllocated
over the reservation) and kube's ``DefaultNormalizeScore``.
Imports: the standard library, apis (pod, quantity), this package (filtering, info).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from apis.pod import ResourceList
from scheduler.plugins.reservation.filtering import (
    NO_IGNORED,
    Ignored,
    NodeFacts,
    PodFacts,
    filter_with_reservations,
)
from scheduler.plugins.reservation.info import ZERO, ReservationInfo, add, mask, subtract_non_negative

MOST_PREFERRED_SCORE: Final = 1000
MAX_NODE_SCORE: Final = 100


def most_preferred_by_order(infos: Sequence[ReservationInfo]) -> tuple[ReservationInfo | None, int]:
    """The reservation with the smallest non-zero order and that order (None, 0 when none has one)."""
    best: ReservationInfo | None = None
    for r in infos:
        if r.order != 0 and (best is None or r.order < best.order):
            best = r
    return best, best.order if best is not None else 0


def preferred_node(nodes: Sequence[str], matched: Mapping[str, Sequence[ReservationInfo]]) -> str | None:
    """The node holding the smallest order over every node's matched reservations (first on ties)."""
    chosen: tuple[int, str] | None = None
    for name in nodes:
        _, order = most_preferred_by_order(matched.get(name, ()))
        if order != 0 and (chosen is None or order < chosen[0]):
            chosen = (order, name)
    return chosen[1] if chosen is not None else None


def score_reservation(requests: ResourceList, r: ReservationInfo, in_rr: ResourceList | None = None) -> int:
    """MostAllocated over ``r.allocatable``'s non-zero entries, with the pod's requests added to what is
    allocated (less what preemption frees in the reservation)."""
    allocated = r.allocated
    if in_rr:
        allocated = mask(subtract_non_negative(allocated, in_rr), r.resource_names)
    requested = add(requests, allocated)
    capacities = {n: q for n, q in r.allocatable.items() if not q.is_zero()}
    if not capacities:
        return 0
    total = 0
    for name, capacity in capacities.items():
        req = requested.get(name, ZERO)
        if req <= capacity:
            total += MAX_NODE_SCORE * req.milli_value() // capacity.milli_value()
    return total // len(capacities)


def nominate(
    pod: PodFacts,
    node: NodeFacts,
    matched: Sequence[ReservationInfo],
    ignored: Ignored = NO_IGNORED,
    skip_fits_node: bool = False,
) -> ReservationInfo | None:
    """``NominateReservation`` for one node; ties of ScoreReservation go to the first in order."""
    if not matched:
        return None
    if len(matched) == 1 and pod.has_affinity:
        return matched[0]
    kept = [
        r
        for r in matched
        if not (r.reservation.is_allocate_once and r.allocated_pods > 0)
        and filter_with_reservations(pod, node, [r], len(matched), True, ignored, skip_fits_node).is_success()
    ]
    if len(kept) <= 1:
        return kept[0] if kept else None
    by_order, _ = most_preferred_by_order(kept)
    if by_order is not None:
        return by_order
    in_rrs = node.in_rrs or {}
    scores = [score_reservation(pod.requests, r, in_rrs.get(r.uid)) for r in kept]
    return kept[scores.index(max(scores))]


def default_normalize(scores: Mapping[str, int]) -> dict[str, int]:
    """``DefaultNormalizeScore(100, reverse=false)``: ``score × 100 / max``, unchanged when max is 0."""
    top = max(scores.values(), default=0)
    if top == 0:
        return dict(scores)
    return {n: MAX_NODE_SCORE * s // top for n, s in scores.items()}
