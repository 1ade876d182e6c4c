"""Property: the Reservation plugin's Filter for a normal pod (scheduler/plugins/reservation/filtering.py)
equals its readable oracle (tests/oracles/reservation.py) over generated nodes, pods and matched
reservations: policies, owners, inner reserved resources, restricted options, preemption, affinity names,
ignored resources and the skip-fits feature (docs/rules/scheduler-reservation.md#normal-pod-filter)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.quantity import Quantity
from apis.reservation import parse_reservation
from scheduler.framework.status import Code
from scheduler.framework.units import to_values
from scheduler.plugins.reservation.filtering import Ignored, NodeFacts, PodFacts, filter_normal_pod
from scheduler.plugins.reservation.info import info_with_pods
from tests.oracles.reservation import filter_pod

NAMES = ("cpu", "memory", "ephemeral-storage", "example.com/gpu", "example.org/x")
AMOUNT = st.sampled_from(["0", "500m", "1", "2", "3", "4", "6"])
BIG = st.sampled_from(["4", "8", "16"])  # node capacity: room enough that the reservations decide
CODES = {
    Code.SUCCESS: "Success",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
}


def amounts(names: tuple[str, ...] = NAMES) -> st.SearchStrategy[dict[str, str]]:
    return st.dictionaries(st.sampled_from(names), AMOUNT, max_size=len(names))


@st.composite
def reservations(draw: st.DrawFn, i: int) -> dict[str, Any]:
    alloc = draw(amounts().filter(bool))
    if draw(st.booleans()):
        alloc["pods"] = draw(st.sampled_from(["1", "2"]))
    annotations: dict[str, str] = {}
    reserved = draw(st.none() | amounts(("cpu", "memory")))
    if reserved is not None:
        annotations["node.koordinator.sh/reservation"] = json.dumps({"resources": reserved})
    options = draw(st.none() | st.lists(st.sampled_from(NAMES), max_size=3))
    if options is not None:
        annotations["scheduling.koordinator.sh/reservation-restricted-options"] = json.dumps(
            {"resources": options}
        )
    return {
        "name": f"r{i}",
        "policy": draw(st.sampled_from(["", "Aligned", "Restricted", "Restricted"])),
        "alloc": alloc,
        "annotations": annotations,
        "reserved": reserved,
        "options": options,
        "owners": draw(st.lists(amounts(), max_size=2)),
    }


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    node_alloc = draw(st.dictionaries(st.sampled_from(NAMES), BIG, max_size=len(NAMES)))
    node_alloc["pods"] = draw(st.sampled_from(["0", "3", "110", "110"]))
    rs = [draw(reservations(i)) for i in range(draw(st.sampled_from([0, 1, 1, 2, 2, 3])))]
    in_rrs = draw(
        st.none()
        | st.dictionaries(
            st.sampled_from(["uid-r0", "uid-r1", "uid-x"]), amounts(("cpu", "memory", "pods")), max_size=2
        )
    )
    return {
        "nodeAlloc": node_alloc,
        "pod": draw(amounts()),
        "rs": rs,
        "hasAffinity": draw(st.booleans()),
        "name": draw(st.sampled_from(["", "", "r0", "r1", "zz"])),
        "ignored": draw(st.booleans()) and draw(st.booleans()),
        "skipFits": draw(st.booleans()),
        "podCount": draw(st.integers(0, 4)),
        "requested": draw(amounts()),
        "reservedAllocated": draw(amounts()),
        "preemptible": draw(amounts()),
        "inRRs": in_rrs,
        "args": draw(
            st.sampled_from(
                [{}, {"ignoredResources": ["example.com/gpu"]}, {"ignoredResourceGroups": ["example.org"]}]
            )
        ),
    }


def q(d: dict[str, str]) -> dict[str, Quantity]:
    return {k: Quantity(v) for k, v in d.items()}


def _names(r: dict[str, Any]) -> list[str]:
    names = sorted(r["alloc"])
    if r["policy"] == "Restricted" and r["options"] is not None:
        names = [n for n in names if n in r["options"]] or names
    return names


def _reservation_object(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": r["name"], "uid": f"uid-{r['name']}", "annotations": r["annotations"]},
        "spec": {"owners": [{}], "allocatePolicy": r["policy"], "allocateOnce": False},
        "status": {"phase": "Available", "nodeName": "n1", "allocatable": r["alloc"]},
    }


def _owner(name: str, requests: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "d", "name": name},
        "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]},
    }


@settings(max_examples=60, deadline=None)
@given(cases())
def test_filter_equals_oracle(case: dict[str, Any]) -> None:
    infos = []
    for r in case["rs"]:
        owners = [_owner(f"{r['name']}-{k}", o) for k, o in enumerate(r["owners"])]
        infos.append(info_with_pods(parse_reservation(_reservation_object(r)), owners))
    in_rrs = None if case["inRRs"] is None else {u: q(v) for u, v in case["inRRs"].items()}
    args = case["args"]
    got = filter_normal_pod(
        PodFacts(q(case["pod"]), case["hasAffinity"], case["name"], case["ignored"]),
        NodeFacts(
            to_values(q(case["nodeAlloc"])),
            case["podCount"],
            to_values(q(case["requested"])),
            to_values(q(case["reservedAllocated"])),
            q(case["preemptible"]),
            in_rrs,
        ),
        infos,
        Ignored(
            frozenset(args.get("ignoredResources", ())), frozenset(args.get("ignoredResourceGroups", ()))
        ),
        case["skipFits"],
    )
    oracle_case = {
        "pod": q(case["pod"]),
        "allocatable": q(case["nodeAlloc"]),
        "matched": [
            {
                "policy": r["policy"],
                "allocatable": q(r["alloc"]),
                "reserved": None if r["reserved"] is None else q(r["reserved"]),
                "owners": [q(o) for o in r["owners"]],
                "names": _names(r),
                "uid": f"uid-{r['name']}",
                "name": r["name"],
            }
            for r in case["rs"]
        ],
        "podCount": case["podCount"],
        "requested": q(case["requested"]),
        "reservedAllocated": q(case["reservedAllocated"]),
        "preemptible": q(case["preemptible"]),
        "inRRs": in_rrs,
        "hasAffinity": case["hasAffinity"],
        "name": case["name"],
        "ignored": case["ignored"],
        "skipFits": case["skipFits"],
        "args": args,
    }
    assert (CODES[got.code], list(got.reasons)) == filter_pod(oracle_case)
