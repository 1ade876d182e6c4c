"""InterPodAffinity (docs/rules/scheduler-interpodaffinity.md): each Filter rule with kube-scheduler
1.20.2's exact reasons and codes, the first-pod rule, namespaces, selectors, parse errors, Score and
its normalisation (cases of 1.20.2's scoring_test.go), hardPodAffinityWeight, args, and the pod index
kept up to date as pods and nodes change. Every snapshot is also checked against the oracle."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.plugins.interpodaffinity import DEFAULT_WEIGHT, NAME, InterPodAffinity, InterPodAffinityArgs
from scheduler.plugins.interpodaffinity.prefilter import pod_index
from scheduler.plugins.interpodaffinity.terms import NO_TERMS, parse_pod_terms
from tests.oracles.interpodaffinity import InterPodAffinityOracle
from tests.unit.scheduler.plugins._support import add_nodes, add_pods, make_node, refresh_nodes

Obj = dict[str, Any]
GENERAL = "node(s) didn't match pod affinity/anti-affinity"
AFFINITY = Status.unresolvable(GENERAL, "node(s) didn't match pod affinity rules", plugin=NAME)
ANTI = Status.unschedulable(GENERAL, "node(s) didn't match pod anti-affinity rules", plugin=NAME)
EXISTING = Status.unschedulable(
    GENERAL, "node(s) didn't satisfy existing pods anti-affinity rules", plugin=NAME
)
OK = Status.success()


def pod(
    name: str = "in",
    *,
    node: str | None = None,
    ns: str = "ns",
    labels: dict[str, str] | None = None,
    affinity: Obj | None = None,
) -> Obj:
    spec: Obj = {"containers": []}
    if node is not None:
        spec["nodeName"] = node
    if affinity is not None:
        spec["affinity"] = affinity
    return {"metadata": {"name": name, "namespace": ns, "labels": labels or {}}, "spec": spec}


def term(selector: Obj | None, key: str = "zone", namespaces: list[str] | None = None) -> Obj:
    t: Obj = {"topologyKey": key}
    if selector is not None:
        t["labelSelector"] = selector
    if namespaces is not None:
        t["namespaces"] = namespaces
    return t


def sel_in(key: str, *values: str) -> Obj:
    return {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}


def required(*terms: Obj, anti: bool = False) -> Obj:
    kind = "podAntiAffinity" if anti else "podAffinity"
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def preferred(*weighted: tuple[int, Obj], anti: bool = False) -> Obj:
    kind = "podAntiAffinity" if anti else "podAffinity"
    items = [{"weight": w, "podAffinityTerm": t} for w, t in weighted]
    return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": items}}


def check_filter(incoming: Obj, snap: Snapshot, plugin: InterPodAffinity | None = None) -> list[Status]:
    """The plugin's statuses of every row, after checking they equal the oracle's."""
    plugin = plugin or InterPodAffinity()
    oracle = InterPodAffinityOracle(plugin.args.hard_pod_affinity_weight)
    state, ostate = CycleState(0.0), CycleState(0.0)
    assert plugin.pre_filter(state, incoming, snap).is_success()
    assert oracle.pre_filter(ostate, incoming, snap).is_success()
    res = plugin.filter_all(state, incoming, snap)
    got = [res.status_of(i) for i in range(snap.n)]
    assert got == [oracle.filter(ostate, incoming, snap, i) for i in range(snap.n)]
    fresh = plugin.filter_all(CycleState(0.0), incoming, snap)  # without PreFilter
    assert [fresh.status_of(i) for i in range(snap.n)] == got
    return got


def check_scores(
    incoming: Obj, snap: Snapshot, plugin: InterPodAffinity | None = None, rows: list[int] | None = None
) -> tuple[list[int], list[int]]:
    """(raw, normalised) scores of `rows`, equal to the oracle's."""
    plugin = plugin or InterPodAffinity()
    oracle = InterPodAffinityOracle(plugin.args.hard_pod_affinity_weight)
    feasible = np.arange(snap.n, dtype=np.int64) if rows is None else np.asarray(rows, np.int64)
    state, ostate = CycleState(0.0), CycleState(0.0)
    assert plugin.pre_score(state, incoming, snap, feasible).is_success()
    assert oracle.pre_score(ostate, incoming, snap, feasible).is_success()
    got = np.asarray(plugin.score_all(state, incoming, snap, feasible))
    raw = (got if len(got) == len(feasible) else got.take(feasible)).copy()
    want = [oracle.score(ostate, incoming, snap, int(i))[0] for i in feasible]
    assert raw.tolist() == want
    norm, onorm = raw.copy(), np.asarray(want, np.int64)
    assert plugin.normalize_scores(state, incoming, norm).is_success()
    oracle.normalize_scores(ostate, incoming, onorm)
    assert norm.tolist() == onorm.tolist()
    return raw.tolist(), norm.tolist()


ZONES = [make_node("n1", labels={"zone": "z1"}), make_node("n2", labels={"zone": "z1"})]
ZONES += [make_node("n3", labels={"zone": "z2"}), make_node("n4", labels={})]


# --- Filter: the incoming pod's required affinity ------------------------------------------------------


def test_no_affinity_passes_everywhere_and_scores_zero() -> None:
    snap = Snapshot.build(ZONES, [pod("e", node="n1", labels={"app": "web"})])
    assert check_filter(pod(), snap) == [OK] * 4
    assert check_scores(pod(), snap) == ([0] * 4, [0] * 4)


def test_affinity_requires_a_matching_pod_in_the_nodes_topology() -> None:
    snap = Snapshot.build(ZONES, [pod("e", node="n1", labels={"app": "web"})])
    incoming = pod(affinity=required(term(sel_in("app", "web"))))
    assert check_filter(incoming, snap) == [OK, OK, AFFINITY, AFFINITY]
    assert AFFINITY.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_affinity_namespaces() -> None:
    snap = Snapshot.build(ZONES, [pod("e", node="n1", ns="other", labels={"app": "web"})])
    own_ns = pod(affinity=required(term(sel_in("app", "web"))))
    assert check_filter(own_ns, snap) == [AFFINITY] * 4  # the pod's own namespace by default
    listed = pod(affinity=required(term(sel_in("app", "web"), namespaces=["x", "other"])))
    assert check_filter(listed, snap) == [OK, OK, AFFINITY, AFFINITY]


def test_namespace_selector_is_ignored() -> None:
    """A 1.20 API server drops ``namespaceSelector``: the term keeps its own namespace."""
    snap = Snapshot.build(ZONES, [pod("e", node="n1", ns="other", labels={"app": "web"})])
    t = term(sel_in("app", "web")) | {"namespaceSelector": {}}
    assert check_filter(pod(affinity=required(t)), snap) == [AFFINITY] * 4


def test_first_pod_of_a_group_may_go_where_the_topology_key_exists() -> None:
    snap = Snapshot.build(ZONES, [pod("e", node="n1", labels={"app": "db"})])
    incoming = pod(labels={"app": "web"}, affinity=required(term(sel_in("app", "web"))))
    assert check_filter(incoming, snap) == [OK, OK, OK, AFFINITY]  # n4 lacks the zone label
    # not when it does not match its own terms
    other = pod(labels={"app": "api"}, affinity=required(term(sel_in("app", "web"))))
    assert check_filter(other, snap) == [AFFINITY] * 4


def test_first_pod_rule_off_once_a_pod_matches_anywhere() -> None:
    snap = Snapshot.build(ZONES, [pod("e", node="n3", labels={"app": "web"})])
    incoming = pod(labels={"app": "web"}, affinity=required(term(sel_in("app", "web"))))
    assert check_filter(incoming, snap) == [AFFINITY, AFFINITY, OK, AFFINITY]


def test_affinity_terms_must_all_match_the_same_pod_and_all_keys_exist() -> None:
    nodes = [make_node("n1", labels={"zone": "z1", "rack": "r1"}), make_node("n2", labels={"zone": "z1"})]
    pods = [pod("a", node="n1", labels={"app": "web"}), pod("b", node="n1", labels={"tier": "fe"})]
    snap = Snapshot.build(nodes, pods)
    split = pod(affinity=required(term(sel_in("app", "web")), term(sel_in("tier", "fe"), key="rack")))
    assert check_filter(split, snap) == [AFFINITY, AFFINITY]  # no single pod matches both terms
    pods.append(pod("c", node="n1", labels={"app": "web", "tier": "fe"}))
    snap = Snapshot.build(nodes, pods)
    assert check_filter(split, snap) == [OK, AFFINITY]  # n2 has no rack label


def test_null_selector_matches_no_pod_and_empty_selector_every_pod() -> None:
    snap = Snapshot.build(ZONES, [pod("e", node="n3", labels={"app": "db"})])
    assert check_filter(pod(affinity=required(term(None))), snap) == [AFFINITY] * 4
    assert check_filter(pod(affinity=required(term({}))), snap) == [AFFINITY, AFFINITY, OK, AFFINITY]


# --- Filter: anti-affinity -------------------------------------------------------------------------------


def test_anti_affinity_rejects_the_topology_of_a_matching_pod() -> None:
    snap = Snapshot.build(ZONES, [pod("e", node="n1", labels={"app": "web"})])
    incoming = pod(affinity=required(term(sel_in("app", "web")), anti=True))
    assert check_filter(incoming, snap) == [ANTI, ANTI, OK, OK]
    assert ANTI.code == Code.UNSCHEDULABLE


def test_anti_affinity_any_term_rejects() -> None:
    nodes = [
        make_node("n1", labels={"zone": "z1", "host": "n1"}),
        make_node("n2", labels={"zone": "z1", "host": "n2"}),
    ]
    snap = Snapshot.build(nodes, [pod("e", node="n1", labels={"app": "web"})])
    incoming = pod(
        affinity=required(term(sel_in("app", "db")), term(sel_in("app", "web"), key="host"), anti=True)
    )
    assert check_filter(incoming, snap) == [ANTI, OK]


def test_existing_pods_anti_affinity_is_symmetric() -> None:
    existing = pod(
        "e", node="n1", labels={"app": "db"}, affinity=required(term(sel_in("app", "web")), anti=True)
    )
    snap = Snapshot.build(ZONES, [existing])
    assert check_filter(pod(labels={"app": "web"}), snap) == [EXISTING, EXISTING, OK, OK]
    assert check_filter(pod(labels={"app": "api"}), snap) == [OK] * 4
    assert check_filter(pod(ns="other", labels={"app": "web"}), snap) == [OK] * 4  # the term's namespace


def test_first_failing_check_decides() -> None:
    existing = pod(
        "e", node="n1", labels={"app": "web"}, affinity=required(term(sel_in("app", "in")), anti=True)
    )
    snap = Snapshot.build(ZONES, [existing])
    both = pod(
        labels={"app": "in"},
        affinity=required(term(sel_in("app", "web")), anti=True) | required(term(sel_in("app", "nothing"))),
    )
    assert check_filter(both, snap) == [AFFINITY] * 4
    anti_and_existing = pod(labels={"app": "in"}, affinity=required(term(sel_in("app", "web")), anti=True))
    assert check_filter(anti_and_existing, snap) == [ANTI, ANTI, OK, OK]


def test_existing_pod_term_without_topology_key_on_its_node_counts_nothing() -> None:
    existing = pod("e", node="n4", labels={}, affinity=required(term({}), anti=True))
    snap = Snapshot.build(ZONES, [existing])
    assert check_filter(pod(labels={"app": "x"}), snap) == [OK] * 4


# --- parsing ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("affinity", "category"),
    [
        (required(term(sel_in("app", "{{.bad-value.}}"))), "requiredAffinityTerms"),
        (
            required(term({"matchExpressions": [{"key": "a", "operator": "Bogus"}]}), anti=True),
            "requiredAntiAffinityTerms",
        ),
        (preferred((5, term(sel_in("app", "{{.bad-value.}}")))), "preferredAffinityTerms"),
        (preferred((5, term({"matchLabels": {"bad key": "x"}})), anti=True), "preferredAntiAffinityTerms"),
    ],
)
def test_unparsable_terms_fail_pre_filter(affinity: Obj, category: str) -> None:
    snap = Snapshot.build(ZONES)
    incoming = pod(affinity=affinity)
    st = InterPodAffinity().pre_filter(CycleState(0.0), incoming, snap)
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.message().startswith(f"parsing pod: {category}: ")
    assert InterPodAffinity().pre_score(CycleState(0.0), incoming, snap, np.arange(4)).code == Code.ERROR
    result = Framework([InterPodAffinity()]).schedule(CycleState(0.0), incoming, snap)
    # As kube 1.20: every node gets the PreFilter's status, the pod a FitError naming it on all four.
    assert result.node is None and result.rejections.plugins() == {NAME}
    assert result.status.message().startswith(f"0/4 nodes are available: 4 parsing pod: {category}: ")


def test_parse_terms() -> None:
    assert parse_pod_terms(pod()) is NO_TERMS
    t = parse_pod_terms(pod(ns="a", affinity=preferred((7, term({}, key="k", namespaces=["b", "c"])))))
    assert t.error is None and t.has_affinity and not t.required_affinity
    (w,) = t.preferred_affinity
    assert (w.weight, w.term.namespaces, w.term.topology_key) == (7, frozenset({"b", "c"}), "k")
    assert parse_pod_terms(pod(ns="a", affinity=required(term({})))).required_affinity[0].namespaces == {"a"}
    assert parse_pod_terms(pod(affinity={"podAffinity": {}})).has_affinity


# --- Score -----------------------------------------------------------------------------------------------


def test_score_region_with_more_matches_scores_higher() -> None:
    """1.20.2 scoring_test: stayWithS2InRegion → 100, 50, 100, 100, 50."""
    china, india = {"region": "China"}, {"region": "India"}
    nodes = [
        make_node(f"machine{i}", labels=lab) for i, lab in enumerate([china, india, china, china, india], 1)
    ]
    pods = [
        pod(f"p{i}", node=f"machine{m}", labels={"security": "S2"}) for i, m in enumerate([1, 1, 2, 3, 4, 5])
    ]
    incoming = pod(
        labels={"security": "S1"}, affinity=preferred((6, term(sel_in("security", "S2"), key="region")))
    )
    raw, norm = check_scores(incoming, Snapshot.build(nodes, pods))
    assert raw == [24, 12, 24, 24, 12]
    assert norm == [100, 50, 100, 100, 50]


def test_score_operators_and_partial_matches() -> None:
    """1.20.2 scoring_test affinity3: 20, 100, 0."""
    nodes = [
        make_node("machine1", labels={"region": "China"}),
        make_node("machine2", labels={"region": "India"}),
        make_node("machine3", labels={"az": "az1"}),
    ]
    pods = [
        pod("a", node="machine1", labels={"security": "S1"}),
        pod("b", node="machine2", labels={"security": "S2"}),
        pod("c", node="machine3", labels={"security": "S1"}),
    ]
    s8 = {
        "matchExpressions": [
            {"key": "security", "operator": "NotIn", "values": ["S1"]},
            {"key": "security", "operator": "In", "values": ["S2"]},
        ]
    }
    s2 = {
        "matchExpressions": [
            {"key": "security", "operator": "Exists"},
            {"key": "wrongkey", "operator": "DoesNotExist"},
        ]
    }
    incoming = pod(
        labels={"security": "S1"}, affinity=preferred((8, term(s8, "region")), (2, term(s2, "region")))
    )
    assert check_scores(incoming, Snapshot.build(nodes, pods)) == ([2, 10, 0], [20, 100, 0])


def test_score_anti_affinity_and_negative_normalisation() -> None:
    nodes = [make_node("m1", labels={"az": "az1"}), make_node("m2", labels={"az": "az2"}), make_node("m3")]
    pods = [pod("a", node="m1", labels={"security": "S1"}), pod("b", node="m1", labels={"security": "S1"})]
    pods.append(pod("c", node="m2", labels={"security": "S1"}))
    incoming = pod(affinity=preferred((5, term(sel_in("security", "S1"), "az")), anti=True))
    # min is -10, max starts at 0: 100*(s+10)/10
    assert check_scores(incoming, Snapshot.build(nodes, pods)) == ([-10, -5, 0], [0, 50, 100])
    # only the feasible rows count for min and max
    assert check_scores(incoming, Snapshot.build(nodes, pods), rows=[1, 2]) == ([-5, 0], [0, 100])


def test_score_symmetry_hard_weight() -> None:
    """1.20.2 scoring_test: hard pod affinity symmetry weighs 1 by default and nothing at 0."""
    nodes = [make_node("m1", labels={"region": "China"}), make_node("m2", labels={"region": "China"})]
    nodes.append(make_node("m3", labels={"region": "India"}))
    hard = required(term(sel_in("security", "S1"), "region"))
    pods = [pod("a", node="m1", labels={"x": "y"}, affinity=hard), pod("b", node="m2")]
    incoming = pod(labels={"security": "S1"})
    snap = Snapshot.build(nodes, pods)
    assert check_scores(incoming, snap) == ([1, 1, 0], [100, 100, 0])
    five = InterPodAffinity.from_args({"hardPodAffinityWeight": 5})
    assert check_scores(incoming, snap, five)[0] == [5, 5, 0]
    zero = InterPodAffinity.from_args({"hardPodAffinityWeight": 0})
    assert check_scores(incoming, snap, zero) == ([0, 0, 0], [0, 0, 0])


def test_score_symmetry_preferred_terms_of_existing_pods() -> None:
    nodes = [make_node("m1", labels={"zone": "a"}), make_node("m2", labels={"zone": "b"})]
    likes = preferred((4, term(sel_in("app", "in"))))
    dislikes = preferred((3, term(sel_in("app", "in"))), anti=True)
    pods = [pod("a", node="m1", affinity=likes), pod("b", node="m2", affinity=dislikes)]
    pods.append(pod("c", node="m2", affinity=dislikes))
    assert check_scores(pod(labels={"app": "in"}), Snapshot.build(nodes, pods)) == ([4, -6], [100, 0])


def test_int32_weight_product_wraps() -> None:
    nodes = [make_node("m1", labels={"zone": "a"}), make_node("m2", labels={"zone": "b"})]
    pods = [pod("a", node="m1", labels={"app": "x"})]
    incoming = pod(affinity=preferred((-(2**31), term(sel_in("app", "x"))), anti=True))
    raw, _ = check_scores(incoming, Snapshot.build(nodes, pods))
    assert raw == [-(2**31), 0]  # -(-2^31) wraps to -2^31 in int32, as in Go


# --- args --------------------------------------------------------------------------------------------------


def test_args_defaults_and_validation() -> None:
    assert InterPodAffinity.from_args({}).args == InterPodAffinityArgs(1)
    assert InterPodAffinity.from_args({"hardPodAffinityWeight": None}).args.hard_pod_affinity_weight == 1
    assert InterPodAffinity.from_args({"hardPodAffinityWeight": 0}).args.hard_pod_affinity_weight == 0
    assert (
        InterPodAffinity.from_args({"hardPodAffinitySymmetricWeight": 30}).args.hard_pod_affinity_weight == 30
    )
    legacy_unset = {"hardPodAffinityWeight": 7, "hardPodAffinitySymmetricWeight": 0}
    assert InterPodAffinity.from_args(legacy_unset).args.hard_pod_affinity_weight == 7
    with pytest.raises(ValueError, match=r"hardPodAffinityWeight=200: not in valid range \[0-100\]"):
        InterPodAffinity.from_args({"hardPodAffinityWeight": 200})
    with pytest.raises(ValueError, match=r"hardPodAffinityWeight=-1: not in valid range \[0-100\]"):
        InterPodAffinity.from_args({"hardPodAffinityWeight": -1})
    with pytest.raises(ValueError, match=r"hardPodAffinitySymmetricWeight=101"):
        InterPodAffinity.from_args({"hardPodAffinitySymmetricWeight": 101})
    with pytest.raises(ValueError, match=r"hardPodAffinityWeight=True: must be an integer"):
        InterPodAffinity.from_args({"hardPodAffinityWeight": True})
    assert DEFAULT_WEIGHT == 1


# --- the index follows the snapshot ---------------------------------------------------------------------


def test_index_follows_pod_and_node_changes() -> None:
    snap = Snapshot.build(ZONES)
    anti_web = required(term(sel_in("app", "web")), anti=True)
    incoming = pod(labels={"app": "web"}, affinity=required(term(sel_in("app", "db"))))
    assert check_filter(incoming, snap) == [AFFINITY] * 4
    add_pods(snap, [pod("db", node="n3", labels={"app": "db"})], 1)
    assert check_filter(incoming, snap) == [AFFINITY, AFFINITY, OK, AFFINITY]
    add_pods(snap, [pod("guard", node="n3", affinity=anti_web)], 2)
    assert check_filter(incoming, snap) == [AFFINITY, AFFINITY, EXISTING, AFFINITY]
    # the guard pod replaced by one without terms
    add_pods(snap, [pod("guard", node="n3")], 3)
    assert check_filter(incoming, snap) == [AFFINITY, AFFINITY, OK, AFFINITY]
    # relabel: n1 joins zone z2
    refresh_nodes(snap, {0: make_node("n1", labels={"zone": "z2"})}, 4)
    assert check_filter(incoming, snap) == [OK, AFFINITY, OK, AFFINITY]
    # a pod removed
    info = snap.infos[2]
    info.remove_pod("ns/db", 5)
    snap.refresh([info])
    assert check_filter(incoming, snap) == [AFFINITY] * 4
    add_nodes(snap, [make_node("n5", labels={"zone": "z2"})], 6)
    add_pods(snap, [pod("db2", node="n5", labels={"app": "db"})], 7)
    assert check_filter(incoming, snap) == [OK, AFFINITY, OK, AFFINITY, OK]  # zone z2
    index = pod_index(snap)
    assert sorted(k for row in index.rows for k in row) == ["ns/db2", "ns/guard"]
    assert not index.anti_groups and not index.score_groups


def test_framework_places_pods_next_to_their_group() -> None:
    rng = random.Random(0)
    fw = Framework([InterPodAffinity()], rng=rng)
    snap = Snapshot.build(ZONES, [pod("e", node="n3", labels={"app": "web"})])
    near = pod(affinity=preferred((10, term(sel_in("app", "web")))))
    assert fw.schedule(CycleState(0.0), near, snap).node == "n3"
    away = pod(affinity=required(term(sel_in("app", "web")), anti=True))
    result = fw.schedule(CycleState(0.0), away, snap)
    assert result.node in {"n1", "n2", "n4"}
    alone = pod("x", affinity=required(term(sel_in("app", "web"), key="host")))
    result = fw.schedule(CycleState(0.0), alone, snap)
    assert result.node is None
    assert result.status.message() == (
        "0/4 nodes are available: 4 node(s) didn't match pod affinity rules, "
        "4 node(s) didn't match pod affinity/anti-affinity."
    )


def test_existing_pod_with_an_unparsable_category_keeps_the_others() -> None:
    """As v1.20.2's NewPodInfo: the failing category has no terms, the others still count."""
    bad_anti = required(term(sel_in("app", "{{.bad-value.}}")), anti=True)
    likes = preferred((9, term(sel_in("app", "in"))))
    existing = pod("e", node="n1", affinity=bad_anti | likes)
    snap = Snapshot.build(ZONES, [existing])
    incoming = pod(labels={"app": "in"})
    assert check_filter(incoming, snap) == [OK] * 4
    assert check_scores(incoming, snap) == ([9, 9, 0, 0], [100, 100, 0, 0])
