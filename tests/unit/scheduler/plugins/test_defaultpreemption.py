"""DefaultPreemption against kube-scheduler v1.20.2's own cases (default_preemption_test.go:
TestDryRunPreemption, TestSelectBestCandidate, TestPostFilter, TestPodEligibleToPreemptOthers,
TestNodesWherePreemptionMightHelp, the args validation). Start times are whole seconds (a pod's
``status.startTime`` is serialised to the second); kube's Go rand offsets are given explicitly."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.plugins.defaultpreemption import DefaultPreemptionArgs, PreemptionResult
from scheduler.plugins.defaultpreemption.candidates import eligible, pick_one, potential_array
from scheduler.plugins.defaultpreemption.victims import Candidate, Victims
from tests.unit.scheduler.plugins._preemption_support import (
    HIGH,
    LARGE,
    LOW,
    MEDIUM,
    MID,
    NEG,
    NOW,
    SMALL,
    VERY_HIGH,
    VERY_LARGE,
    Obj,
    Offsets,
    cycle,
    node,
    pdb,
    pod,
    profile,
)


def _dry_run(
    nodes: list[str],
    pods: list[Obj],
    preemptor: Obj,
    *,
    args: Obj | None = None,
    pdbs: list[Obj] = (),  # type: ignore[assignment]
    offsets: tuple[int, ...] = (0,),
) -> list[tuple[str, list[str], int]]:
    """(node, sorted victim names, PDB violations) of every candidate, sorted by node, as kube's test
    compares them."""
    fw, dp = profile(args, rng=Offsets(*offsets), pdbs=pdbs)
    snap = Snapshot.build([node(n) for n in nodes], pods)
    state = cycle(fw, preemptor, snap)
    found = dp.find_candidates(fw, state, preemptor, snap, {})
    assert found is not None
    return sorted(
        (c.name, sorted(p["metadata"]["name"] for p in c.victims.pods), c.victims.num_pdb_violations)
        for c in found
    )


def test_lower_priority_pods_preempted_on_both_nodes() -> None:
    pods = [
        pod("p1", node="node1", priority=MID, req=LARGE),
        pod("p2", node="node2", priority=MID, req=LARGE),
    ]
    got = _dry_run(["node1", "node2"], pods, pod("p", priority=HIGH, req=LARGE))
    assert got == [("node1", ["p1"], 0), ("node2", ["p2"], 0)]


def test_no_preemption_of_higher_priority_pods() -> None:
    pods = [
        pod("p1", node="node1", priority=MID, req=LARGE),
        pod("p2", node="node2", priority=MID, req=LARGE),
    ]
    assert _dry_run(["node1", "node2"], pods, pod("p", priority=LOW, req=LARGE)) == []


def test_medium_priority_preempted_small_low_priority_stays() -> None:
    pods = [
        pod("p1.1", node="node1", priority=LOW, req=SMALL),
        pod("p1.2", node="node1", priority=MID, req=LARGE),
        pod("p2", node="node2", priority=MID, req=LARGE),
    ]
    got = _dry_run(["node1", "node2"], pods, pod("p", priority=HIGH, req=LARGE))
    assert got == [("node1", ["p1.2"], 0), ("node2", ["p2"], 0)]


def test_mixed_priority_pods_preempted() -> None:
    pods = [
        pod("p1.1", node="node1", priority=MID, req=SMALL),
        pod("p1.2", node="node1", priority=LOW, req=SMALL),
        pod("p1.3", node="node1", priority=MID, req=MEDIUM),
        pod("p1.4", node="node1", priority=HIGH, req=SMALL),
        pod("p2", node="node2", priority=HIGH, req=LARGE),
    ]
    got = _dry_run(["node1", "node2"], pods, pod("p", priority=HIGH, req=LARGE))
    assert got == [("node1", ["p1.2", "p1.3"], 0)]


def test_equal_priorities_the_later_start_time_is_preempted() -> None:
    pods = [
        pod("p1.1", node="node1", priority=LOW, req=SMALL, start=5),
        pod("p1.2", node="node1", priority=LOW, req=SMALL, start=4),
        pod("p1.3", node="node1", priority=MID, req=MEDIUM, start=3),
        pod("p1.4", node="node1", priority=HIGH, req=SMALL, start=2),
        pod("p2", node="node2", priority=HIGH, req=LARGE, start=1),
    ]
    got = _dry_run(["node1", "node2"], pods, pod("p", priority=HIGH, req=LARGE))
    assert got == [("node1", ["p1.1", "p1.3"], 0)]


_FOO = {"matchLabels": {"app": "foo"}}


def test_pdb_violation_of_the_same_budget() -> None:
    pods = [
        pod("p1.1", node="node1", labels={"app": "foo"}, priority=MID, req=MEDIUM),
        pod("p1.2", node="node1", labels={"app": "foo"}, priority=MID, req=MEDIUM),
    ]
    got = _dry_run(["node1"], pods, pod("p", priority=HIGH, req=VERY_LARGE), pdbs=[pdb(_FOO, 1)])
    assert got == [("node1", ["p1.1", "p1.2"], 1)]


@pytest.mark.parametrize(
    ("disrupted", "allowed", "violations"),
    [
        (["p2"], 1, 1),  # the victims are not among the budget's disrupted pods
        (["p1.2"], 1, 0),  # p1.2 is: it uses no allowance
        (["p1.2"], 0, 1),  # p1.1 still violates a budget with none left
    ],
)
def test_pdb_disrupted_pods(disrupted: list[str], allowed: int, violations: int) -> None:
    pods = [
        pod("p1.1", node="node1", labels={"app": "foo"}, priority=MID, req=MEDIUM),
        pod("p1.2", node="node1", labels={"app": "foo"}, priority=MID, req=MEDIUM),
    ]
    budget = pdb(_FOO, allowed, disrupted)
    got = _dry_run(["node1"], pods, pod("p", priority=HIGH, req=VERY_LARGE), pdbs=[budget])
    assert got == [("node1", ["p1.1", "p1.2"], violations)]


@pytest.mark.parametrize(
    "budget",
    [
        pdb(None, 0),  # no selector: matches nothing
        pdb({}, 0),  # empty selector: kube skips it too
        pdb(_FOO, 0, namespace="other"),  # another namespace
        pdb({"matchLabels": {"app": "bar"}}, 0),
        pdb({"matchExpressions": [{"key": "app", "operator": "Bogus"}]}, 0),  # invalid: skipped
    ],
)
def test_pdbs_that_do_not_apply(budget: Obj) -> None:
    pods = [pod("p1", node="node1", labels={"app": "foo"}, priority=MID, req=LARGE)]
    got = _dry_run(["node1"], pods, pod("p", priority=HIGH, req=LARGE), pdbs=[budget])
    assert got == [("node1", ["p1"], 0)]


def test_pod_without_labels_never_violates() -> None:
    pods = [pod("p1", node="node1", priority=MID, req=LARGE)]
    got = _dry_run(["node1"], pods, pod("p", priority=HIGH, req=LARGE), pdbs=[pdb({"matchLabels": {}}, 0)])
    assert got == [("node1", ["p1"], 0)]


_FIVE = [f"node{i}" for i in range(1, 6)]


def _five(prios: list[int], labels: list[bool] | None = None) -> list[Obj]:
    return [
        pod(
            f"p{i}",
            node=f"node{i}",
            priority=pr,
            req=LARGE,
            labels={"app": "foo"} if labels and labels[i - 1] else None,
        )
        for i, pr in enumerate(prios, 1)
    ]


def test_args_limit_the_candidates() -> None:
    args = {"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 1}
    got = _dry_run(_FIVE, _five([MID] * 5), pod("p", priority=HIGH, req=LARGE), args=args, offsets=(4,))
    assert got == [("node1", ["p1"], 0), ("node5", ["p5"], 0)]  # offset 4: node5, node1


def test_args_limit_skipping_non_candidates() -> None:
    args = {"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 1}
    prios = [MID, VERY_HIGH, MID, MID, VERY_HIGH]
    got = _dry_run(_FIVE, _five(prios), pod("p", priority=HIGH, req=LARGE), args=args, offsets=(4,))
    assert got == [("node1", ["p1"], 0), ("node3", ["p3"], 0)]  # node5 no, node1, node2 no, node3


@pytest.mark.parametrize(
    ("offset", "want"), [(4, ["node1", "node5"]), (1, ["node2", "node3"]), (3, ["node4", "node5"])]
)
def test_offset_wraps_round(offset: int, want: list[str]) -> None:
    args = {"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 1}
    got = _dry_run(_FIVE, _five([MID] * 5), pod("tp", priority=HIGH, req=LARGE), args=args, offsets=(offset,))
    assert [c[0] for c in got] == want


def test_looks_past_num_candidates_until_a_non_violating_node() -> None:
    args = {"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 2}
    pods = _five([MID] * 5, [True, True, False, False, True])
    pods[1]["spec"]["priority"] = VERY_HIGH  # node2: no candidate (kube's "node2 (no, pdb)")
    got = _dry_run(
        _FIVE, pods, pod("p", priority=HIGH, req=LARGE), args=args, pdbs=[pdb(_FOO, 0)], offsets=(4,)
    )
    assert got == [("node1", ["p1"], 1), ("node3", ["p3"], 0), ("node5", ["p5"], 1)]


# --- TestSelectBestCandidate ------------------------------------------------------------------------


def _best(nodes: list[str], pods: list[Obj], preemptor: Obj) -> str:
    fw, dp = profile(rng=Offsets(0))
    snap = Snapshot.build([node(n) for n in nodes], pods)
    state = cycle(fw, preemptor, snap)
    found = dp.find_candidates(fw, state, preemptor, snap, {})
    assert found is not None
    best = pick_one(found, NOW)
    assert best is not None
    return best.name


def _pods(spec: list[tuple[str, int, dict[str, str], int]]) -> list[Obj]:
    return [pod(name, node=f"node{name[1]}", priority=pr, req=req, start=t) for name, pr, req, t in spec]


BEST_CASES: list[tuple[str, list[str], Obj, list[Obj], str]] = [
    ("no node needs preemption", ["node1"], pod("p", priority=HIGH, req=LARGE),
     _pods([("p1", MID, SMALL, 0)]), "node1"),
    ("min highest priority", ["node1", "node2", "node3"], pod("p", priority=HIGH, req=VERY_LARGE),
     _pods([("p1.1", MID, MEDIUM, 0), ("p1.2", MID, LARGE, 0), ("p2.1", MID, MEDIUM, 0),
            ("p2.2", LOW, MEDIUM, 0), ("p3.1", LOW, MEDIUM, 0), ("p3.2", LOW, MEDIUM, 0)]), "node3"),
    ("min sum of priorities", ["node1", "node2", "node3"], pod("p", priority=HIGH, req=VERY_LARGE),
     _pods([("p1.1", MID, MEDIUM, 0), ("p1.2", MID, LARGE, 0), ("p2.1", MID, LARGE, 0),
            ("p2.2", LOW, MEDIUM, 0), ("p3.1", MID, MEDIUM, 0), ("p3.2", MID, MEDIUM, 0)]), "node2"),
    ("min number of pods", ["node1", "node2", "node3"], pod("p", priority=HIGH, req=VERY_LARGE),
     _pods([("p1.1", MID, SMALL, 0), ("p1.2", NEG, SMALL, 0), ("p1.3", MID, SMALL, 0),
            ("p1.4", NEG, SMALL, 0), ("p2.1", MID, LARGE, 0), ("p2.2", NEG, MEDIUM, 0),
            ("p3.1", MID, MEDIUM, 0), ("p3.2", NEG, SMALL, 0), ("p3.3", LOW, SMALL, 0)]), "node2"),
    ("sum of adjusted priorities", ["node1", "node2", "node3"], pod("p", priority=HIGH, req=VERY_LARGE),
     _pods([("p1.1", MID, SMALL, 0), ("p1.2", NEG, SMALL, 0), ("p1.3", NEG, SMALL, 0),
            ("p2.1", MID, LARGE, 0), ("p2.2", NEG, MEDIUM, 0), ("p3.1", MID, MEDIUM, 0),
            ("p3.2", NEG, SMALL, 0), ("p3.3", LOW, SMALL, 0)]), "node2"),
    ("non-overlapping criteria", ["node1", "node2", "node3", "node4"],
     pod("p", priority=VERY_HIGH, req=VERY_LARGE),
     _pods([("p1.1", MID, SMALL, 0), ("p1.2", LOW, SMALL, 0), ("p1.3", LOW, SMALL, 0),
            ("p2.1", HIGH, LARGE, 0), ("p3.1", MID, MEDIUM, 0), ("p3.2", LOW, SMALL, 0),
            ("p3.3", LOW, SMALL, 0), ("p3.4", LOW, MEDIUM, 0), ("p4.1", MID, MEDIUM, 0),
            ("p4.2", MID, SMALL, 0), ("p4.3", MID, SMALL, 0), ("p4.4", NEG, SMALL, 0)]), "node1"),
    ("start time per node", ["node1", "node2", "node3"], pod("p", priority=HIGH, req=VERY_LARGE),
     _pods([("p1.1", MID, MEDIUM, 2), ("p1.2", MID, MEDIUM, 2), ("p2.1", MID, MEDIUM, 3),
            ("p2.2", MID, MEDIUM, 3), ("p3.1", MID, MEDIUM, 1), ("p3.2", MID, MEDIUM, 1)]), "node2"),
    ("start time of all pods", ["node1", "node2", "node3"], pod("p", priority=HIGH, req=VERY_LARGE),
     _pods([("p1.1", MID, MEDIUM, 4), ("p1.2", MID, MEDIUM, 2), ("p2.1", MID, MEDIUM, 5),
            ("p2.2", MID, MEDIUM, 1), ("p3.1", MID, MEDIUM, 3), ("p3.2", MID, MEDIUM, 6)]), "node3"),
    ("start time of the highest-priority victims", ["node1", "node2", "node3"],
     pod("p", priority=HIGH, req=VERY_LARGE),
     _pods([("p1.1", LOW, MEDIUM, 4), ("p1.2", MID, MEDIUM, 2), ("p2.1", MID, MEDIUM, 6),
            ("p2.2", LOW, MEDIUM, 1), ("p3.1", LOW, MEDIUM, 3), ("p3.2", MID, MEDIUM, 5)]), "node2"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("nodes", "preemptor", "pods", "want"), [c[1:] for c in BEST_CASES], ids=[c[0] for c in BEST_CASES]
)
def test_select_best_candidate(nodes: list[str], preemptor: Obj, pods: list[Obj], want: str) -> None:
    assert _best(nodes, pods, preemptor) == want


def test_pick_one_first_victim_priority_and_int64_sum() -> None:
    # kube reads the "highest" priority from the first victim (PDB-violating victims come first)
    a = Candidate("a", Victims((pod("x", priority=5), pod("y", priority=50)), 1))
    b = Candidate("b", Victims((pod("z", priority=10),), 1))
    assert pick_one([a, b], NOW) is a
    # the sum offsets each priority by 2^31: an extra victim at -5 adds 2^31 - 5, so one victim at 0
    # beats (0, -5), which a plain sum would prefer
    c = Candidate("c", Victims((pod("u", priority=0),), 0))
    d = Candidate("d", Victims((pod("v", priority=0), pod("w", priority=-5)), 0))
    assert pick_one([d, c], NOW) is c
    # and a victim at -2^31 adds nothing: (0, -2^31) ties (0) on the sum, then loses on the count
    lo = -(2**31)
    e = Candidate("e", Victims((pod("v", priority=0), pod("w", priority=lo)), 0))
    assert pick_one([e, c], NOW) is c
    f = Candidate("f", Victims((pod("v", priority=0), pod("w", priority=lo + 1)), 0))
    assert pick_one([f, e], NOW) is e


def test_pick_one_ties_keep_the_first_and_missing_start_time_is_now() -> None:
    a = Candidate("a", Victims((pod("x", priority=1, start=3),), 0))
    b = Candidate("b", Victims((pod("y", priority=1, start=3),), 0))
    assert pick_one([a, b], NOW) is a
    c = Candidate("c", Victims((pod("z", priority=1),), 0))  # not started: now, the latest
    assert pick_one([a, c], NOW) is c
    assert pick_one([], NOW) is None


# --- PostFilter ------------------------------------------------------------------------------------


def _post_filter(
    nodes: list[Obj], pods: list[Obj], preemptor: Obj, statuses: dict[str, Status] | None = None, **kw: Any
) -> tuple[Status, PreemptionResult | None]:
    fw, dp = profile(**kw)
    snap = Snapshot.build(nodes, pods)
    state = cycle(fw, preemptor, snap)
    if statuses is None:
        _, rejections = fw.filter_all(state, preemptor, snap)
        statuses = rejections.as_dict()
    st = dp.post_filter(state, preemptor, snap, statuses)
    return st, PreemptionResult.of(state)


def test_post_filter_nominates_the_node_with_victims() -> None:
    pods = [pod("victim", node="node1", priority=LOW, req=VERY_LARGE)]
    st, result = _post_filter([node("node1")], pods, pod("p", priority=HIGH, req=LARGE))
    assert st == Status(Code.SUCCESS, ("node1",), "DefaultPreemption")
    assert result is not None and result.node == "node1"
    assert [v["metadata"]["name"] for v in result.victims] == ["victim"]


def test_post_filter_tied_priority_stays_unschedulable() -> None:
    pods = [pod("victim", node="node1", priority=HIGH, req=VERY_LARGE)]
    st, result = _post_filter([node("node1")], pods, pod("p", priority=HIGH, req=LARGE))
    assert st.code == Code.UNSCHEDULABLE and st.reasons == ()
    assert result is None


def test_post_filter_respects_filtered_node_statuses() -> None:
    pods = [pod("victim", node="node1", priority=LOW, req=VERY_LARGE)]
    unresolvable = {"node1": Status.unresolvable("node(s) didn't match node selector")}
    st, result = _post_filter([node("node1")], pods, pod("p", priority=HIGH, req=LARGE), unresolvable)
    assert st.code == Code.UNSCHEDULABLE
    assert result == PreemptionResult(None, clear_preemptor=True)


def test_post_filter_one_of_two_nodes() -> None:
    nodes = [node("node1"), node("node2")]
    pods = [
        pod("v1", node="node1", priority=LOW, req=VERY_LARGE),
        pod("v2", node="node2", priority=HIGH, req=VERY_LARGE),
    ]
    st, result = _post_filter(nodes, pods, pod("p", priority=HIGH, req=LARGE), rng=Offsets(1))
    assert st.reasons == ("node1",)
    assert result is not None and result.candidate is not None


def test_post_filter_never_policy_and_errors() -> None:
    pods = [pod("victim", node="node1", priority=LOW, req=VERY_LARGE)]
    never = pod("p", priority=HIGH, req=LARGE, preemptionPolicy="Never")
    st, _ = _post_filter([node("node1")], pods, never)
    assert st.code == Code.UNSCHEDULABLE
    fw, dp = profile()
    dp.framework = None
    snap = Snapshot.build([node("node1")], pods)
    assert dp.post_filter(cycle(fw, never, snap), never, snap, {}).code == Code.ERROR


def test_post_filter_clears_lower_priority_nominations_on_the_node() -> None:
    from scheduler.framework.nominated import NominatedPods

    nominated = NominatedPods()
    low = pod("low", priority=LOW, req=SMALL, nominated="node1")
    higher = pod("higher", priority=HIGH + 1, req=SMALL, nominated="node1")
    nominated.add(low)
    nominated.add(higher)
    pods = [pod("victim", node="node1", priority=LOW, req=VERY_LARGE)]
    st, result = _post_filter(
        [node("node1")], pods, pod("p", priority=HIGH, req=LARGE), {}, nominated=nominated
    )
    assert st.reasons == ("node1",)
    assert result is not None and [p["metadata"]["name"] for p in result.clear_nominated] == ["low"]


# --- eligibility and potential nodes ---------------------------------------------------------------


def test_pod_eligible_to_preempt_others() -> None:
    terminating = pod("t", node="node1", priority=LOW)
    terminating["metadata"]["deletionTimestamp"] = "2020-01-01T00:00:00Z"
    snap = Snapshot.build([node("node1"), node("node2")], [terminating])
    nominated = pod("p", priority=HIGH, nominated="node1")
    assert not eligible(nominated, snap, {})  # a lower-priority pod is terminating there
    assert eligible(nominated, snap, {"node1": Status.unresolvable("x")})
    assert eligible(pod("p", priority=HIGH, nominated="node2"), snap, {})
    assert eligible(pod("p", priority=HIGH), snap, {})
    assert not eligible(pod("p", priority=HIGH, preemptionPolicy="Never"), snap, {})
    assert eligible(pod("p", priority=HIGH, preemptionPolicy="PreemptLowerPriority"), snap, {})
    assert eligible(pod("p", priority=LOW, nominated="node1"), snap, {})  # not lower than LOW


def test_nodes_where_preemption_might_help() -> None:
    snap = Snapshot.build([node(f"node{i}") for i in range(1, 5)])
    statuses = {
        "node1": Status.unschedulable("node(s) didn't match pod affinity/anti-affinity"),
        "node2": Status.unresolvable("node(s) didn't match node selector"),
        "node3": Status.unschedulable("Insufficient cpu"),
    }
    assert potential_array(snap, statuses).tolist() == [0, 2, 3]  # node4 has no status: tried as well


# --- args ----------------------------------------------------------------------------------------


def test_args_defaults_and_num_candidates() -> None:
    a = DefaultPreemptionArgs.from_args({})
    assert (a.min_candidate_nodes_percentage, a.min_candidate_nodes_absolute) == (10, 100)
    assert a.num_candidates(50) == 50
    assert a.num_candidates(5000) == 500
    b = DefaultPreemptionArgs.from_args({"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 1})
    assert b.num_candidates(5) == 2
    assert b.num_candidates(1) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"minCandidateNodesPercentage": -1}, "minCandidateNodesPercentage=-1: is not in the range [0, 100]"),
        (
            {"minCandidateNodesPercentage": 101},
            "minCandidateNodesPercentage=101: is not in the range [0, 100]",
        ),
        ({"minCandidateNodesAbsolute": -1}, "minCandidateNodesAbsolute=-1: is not in the range [0, inf)"),
        (
            {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
            "both minCandidateNodesPercentage and minCandidateNodesAbsolute cannot be zero",
        ),
        ({"minCandidateNodesAbsolute": "1"}, "minCandidateNodesAbsolute='1': must be an integer"),
        ({"minCandidateNodesAbsolute": 2**31}, "minCandidateNodesAbsolute=2147483648: must fit in 32 bits"),
    ],
)
def test_args_validation(args: Obj, message: str) -> None:
    with pytest.raises(ValueError, match=None) as e:
        DefaultPreemptionArgs.from_args(args)
    assert message in str(e.value)


def test_framework_schedule_reports_the_nominated_node() -> None:
    fw, _ = profile(rng=Offsets(0))
    snap = Snapshot.build([node("node1"), node("node2")], [
        pod("v1", node="node1", priority=MID, req=VERY_LARGE),
        pod("v2", node="node2", priority=LOW, req=VERY_LARGE),
    ])  # fmt: skip
    p = pod("p", priority=HIGH, req=LARGE)
    result = fw.schedule(cycle(fw, p, snap), p, snap)
    assert result.node is None and result.nominated == "node2"  # the lower victim priority wins
    assert result.status.message() == "0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient memory."
