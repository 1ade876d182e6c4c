"""The Reservation plugin's Filter rules as pure functions of a node's reservation state and the pod
(docs/rules/scheduler-reservation.md#filter): the reserve pod's checks, ``filterWithReservations``,
``fitsNode`` and ``fitsReservation``, with koord's exact reason strings. ``koord simulate`` kind
``Reservation`` runs exactly these. Amounts are in snapshot units (cpu milli, the rest ``Value()``).
Imports: the standard library, apis (pod, quantity, reservation), scheduler.framework (status, units),
this package's info.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from apis.pod import ResourceList
from apis.quantity import Quantity
from apis.reservation import POLICY_ALIGNED, POLICY_DEFAULT, POLICY_RESTRICTED
from scheduler.framework.status import Status
from scheduler.framework.units import to_values
from scheduler.plugins.reservation.info import ZERO, ReservationInfo

ERR_AFFINITY: Final = "node(s) no reservations match reservation affinity"
ERR_NODE_NOT_MATCH: Final = "node(s) didn't match the nodeName specified by reservation"
ERR_POLICY_CONFLICT: Final = "node(s) reservation allocate policy conflict"
ERR_INACTIVE: Final = "reservation is not active"
ERR_NO_RESERVATIONS: Final = "node(s) no reservation(s) to meet the requirements"
ERR_PREEMPTION_FAILED: Final = "node(s) preemption failed due to insufficient resources"
ERR_PRE_ALLOCATION_REQUIRED: Final = "node(s) no pod match reservation with pre allocation required"
ERR_NO_PODS_PRE_ALLOCATION: Final = "node(s) no pod(s) to meet the pre-allocation requirements"
ERR_ALLOCATE_ONCE: Final = "reservation has allocateOnce enabled and has already been allocated"
RESERVATION_PREFIX: Final = "Reservation(s) "
NATIVE: Final = ("cpu", "memory", "ephemeral-storage")

Values = Mapping[str, int]


def node_reason(name: str) -> str:
    return f"Insufficient {name} by node"


def is_scalar(name: str) -> bool:
    """Kubernetes' scalar resources (extended, hugepages, attachable volumes, kubernetes.io/-prefixed)."""
    return name.startswith(("hugepages-", "attachable-volumes-")) or ("/" in name and name not in NATIVE)


@dataclass(frozen=True)
class Ignored:
    """The plugin args' ``ignoredResources`` and ``ignoredResourceGroups`` (scalars only)."""

    names: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        prefix, slash, _ = name.partition("/")
        return name in self.names or bool(slash and prefix and prefix in self.groups)


NO_IGNORED: Final = Ignored()


@dataclass(frozen=True)
class PodFacts:
    """What Filter needs of the pod: its requests (as quantities, in the order given), the affinity
    facts, whether it ignores reservations."""

    requests: ResourceList
    has_affinity: bool = False
    reservation_name: str = ""
    ignored: bool = False

    @property
    def values(self) -> dict[str, int]:
        return to_values(self.requests)


@dataclass(frozen=True)
class NodeFacts:
    """The node side: allocatable (with ``pods``), its pod count, the requested resources after
    restoration, Σ allocated of the matched reservations, and what preemption frees (``in_rrs`` None:
    no per-reservation map for the node)."""

    allocatable: Values
    pod_count: int = 0
    requested: Values = field(default_factory=dict)
    reserved_allocated: Values = field(default_factory=dict)
    preemptible: ResourceList = field(default_factory=dict)
    in_rrs: Mapping[str, ResourceList] | None = None


def fits_node(
    pod: Values, node: NodeFacts, remained: Values, matched: int, preemptible: Values, ignored: Ignored
) -> list[str]:
    """``fitsNode``: the short names, ``pods`` first, then cpu, memory, ephemeral-storage, then the pod's
    scalars in its order."""
    short: list[str] = []
    if node.pod_count - matched + 1 > node.allocatable.get("pods", 0):
        short.append("pods")
    scalars = [n for n in pod if is_scalar(n)]
    if not any(pod.get(n, 0) for n in NATIVE) and not scalars:
        return short
    for name in [*NATIVE, *(n for n in scalars if n not in ignored)]:
        used = (
            node.requested.get(name, 0) - remained.get(name, 0)
            - node.reserved_allocated.get(name, 0) - preemptible.get(name, 0)
        )  # fmt: skip
        if pod.get(name, 0) > node.allocatable.get(name, 0) - used:
            short.append(name)
    return short


def _amount(name: str, q: Quantity) -> int:
    return q.milli_value() if name == "cpu" else q.value()


def fits_reservation(
    requests: ResourceList, r: ReservationInfo, in_rr: ResourceList, detailed: bool, ignored: Ignored
) -> list[str]:
    """``fitsReservation``: the reservation-level reasons (detailed ones for the named reservation)."""
    reasons: list[str] = []
    max_pods = r.allocatable.get("pods")
    if max_pods is not None:
        used_pods = r.allocated_pods - (in_rr["pods"].value() if "pods" in in_rr else 0)
        if used_pods + 1 > max_pods.value():
            detail = f", requested: 1, used: {used_pods}, capacity: {max_pods.value()}" if detailed else ""
            reasons.append(f"{RESERVATION_PREFIX}Too many pods{detail}")
    for name in r.resource_names:
        if name in ignored:
            continue
        requested = requests.get(name)
        if requested is None or requested.is_zero():
            continue
        capacity = r.allocatable.get(name, ZERO)
        used = r.allocated.get(name)
        if used is None:
            used = ZERO
        elif in_rr and name in in_rr:  # quirk: only when the name is in allocated
            used = used - in_rr[name]
        used = max(used, ZERO)
        if r.reserved is not None and name in r.reserved:
            capacity = capacity - r.reserved[name]
        if requested <= capacity - used:
            continue
        if not detailed:
            reasons.append(f"{RESERVATION_PREFIX}Insufficient {name}")
        else:
            r_, u, c = (_amount(name, q) for q in (requested, used, capacity))
            reasons.append(
                f"{RESERVATION_PREFIX}Insufficient {name}, requested: {r_}, used: {u}, capacity: {c}"
            )
    return reasons


def filter_reserve_pod(node_name: str, pinned_node: str, policy: str, on_node: Iterable[str]) -> Status:
    """The reserve pod's Filter: the pinned node, then the allocate-policy conflicts with the matchable
    reservations already on the node (``on_node``: their policies)."""
    if pinned_node and pinned_node != node_name:
        return Status.unresolvable(ERR_NODE_NOT_MATCH)
    for other in on_node:
        if (policy == POLICY_DEFAULT or other == POLICY_DEFAULT) and policy != other:
            return Status.unresolvable(ERR_POLICY_CONFLICT)
    return Status.success()


def _sum(a: Values, b: Mapping[str, Quantity]) -> dict[str, int]:
    out = dict(a)
    for n, v in to_values(b).items():
        out[n] = out.get(n, 0) + v
    return out


def filter_with_reservations(
    pod: PodFacts,
    node: NodeFacts,
    candidates: Sequence[ReservationInfo],
    matched_count: int,
    required: bool,
    ignored: Ignored = NO_IGNORED,
    skip_fits_node: bool = False,
) -> Status:
    """``filterWithReservations``: success at the first reservation the pod fits; otherwise the node
    reasons (sorted) and the reservation reasons when required, the node's own shortage when not."""
    if pod.ignored:
        return Status.success()
    skip = skip_fits_node and len(candidates) <= 1
    values = pod.values
    preemptible = to_values(node.preemptible)
    by_node: set[str] = set()
    by_reservation: list[str] = []
    for r in candidates:
        if not pod.has_affinity and not set(r.resource_names) & set(pod.requests):
            continue
        if pod.reservation_name and pod.reservation_name != r.name:
            continue
        detailed = bool(pod.reservation_name)
        in_rr: ResourceList = {}
        with_rr: Values = preemptible
        if node.in_rrs is not None:
            in_rr = dict(node.in_rrs.get(r.uid) or {})
            with_rr = _sum(preemptible, in_rr)
        node_short = (
            [] if skip else fits_node(values, node, to_values(r.available), matched_count, with_rr, ignored)
        )
        r_short: list[str] = []
        if r.policy in (POLICY_DEFAULT, POLICY_ALIGNED):
            if not node_short:
                return Status.success()
        elif r.policy == POLICY_RESTRICTED:
            r_short = fits_reservation(pod.requests, r, in_rr, detailed, ignored)
            if not node_short and not r_short:
                return Status.success()
        by_node.update(node_short)
        by_reservation.extend(r_short)
    if required:
        reasons = [*(node_reason(n) for n in sorted(by_node)), *by_reservation]
        return Status.unschedulable(*(reasons or [ERR_NO_RESERVATIONS]))
    if by_node:
        return Status.unschedulable(*(node_reason(n) for n in sorted(by_node)))
    alone = fits_node(values, node, {}, matched_count, preemptible, ignored)
    return Status.unschedulable(*map(node_reason, alone)) if alone else Status.success()


def filter_normal_pod(
    pod: PodFacts,
    node: NodeFacts,
    matched: Sequence[ReservationInfo],
    ignored: Ignored = NO_IGNORED,
    skip_fits_node: bool = False,
) -> Status:
    """Filter for a normal pod given the node's matched (or ignored) reservations."""
    if not matched:
        if pod.has_affinity:
            return Status.unresolvable(ERR_AFFINITY)
        if node.preemptible or node.in_rrs:
            short = fits_node(pod.values, node, {}, 0, to_values(node.preemptible), ignored)
            if short:
                return Status.unschedulable(ERR_PREEMPTION_FAILED)
        return Status.success()
    return filter_with_reservations(
        pod, node, matched, len(matched), pod.has_affinity, ignored, skip_fits_node
    )
