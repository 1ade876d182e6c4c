"""The Reservation plugin's pure rules (docs/rules/scheduler-reservation.md#filter,
docs/rules/scheduler-reservation.md#matching, docs/rules/scheduler-reservation.md#score): fitsNode,
fitsReservation, filterWithReservations, the reserve pod's filter, matching, nomination and
ScoreReservation, each with koord's exact reason strings."""

from __future__ import annotations

from typing import Any

from apis.quantity import Quantity
from apis.reservation import parse_reservation
from apis.reservation_pod import parse_affinity
from scheduler.framework.status import Code
from scheduler.plugins.reservation.filtering import (
    ERR_AFFINITY,
    ERR_NO_RESERVATIONS,
    ERR_NODE_NOT_MATCH,
    ERR_POLICY_CONFLICT,
    ERR_PREEMPTION_FAILED,
    Ignored,
    NodeFacts,
    PodFacts,
    filter_normal_pod,
    filter_reserve_pod,
    filter_with_reservations,
    fits_node,
    fits_reservation,
    is_scalar,
)
from scheduler.plugins.reservation.info import ReservationInfo, info_with_pods
from scheduler.plugins.reservation.scoring import (
    default_normalize,
    nominate,
    preferred_node,
    score_reservation,
)
from scheduler.plugins.reservation.transformer import PodMatchFacts, is_matched, node_state
from tests.unit.scheduler.plugins.reservation._support import affinity, pod, reservation


def q(d: dict[str, str]) -> dict[str, Quantity]:
    return {k: Quantity(v) for k, v in d.items()}


def info(pods: list[dict[str, Any]] | None = None, **kw: Any) -> ReservationInfo:
    return info_with_pods(parse_reservation(reservation(**kw)), pods or [])


NODE = NodeFacts({"cpu": 8000, "memory": 16 << 30, "pods": 110}, 0, {"cpu": 8000, "memory": 8 << 30})


def test_reason_strings_are_koords() -> None:
    assert ERR_AFFINITY == "node(s) no reservations match reservation affinity"
    assert ERR_NODE_NOT_MATCH == "node(s) didn't match the nodeName specified by reservation"
    assert ERR_POLICY_CONFLICT == "node(s) reservation allocate policy conflict"
    assert ERR_NO_RESERVATIONS == "node(s) no reservation(s) to meet the requirements"
    assert ERR_PREEMPTION_FAILED == "node(s) preemption failed due to insufficient resources"


def test_fits_node_order_and_arithmetic() -> None:
    node = NodeFacts({"cpu": 4000, "memory": 100, "ephemeral-storage": 10, "pods": 1}, 1, {"cpu": 3000})
    pod_values = {"x.io/b": 1, "ephemeral-storage": 11, "cpu": 2000, "x.io/a": 1}
    short = fits_node(pod_values, node, {}, 0, {}, Ignored())
    assert short == ["pods", "cpu", "ephemeral-storage", "x.io/b", "x.io/a"]
    assert fits_node(
        pod_values, node, {"cpu": 1000}, 1, {"cpu": 1000}, Ignored(frozenset({"x.io/b"}), frozenset({"x.io"}))
    ) == ["ephemeral-storage"]


def test_fits_node_without_requests_checks_pods_only() -> None:
    node = NodeFacts({"pods": 0}, 0)
    assert fits_node({}, node, {}, 0, {}, Ignored()) == ["pods"]
    assert fits_node({"foo": 5}, NodeFacts({"pods": 5}), {}, 0, {}, Ignored()) == []  # not a scalar
    assert is_scalar("kubernetes.io/batch-cpu") and is_scalar("hugepages-2Mi") and not is_scalar("foo")


def test_fits_reservation_detailed_and_plain() -> None:
    r = info(
        [pod("o", {"cpu": "3"})],
        policy="Restricted",
        allocate_once=False,
        alloc={"cpu": "4", "memory": "8Gi", "pods": "1"},
    )
    reasons = fits_reservation(q({"cpu": "2", "memory": "8Gi"}), r, {}, False, Ignored())
    assert reasons == ["Reservation(s) Too many pods", "Reservation(s) Insufficient cpu"]
    detailed = fits_reservation(q({"cpu": "2", "memory": "9Gi"}), r, {}, True, Ignored())
    assert detailed == [
        "Reservation(s) Too many pods, requested: 1, used: 1, capacity: 1",
        "Reservation(s) Insufficient cpu, requested: 2000, used: 3000, capacity: 4000",
        f"Reservation(s) Insufficient memory, requested: {9 << 30}, used: 0, capacity: {8 << 30}",
    ]
    # preemption inside the reservation frees a pod and 2 cpu
    assert fits_reservation(q({"cpu": "3"}), r, q({"cpu": "2", "pods": "1"}), False, Ignored()) == []


def test_filter_normal_pod_paths() -> None:
    facts = PodFacts(q({"cpu": "5"}))
    aligned = info(policy="Aligned")
    assert filter_normal_pod(PodFacts(q({"cpu": "1"}), has_affinity=True), NODE, []).reasons == (
        ERR_AFFINITY,
    )
    assert filter_normal_pod(facts, NODE, []).is_success()
    st = filter_normal_pod(facts, NODE, [aligned])
    assert (st.code, st.reasons) == (Code.UNSCHEDULABLE, ("Insufficient cpu by node",))
    assert filter_normal_pod(PodFacts(q({"cpu": "4"})), NODE, [aligned]).is_success()
    none = filter_with_reservations(PodFacts(q({"cpu": "1"}), True, "zz"), NODE, [aligned], 1, True)
    assert none.reasons == (ERR_NO_RESERVATIONS,)
    ignored = PodFacts(q({"cpu": "100"}), True, "", ignored=True)
    assert filter_normal_pod(ignored, NODE, [aligned]).is_success()


def test_preemption_failed_only_with_preemption_state() -> None:
    node = NodeFacts({"cpu": 8000, "pods": 110}, preemptible=q({"cpu": "1"}))
    st = filter_normal_pod(PodFacts(q({"cpu": "10"})), node, [])
    assert (st.code, st.reasons) == (Code.UNSCHEDULABLE, (ERR_PREEMPTION_FAILED,))
    assert filter_normal_pod(
        PodFacts(q({"cpu": "10"})), NodeFacts({"cpu": 8000, "pods": 110}), []
    ).is_success()


def test_reserve_pod_filter() -> None:
    assert filter_reserve_pod("n1", "n2", "", []).reasons == (ERR_NODE_NOT_MATCH,)
    assert filter_reserve_pod("n1", "n1", "", ["Aligned"]).code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert filter_reserve_pod("n1", "", "Aligned", [""]).reasons == (ERR_POLICY_CONFLICT,)
    assert filter_reserve_pod("n1", "", "Aligned", ["Restricted", "Aligned"]).is_success()
    assert filter_reserve_pod("n1", "", "", ["", ""]).is_success()


def facts_for(p: dict[str, Any]) -> PodMatchFacts:
    from apis.pod import pod_requests
    from apis.reservation_pod import exact_match_names, is_reservation_ignored

    return PodMatchFacts(
        p, parse_affinity(p), exact_match_names(p), pod_requests(p), is_reservation_ignored(p)
    )


def test_matching_rules() -> None:
    plain = facts_for(pod())
    assert is_matched(plain, info(), {}, "n1")
    assert not is_matched(plain, info(owners=[]), {}, "n1")
    assert not is_matched(plain, info(spec={"unschedulable": True}), {}, "n1")
    named = facts_for(pod(annotations=affinity(name="r1")))
    assert is_matched(named, info(spec={"unschedulable": True}), {}, "n1")
    assert not is_matched(named, info(name="r2"), {}, "n1")
    tainted = info(spec={"taints": [{"key": "k", "effect": "NoSchedule"}]})
    assert not is_matched(plain, tainted, {}, "n1")
    tolerating = facts_for(pod(annotations=affinity(tolerations=[{"key": "k", "operator": "Exists"}])))
    assert is_matched(tolerating, tainted, {}, "n1")
    selecting = facts_for(pod(annotations=affinity(reservationSelector={"pool": "a"})))
    assert not is_matched(selecting, info(), {"pool": "b"}, "n1")
    assert is_matched(selecting, info(labels={"pool": "a"}), {"pool": "b"}, "n1")  # reservation labels win


def test_node_state_restoration() -> None:
    mine = info([pod("o1", {"cpu": "2"})], name="r1", allocate_once=False)
    other = info(
        [pod("o2", {"cpu": "1"})], name="r2", allocate_once=False, owners=[{"object": {"name": "x"}}]
    )
    st = node_state(facts_for(pod()), [mine, other], "n1", {}, {"cpu": 8000})
    assert st is not None
    assert [r.name for r in st.matched] == ["r1"] and [r.name for r in st.unmatched] == ["r2"]
    assert st.requested == {"cpu": 7000} and st.reserved_allocated == {"cpu": 2000}
    assert node_state(facts_for(pod(annotations=affinity(name="zz"))), [other], "n1", {}, {}) is None


def test_score_reservation_and_nomination() -> None:
    r = info(alloc={"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "0"})
    assert score_reservation(q({"cpu": "2", "memory": "4Gi"}), r) == 50
    assert score_reservation(q({"cpu": "5", "memory": "4Gi"}), r) == 25  # over capacity adds 0
    small = info(name="small", alloc={"cpu": "2", "memory": "4Gi"})
    ordered = info(name="ordered", labels={"scheduling.koordinator.sh/reservation-order": "7"})
    facts = PodFacts(q({"cpu": "2", "memory": "4Gi"}))
    node = NodeFacts({"cpu": 16000, "memory": 32 << 30, "pods": 110})
    assert nominate(facts, node, [r, small]) is small
    assert nominate(facts, node, [r, small, ordered]) is ordered
    used = info([pod("o", {"cpu": "1"})], name="used")
    assert nominate(facts, node, [used]) is None
    assert nominate(PodFacts(facts.requests, has_affinity=True), node, [used]) is used
    assert preferred_node(["a", "b"], {"a": [ordered], "b": [ordered]}) == "a"
    assert preferred_node(["a"], {"a": [small]}) is None
    assert default_normalize({"a": 1000, "b": 50}) == {"a": 100, "b": 5}
    assert default_normalize({"a": 0}) == {"a": 0}
