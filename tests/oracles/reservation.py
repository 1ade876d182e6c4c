"""Oracle for the Reservation plugin's Filter for a normal pod
(docs/rules/scheduler-reservation.md#normal-pod-filter): the rules read straight off the page, in
Quantity arithmetic over plain dicts (the production code works in snapshot integers through
ReservationInfo), one reservation at a time, nothing precomputed.

A reservation here is ``{"policy", "allocatable", "reserved" (or None), "owners": [requests], "names",
"uid", "name"}``; quantities are ``apis.quantity.Quantity``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apis.quantity import Quantity

Q0 = Quantity("0")
NATIVE = ("cpu", "memory", "ephemeral-storage")


def _v(name: str, q: Quantity | None) -> int:
    if q is None:
        return 0
    return q.milli_value() if name == "cpu" else q.value()


def _scalar(name: str) -> bool:
    return name.startswith(("hugepages-", "attachable-volumes-")) or "/" in name


def _ignored(name: str, args: Mapping[str, Any]) -> bool:
    prefix, slash, _ = name.partition("/")
    return name in args.get("ignoredResources", ()) or bool(
        slash and prefix in args.get("ignoredResourceGroups", ())
    )


def allocated(r: Mapping[str, Any]) -> dict[str, Quantity]:
    """Σ of the owners' requests, only the names the reservation tracks."""
    out: dict[str, Quantity] = {}
    for req in r["owners"]:
        for n, q in req.items():
            if n in r["names"]:
                out[n] = out.get(n, Q0) + q
    return out


def available(r: Mapping[str, Any]) -> dict[str, Quantity]:
    alloc = allocated(r)
    reserved = r["reserved"] or {}
    out = {}
    for n in {*r["allocatable"], *alloc, *reserved}:
        out[n] = max(r["allocatable"].get(n, Q0) - alloc.get(n, Q0) - reserved.get(n, Q0), Q0)
    return out


def fits_node(pod: Mapping[str, Quantity], case: Mapping[str, Any], remained: Mapping[str, Quantity],
              preemptible: Mapping[str, Quantity]) -> list[str]:  # fmt: skip
    node = case["allocatable"]
    short = []
    if case["podCount"] - len(case["matched"]) + 1 > _v("pods", node.get("pods")):
        short.append("pods")
    scalars = [n for n in pod if _scalar(n) and n not in NATIVE]
    if all(_v(n, pod.get(n)) == 0 for n in NATIVE) and not scalars:
        return short
    for n in [*NATIVE, *scalars]:
        if n in scalars and _ignored(n, case["args"]):
            continue
        free = _v(n, node.get(n)) - (
            _v(n, case["requested"].get(n)) - _v(n, remained.get(n))
            - _v(n, case["reservedAllocated"].get(n)) - _v(n, preemptible.get(n))
        )  # fmt: skip
        if _v(n, pod.get(n)) > free:
            short.append(n)
    return short


def fits_reservation(
    pod: Mapping[str, Quantity], r: Mapping[str, Any], in_rr: Mapping[str, Quantity], detailed: bool,
    args: Mapping[str, Any],
) -> list[str]:  # fmt: skip
    out = []
    if "pods" in r["allocatable"]:
        used = len(r["owners"]) - (in_rr["pods"].value() if "pods" in in_rr else 0)
        cap = r["allocatable"]["pods"].value()
        if used + 1 > cap:
            out.append(
                "Reservation(s) Too many pods"
                + (f", requested: 1, used: {used}, capacity: {cap}" if detailed else "")
            )
    alloc = allocated(r)
    for n in r["names"]:
        if _ignored(n, args) or n not in pod or pod[n].is_zero():
            continue
        cap = r["allocatable"].get(n, Q0) - (r["reserved"] or {}).get(n, Q0)
        used = max(alloc[n] - in_rr.get(n, Q0), Q0) if n in alloc else Q0
        if pod[n] > cap - used:
            if detailed:
                amounts = f"requested: {_v(n, pod[n])}, used: {_v(n, used)}, capacity: {_v(n, cap)}"
                out.append(f"Reservation(s) Insufficient {n}, {amounts}")
            else:
                out.append(f"Reservation(s) Insufficient {n}")
    return out


def filter_pod(case: Mapping[str, Any]) -> tuple[str, list[str]]:
    """(status, reasons) of Filter for the case (built by the property test of the plugin's package)."""
    pod, matched = case["pod"], case["matched"]
    if not matched:
        if case["hasAffinity"]:
            return "UnschedulableAndUnresolvable", ["node(s) no reservations match reservation affinity"]
        if (case["preemptible"] or case["inRRs"]) and fits_node(pod, case, {}, case["preemptible"]):
            return "Unschedulable", ["node(s) preemption failed due to insufficient resources"]
        return "Success", []
    if case["ignored"]:
        return "Success", []
    by_node: set[str] = set()
    by_r: list[str] = []
    for r in matched:
        if not case["hasAffinity"] and not set(r["names"]) & set(pod):
            continue
        if case["name"] and case["name"] != r["name"]:
            continue
        in_rr = dict((case["inRRs"] or {}).get(r["uid"], {}))
        pre = dict(case["preemptible"])
        for n, q in in_rr.items():
            pre[n] = pre.get(n, Q0) + q
        skip = case["skipFits"] and len(matched) <= 1
        node_short = [] if skip else fits_node(pod, case, available(r), pre)
        r_short = (
            fits_reservation(pod, r, in_rr, bool(case["name"]), case["args"])
            if r["policy"] == "Restricted"
            else []
        )
        if not node_short and not r_short:
            return "Success", []
        by_node.update(node_short)
        by_r += r_short
    if case["hasAffinity"]:
        reasons = [f"Insufficient {n} by node" for n in sorted(by_node)] + by_r
        return "Unschedulable", reasons or ["node(s) no reservation(s) to meet the requirements"]
    if by_node:
        return "Unschedulable", [f"Insufficient {n} by node" for n in sorted(by_node)]
    alone = fits_node(pod, case, {}, case["preemptible"])
    return ("Unschedulable", [f"Insufficient {n} by node" for n in alone]) if alone else ("Success", [])
