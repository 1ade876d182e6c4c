"""Nominated pods in Filter (kube's addNominatedPods / PodPassesFiltersOnNode), the filters on one node
apart from the snapshot, the PreFilterExtensions calls, and NominatedPods (kube's PodNominator)."""

from __future__ import annotations

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterResult, Pod, PreFilterExtensions
from scheduler.framework.nominated import (
    NominatedPods,
    filter_with_nominated,
    filters_on_node,
    pod_passes_filters_on_node,
)
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import NodeInfo, Snapshot
from scheduler.framework.status import Code, Status
from tests.unit.scheduler.plugins._preemption_support import (
    HIGH,
    LARGE,
    LOW,
    MEDIUM,
    MID,
    SMALL,
    VERY_LARGE,
    Obj,
    cycle,
    node,
    pod,
    profile,
)


def _filtered(fw: Framework, p: Obj, snap: Snapshot, nominated: NominatedPods) -> dict[str, Status]:
    state = cycle(fw, p, snap)
    feasible, rejections = fw.filter_all(state, p, snap)
    feasible, rejections = filter_with_nominated(fw, state, p, snap, feasible, rejections, nominated)
    out = rejections.as_dict()
    assert sorted(snap.names[i] for i in feasible.tolist()) == sorted(set(snap.names) - set(out))
    return out


def test_higher_or_equal_priority_nominated_pods_take_room() -> None:
    fw, _ = profile()
    snap = Snapshot.build([node("node1"), node("node2"), node("node3")], [])
    nominated = NominatedPods()
    nominated.add(pod("n1", priority=HIGH, req=LARGE, nominated="node1"))
    nominated.add(pod("n2", priority=MID, req=LARGE, nominated="node2"))  # equal priority counts
    nominated.add(pod("n3", priority=LOW, req=LARGE, nominated="node3"))  # lower: ignored
    got = _filtered(fw, pod("p", priority=MID, req=LARGE), snap, nominated)
    assert {k: v.reasons for k, v in got.items()} == {
        "node1": ("Insufficient cpu", "Insufficient memory"),
        "node2": ("Insufficient cpu", "Insufficient memory"),
    }
    assert got["node1"].plugin == "NodeResourcesFit" and got["node1"].code == Code.UNSCHEDULABLE


def test_the_pod_itself_is_not_counted_and_unknown_nodes_are_ignored() -> None:
    fw, _ = profile()
    snap = Snapshot.build([node("node1")], [])
    nominated = NominatedPods()
    me = pod("p", priority=MID, req=LARGE, nominated="node1")
    nominated.add(me)
    nominated.add(pod("elsewhere", priority=HIGH, req=VERY_LARGE, nominated="gone"))
    assert _filtered(fw, me, snap, nominated) == {}


def test_the_first_pass_status_wins_over_the_second() -> None:
    # node1 already fails without nominated pods (ports); with them it fails for resources first
    fw, _ = profile()
    port = {"ports": [{"containerPort": 80, "hostPort": 80}]}
    busy = pod("busy", node="node1", priority=HIGH, req=SMALL)
    busy["spec"]["containers"][0].update(port)
    snap = Snapshot.build([node("node1")], [busy])
    p = pod("p", priority=MID, req=LARGE)
    p["spec"]["containers"][0].update(port)
    nominated = NominatedPods()
    assert _filtered(fw, p, snap, nominated)["node1"].reasons == (
        "node(s) didn't have free ports for the requested pod ports",
    )
    nominated.add(pod("n", priority=HIGH, req=LARGE, nominated="node1"))
    got = _filtered(fw, p, snap, nominated)
    assert got["node1"].reasons == ("Insufficient cpu", "Insufficient memory")


def test_pod_passes_filters_on_node_runs_both_passes() -> None:
    fw, _ = profile()
    snap = Snapshot.build([node("node1")], [pod("x", node="node1", priority=LOW, req=MEDIUM)])
    p = pod("p", priority=MID, req=MEDIUM)
    state = cycle(fw, p, snap)
    info = snap.infos[0]
    assert pod_passes_filters_on_node(fw, state, p, info, [], snap.resources).is_success()
    nominated = [pod("n", priority=MID, req=MEDIUM)]
    st = pod_passes_filters_on_node(fw, state, p, info, nominated, snap.resources)
    assert st.reasons == ("Insufficient cpu", "Insufficient memory")
    assert len(info.pods) == 1  # the node itself is left as it was


def test_filters_on_node_sees_the_copy_only() -> None:
    fw, _ = profile()
    snap = Snapshot.build([node("node1")], [pod("x", node="node1", priority=LOW, req=VERY_LARGE)])
    p = pod("p", priority=MID, req=SMALL)
    state = cycle(fw, p, snap)
    assert not filters_on_node(fw, state, p, snap.infos[0], snap.resources).is_success()
    copy = snap.infos[0].copy()
    copy.remove_pod("default/x", copy.generation + 1)
    assert filters_on_node(fw, state, p, copy, snap.resources).is_success()
    assert "default/x" in snap.infos[0].pods


class _Counting:
    """A PreFilter plugin with extensions: counts the pods it is told of, fails on a named pod, and
    its Filter rejects a node whose pods number more than `limit` (state kept in the cycle)."""

    name = "Counting"

    def __init__(self, limit: int, fail_on: str = "") -> None:
        self.limit = limit
        self.fail_on = fail_on
        self.calls: list[tuple[str, str]] = []

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        state.write("Counting", 0)
        return Status.success()

    def _change(self, state: CycleState, what: str, other: Pod, by: int) -> Status:
        name = other["metadata"]["name"]
        self.calls.append((what, name))
        if name == self.fail_on:
            return Status.error(f"cannot {what} {name}")
        state.write("Counting", int(state.read("Counting")) + by)  # type: ignore[call-overload]
        return Status.success()

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, info: NodeInfo) -> Status:
        return self._change(state, "add", pod_to_add, 1)

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, info: NodeInfo) -> Status:
        return self._change(state, "remove", pod_to_remove, -1)

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        fails = np.full(snapshot.n, int(state.get("Counting", 0)) > self.limit)  # type: ignore[call-overload]
        return FilterResult.from_mask(fails, Status.unschedulable("too many", plugin=self.name))


def test_prefilter_extensions_follow_victims_and_nominated_pods() -> None:
    counting = _Counting(limit=-2)  # fits once two pods are removed
    assert isinstance(counting, PreFilterExtensions)
    fw, dp = profile(extra=[counting])
    pods = [pod(f"v{i}", node="node1", priority=LOW, req=SMALL, start=i) for i in range(3)]
    snap = Snapshot.build([node("node1")], pods)
    p = pod("p", priority=HIGH, req=SMALL)
    state = cycle(fw, p, snap)
    found = dp.find_candidates(fw, state, p, snap, {})
    assert found is not None and len(found) == 1
    # all three removed, then v0 (most important, earliest) reprieved and kept, v1 reprieved and
    # removed again (state at -2 + 1 = -1 > -2), v2 likewise
    assert [n for _, n in counting.calls] == ["v0", "v1", "v2", "v0", "v1", "v1", "v2", "v2"]
    assert [w for w, _ in counting.calls] == ["remove"] * 3 + ["add", "add", "remove", "add", "remove"]
    assert [v["metadata"]["name"] for v in found[0].victims.pods] == ["v1", "v2"]
    assert int(state.read("Counting")) == 0  # type: ignore[call-overload]  # the cycle's own state untouched


def test_prefilter_extension_error_means_no_candidate() -> None:
    counting = _Counting(limit=10, fail_on="v1")
    fw, dp = profile(extra=[counting])
    snap = Snapshot.build([node("node1")], [pod("v1", node="node1", priority=LOW, req=VERY_LARGE)])
    p = pod("p", priority=HIGH, req=SMALL)
    assert dp.find_candidates(fw, cycle(fw, p, snap), p, snap, {}) == []
    # and a nominated pod the extension refuses makes the node an error in Filter
    nominated = NominatedPods()
    nominated.add(pod("v1", priority=HIGH, nominated="node1"))
    empty = Snapshot.build([node("node1")], [])
    state = cycle(fw, p, empty)
    feasible, rejections = fw.filter_all(state, p, empty)
    _, out = filter_with_nominated(fw, state, p, empty, feasible, rejections, nominated)
    assert out.first_error() == Status(Code.ERROR, ("cannot add v1",), "Counting")


def test_nominated_pods_add_update_delete() -> None:
    n = NominatedPods()
    a = pod("a", nominated="node1")
    n.add(a)
    n.add(pod("b"))  # no nomination: not kept
    n.add(pod("c"), "node1")  # nominated by the scheduler before the API says so
    assert [p["metadata"]["name"] for p in n.for_node("node1")] == ["a", "c"]
    n.update(pod("c"), pod("c", labels={"x": "y"}))  # neither object carries it yet: kept
    assert [p["metadata"]["name"] for p in n.for_node("node1")] == ["a", "c"]
    n.update(a, pod("a", nominated="node2"))
    assert n.nodes() == ["node1", "node2"] and len(n) == 2
    n.update(pod("c", nominated="node1"), pod("c"))  # cleared through the API: dropped
    n.delete(pod("a"))
    assert n.nodes() == [] and len(n) == 0


class _RowCache:
    """A Filter that caches its verdict for every row of the snapshot in the cycle state, as
    LoadAwareScheduling does: rejects nodes labelled ``bad``."""

    name = "RowCache"

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        found = state.get("RowCache")
        if not isinstance(found, np.ndarray):
            found = np.array([n["metadata"].get("labels", {}).get("bad") == "1" for n in snapshot.nodes])
            state.write("RowCache", found)
        return FilterResult.from_mask(found, Status.unschedulable("bad node", plugin=self.name))


def test_filter_caches_of_the_cycle_are_not_read_on_one_node() -> None:
    fw, _ = profile(extra=[_RowCache()])
    nodes = [node("node1", labels={"bad": "1"}), node("node2")]
    snap = Snapshot.build(nodes, [pod("v", node="node2", priority=LOW, req=VERY_LARGE)])
    p = pod("p", priority=HIGH, req=LARGE)
    result = fw.schedule(cycle(fw, p, snap), p, snap)  # the cache holds two rows: node1 bad
    assert result.nominated == "node2"
    nominated = NominatedPods()
    nominated.add(pod("n", priority=HIGH, req=SMALL, nominated="node2"))
    empty = Snapshot.build(nodes, [])
    state = cycle(fw, p, empty)
    feasible, rejections = fw.filter_all(state, p, empty)
    feasible, rejections = filter_with_nominated(fw, state, p, empty, feasible, rejections, nominated)
    assert feasible.tolist() == [1] and rejections.as_dict()["node1"].reasons == ("bad node",)
