"""PodTopologySpread PreScore/Score/NormalizeScore: the expected scores of kube-scheduler v1.20.2's own
scoring tests (pkg/scheduler/framework/plugins/podtopologyspread/scoring_test.go), ignored nodes,
default constraints and the weight of the score in the default profile."""

from __future__ import annotations

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.listers import ClusterObjects
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code
from scheduler.plugins.podtopologyspread import DEFAULT_WEIGHT, PodTopologySpread
from tests.unit.scheduler.plugins.test_podtopologyspread_support import (
    HOST,
    exists,
    final_scores,
    hnode,
    node,
    pod,
    spread,
)

SPREAD_2103 = ["node-a", "node-a", "node-b", "node-d", "node-d", "node-d"]  # matching pods spread as 2/1/0/3


def four_hosts() -> list[dict[str, object]]:
    return [hnode(n) for n in ("node-a", "node-b", "node-c", "node-d")]


def foo_pods(where: list[str]) -> list[dict[str, object]]:
    return [pod(f"p{i}", n, labels={"foo": ""}) for i, n in enumerate(where)]


def host_pod(max_skew: int) -> dict[str, object]:
    return pod(
        labels={"foo": ""},
        topologySpreadConstraints=[spread(max_skew, HOST, "ScheduleAnyway", exists("foo"))],
    )


def test_default_profile_weight() -> None:
    assert DEFAULT_WEIGHT == 2


def test_one_constraint_on_node_all_candidates() -> None:
    snap = Snapshot.build(four_hosts(), foo_pods(SPREAD_2103))
    names = ["node-a", "node-b", "node-c", "node-d"]
    assert final_scores(PodTopologySpread(), host_pod(1), snap, names) == {
        "node-a": 40,
        "node-b": 80,
        "node-c": 100,
        "node-d": 0,
    }
    assert final_scores(PodTopologySpread(), host_pod(2), snap, names) == {
        "node-a": 50,
        "node-b": 83,
        "node-c": 100,
        "node-d": 16,
    }


def test_one_constraint_on_node_no_existing_pods_and_equal_counts() -> None:
    snap = Snapshot.build(four_hosts()[:2], [])
    assert final_scores(PodTopologySpread(), host_pod(1), snap, ["node-a", "node-b"]) == {
        "node-a": 100,
        "node-b": 100,
    }
    snap = Snapshot.build(four_hosts()[:2], foo_pods(["node-a", "node-b"]))
    assert final_scores(PodTopologySpread(), host_pod(1), snap, ["node-a", "node-b"]) == {
        "node-a": 100,
        "node-b": 100,
    }


def test_two_constraints_zone_and_node_two_of_four_candidates() -> None:
    nodes = [
        hnode("node-a", zone="zone1"),
        hnode("node-b", zone="zone1"),
        hnode("node-x", zone="zone2"),
        hnode("node-y", zone="zone2"),
    ]
    where = ["node-a", "node-a", "node-b", "node-x", "node-x", "node-y", "node-y", "node-y", "node-y"]
    p = pod(
        labels={"foo": ""},
        topologySpreadConstraints=[
            spread(1, "zone", "ScheduleAnyway", exists("foo")),
            spread(1, HOST, "ScheduleAnyway", exists("foo")),
        ],
    )
    snap = Snapshot.build(nodes, foo_pods(where))
    assert final_scores(PodTopologySpread(), p, snap, ["node-a", "node-x"]) == {"node-a": 100, "node-x": 54}


def test_two_constraints_with_different_selectors() -> None:
    nodes = [
        hnode("node-a", zone="zone1"),
        hnode("node-b", zone="zone1"),
        hnode("node-x", zone="zone2"),
        hnode("node-y", zone="zone2"),
    ]
    pods = [
        pod("a1", "node-a", labels={"foo": ""}),
        pod("b1", "node-b", labels={"foo": "", "bar": ""}),
        pod("y1", "node-y", labels={"foo": ""}),
        pod("y2", "node-y", labels={"bar": ""}),
    ]
    p = pod(
        labels={"foo": "", "bar": ""},
        topologySpreadConstraints=[
            spread(1, "zone", "ScheduleAnyway", exists("foo")),
            spread(1, HOST, "ScheduleAnyway", exists("bar")),
        ],
    )
    snap = Snapshot.build(nodes, pods)
    got = final_scores(PodTopologySpread(), p, snap, ["node-a", "node-b", "node-x", "node-y"])
    assert got == {"node-a": 75, "node-b": 25, "node-x": 100, "node-y": 50}


def test_nodes_missing_a_key_are_ignored_and_score_zero() -> None:
    # kube's "one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match topology key"
    nodes = [hnode("node-a"), node("node-b", n="node-b"), hnode("node-x"), hnode("node-y")]
    where = ["node-a"] * 4 + ["node-b"] * 2 + ["node-x"] + ["node-y"] * 3
    snap = Snapshot.build(nodes, foo_pods(where))
    got = final_scores(PodTopologySpread(), host_pod(1), snap, ["node-a", "node-b", "node-x"])
    assert got == {"node-a": 20, "node-b": 0, "node-x": 100}


def test_pod_without_soft_constraints_scores_100_everywhere() -> None:
    snap = Snapshot.build(four_hosts(), foo_pods(SPREAD_2103))
    p = pod(labels={"foo": ""}, topologySpreadConstraints=[spread(1, HOST, "DoNotSchedule", exists("foo"))])
    assert set(final_scores(PodTopologySpread(), p, snap, ["node-a", "node-d"]).values()) == {100}
    assert set(
        final_scores(PodTopologySpread(), pod(labels={"foo": ""}), snap, ["node-a", "node-d"]).values()
    ) == {100}


def test_system_default_constraints_spread_a_services_pods() -> None:
    objects = ClusterObjects()
    objects.on_add(
        "ReplicaSet",
        {"metadata": {"name": "rs", "namespace": "ns"}, "spec": {"selector": {"matchLabels": {"foo": "x"}}}},
    )
    nodes = [
        hnode(n, {"topology.kubernetes.io/zone": z})
        for n, z in (("node-a", "z1"), ("node-b", "z1"), ("node-c", "z2"))
    ]
    snap = Snapshot.build(nodes, [pod(f"p{i}", "node-a", labels={"foo": "x"}) for i in range(3)])
    got = final_scores(
        PodTopologySpread(objects), pod(labels={"foo": "x"}), snap, ["node-a", "node-b", "node-c"]
    )
    assert got["node-c"] == 100 and got["node-b"] < 100 and got["node-a"] < got["node-b"]
    # a pod with constraints of its own ignores the defaults
    own = pod(labels={"foo": "x"}, topologySpreadConstraints=[spread(1, "rack", "DoNotSchedule", None)])
    assert set(final_scores(PodTopologySpread(objects), own, snap, ["node-a", "node-c"]).values()) == {100}


def test_invalid_soft_selector_fails_prescore() -> None:
    snap = Snapshot.build(four_hosts(), [])
    bad = {"matchExpressions": [{"key": "foo", "operator": "In"}]}
    p = pod(topologySpreadConstraints=[spread(1, HOST, "ScheduleAnyway", bad)])
    st = PodTopologySpread().pre_score(CycleState(0.0), p, snap, np.arange(4, dtype=np.int64))  # type: ignore[arg-type]
    assert st.code == Code.ERROR
    assert st.reasons[0].startswith(
        "calculating preScoreState: obtaining pod's soft topology spread constraints: "
    )


def test_in_a_framework_the_pod_goes_to_the_emptiest_domain() -> None:
    from scheduler.framework.runtime import Framework
    from scheduler.plugins.nodeaffinity import NodeAffinity
    from scheduler.plugins.selectorspread import SelectorSpread

    objects = ClusterObjects()
    objects.on_add(
        "Service", {"metadata": {"name": "s", "namespace": "ns"}, "spec": {"selector": {"foo": "x"}}}
    )
    fw = Framework(
        [NodeAffinity(), PodTopologySpread(objects), SelectorSpread(objects)], {"PodTopologySpread": 2}
    )
    nodes = [
        hnode(n, {"topology.kubernetes.io/zone": z})
        for n, z in (("a", "z1"), ("b", "z1"), ("c", "z2"), ("d", "z2"))
    ]
    snap = Snapshot.build(nodes, [pod("e1", "a", labels={"foo": "x"}), pod("e2", "c", labels={"foo": "x"})])
    result = fw.schedule(CycleState(0.0), pod(labels={"foo": "x"}), snap)  # type: ignore[arg-type]
    assert result.node == "b"  # ties with d broken by name order without an rng
    hard = pod(
        labels={"foo": "x"},
        topologySpreadConstraints=[spread(1, HOST, "DoNotSchedule", {"matchLabels": {"foo": "x"}})],
    )
    snap = Snapshot.build(nodes, [pod(f"e{n}", n, labels={"foo": "x"}) for n in ("a", "b", "c")])
    assert fw.schedule(CycleState(0.0), hard, snap).node == "d"  # type: ignore[arg-type]


def test_without_soft_constraints_the_weighted_total_is_100_times_the_weight_on_every_row() -> None:
    # Its scores are then uniform (docs/architecture.md#uniform-scores): the runtime normalises one
    # element, as every row would be.
    from scheduler.framework.interfaces import uniform_value
    from scheduler.framework.runtime import Framework

    snap = Snapshot.build(four_hosts(), foo_pods(SPREAD_2103))
    plugin = PodTopologySpread()
    fw = Framework([plugin], {"PodTopologySpread": DEFAULT_WEIGHT})
    feasible = np.array([0, 2, 3], np.int64)
    state = CycleState(0.0)
    assert plugin.pre_score(state, pod(labels={"foo": ""}), snap, feasible).is_success()  # type: ignore[arg-type]
    assert uniform_value(plugin.score_all(state, pod(labels={"foo": ""}), snap, feasible)) == 0  # type: ignore[arg-type]
    totals = fw.score_all(state, pod(labels={"foo": ""}), snap, feasible)  # type: ignore[arg-type]
    assert totals.tolist() == [100 * DEFAULT_WEIGHT] * 3
    # with a soft constraint the scores are the rows' own
    state = CycleState(0.0)
    assert plugin.pre_score(state, host_pod(1), snap, feasible).is_success()  # type: ignore[arg-type]
    assert uniform_value(plugin.score_all(state, host_pod(1), snap, feasible)) is None  # type: ignore[arg-type]
