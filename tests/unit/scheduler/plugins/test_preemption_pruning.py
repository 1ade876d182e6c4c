"""Preemption pruning (docs/rules/scheduler-preemption.md#pruning): the FreeableView's sums against brute
force (tests/oracles/preemption_pruning.py) under random pod additions, removals and replacements, with
few levels (compressed, upper bounds) and enough (exact); the hopeless rows against the oracle and
against the victim search itself; and DefaultPreemption with and without pruning choosing the same
candidates, node and victims for the same rng seed."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.nominated import NominatedPods, pre_filter_state
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import PodInfo, Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.defaultpreemption import DefaultPreemption, PreemptionResult
from scheduler.plugins.defaultpreemption.freeable import VIEW_KEY, FreeableView
from scheduler.plugins.defaultpreemption.pruning import hopeless, walk
from scheduler.plugins.defaultpreemption.victims import fit_holds, select_victims_on_node
from scheduler.plugins.nodeports import NodePorts
from scheduler.plugins.noderesources import PRE_FILTER_KEY, NodeResourcesFit, PreFilterState
from scheduler.plugins.nodeunschedulable import NodeUnschedulable
from tests.oracles import preemption_pruning as oracle
from tests.unit.scheduler.plugins._preemption_support import NOW, node, pod

Obj = dict[str, Any]
GPU = "example.com/gpu"
FPGA = "other.io/fpga"
PRIOS = [-(2**31), -5, 0, 1, 2, 3, 7, 100, 1000, 2**31 - 1]


def _req(cpu: int, mem: int, gpu: int, fpga: int) -> dict[str, str]:
    r = {"cpu": f"{cpu}m", "memory": str(mem)}
    if gpu:
        r[GPU] = str(gpu)
    if fpga:
        r[FPGA] = str(fpga)
    return r


requests = st.builds(
    _req,
    st.sampled_from([0, 100, 300, 700]),
    st.sampled_from([0, 100, 500]),
    st.sampled_from([0, 0, 1, 2]),
    st.sampled_from([0, 0, 0, 1]),
)


def _check_view(snap: Snapshot, view: FreeableView) -> None:
    for p in [*PRIOS, *(q + 1 for q in PRIOS[:-1]), 4, 50]:
        got = view.freeable(p)
        exact = view.is_exact(p)
        for i, info in enumerate(snap.infos):
            sums, count = oracle.freeable(info, p)
            want = [sums.get(r, 0) for r in snap.resources] + [count]
            have = got[:, i].tolist()
            if exact:
                assert have == want, (p, info.name)
            else:
                assert all(h >= w for h, w in zip(have, want, strict=True)), (p, info.name)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([1, 2, 3, 32]),
    st.lists(
        st.tuples(
            st.sampled_from(["add", "add", "remove", "replace"]),
            st.integers(0, 2),
            st.integers(0, 11),
            st.sampled_from(PRIOS),
            requests,
        ),
        max_size=40,
    ),
    st.integers(0, 3),
)
def test_freeable_sums_match_brute_force(
    max_levels: int, ops: list[tuple[str, int, int, int, dict[str, str]]], every: int
) -> None:
    snap = Snapshot.build([node(f"n{i}", {"cpu": "4", "memory": "4000"}) for i in range(3)])
    view = snap.view(VIEW_KEY, lambda: FreeableView(max_levels))
    for k, (op, n, name, prio, req) in enumerate(ops):
        info = snap.infos[n]
        key = f"default/p{name}-{n}"
        if op == "remove":
            info.remove_pod(key, info.generation + 1)
        elif op == "add" or key in info.pods:
            info.add_pod(PodInfo.of(pod(f"p{name}-{n}", node=f"n{n}", priority=prio, req=req)), 1)
        snap.refresh([info])
        if every and k % every == 0:
            _check_view(snap, view)
    _check_view(snap, view)
    assert len(view.bounds) <= max_levels
    event(f"levels {len(view.bounds)}, exact {all(view.exact)}")


def test_a_rebuild_compresses_many_priorities_into_levels() -> None:
    pods = [pod(f"p{q}", node="n0", priority=q, req=_req(100, 10, 0, 0)) for q in range(10)]
    snap = Snapshot.build([node("n0", {"cpu": "4", "memory": "4000"})], pods)
    view = snap.view(VIEW_KEY, lambda: FreeableView(4))
    assert len(view.bounds) == 4 and view.bounds[0] == 0
    _check_view(snap, view)
    # a query at a level's bound is exact: every pod below it, nothing more
    b = view.bounds[2]
    assert view.is_exact(b)
    assert view.freeable(b)[view.count_row, 0] == b
    assert view.freeable(0)[:, 0].tolist() == [0] * (len(snap.resources) + 1)


def test_max_levels_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_levels=0"):
        FreeableView(0)


def test_walk_keeps_order_from_the_offset_and_skips_pruned_rows() -> None:
    pruned = np.array([False, True, False, False, True, False])
    rows = np.array([0, 1, 2, 4, 5])
    assert walk(rows, 2, None) == [2, 4, 5, 0, 1]
    assert walk(rows, 2, pruned) == [2, 5, 0]
    assert walk(rows, 0, np.ones(6, np.bool_)) == []


def _state(fw: Framework, p: Obj, snap: Snapshot) -> CycleState:
    state = pre_filter_state(fw, p, snap, NOW)
    assert isinstance(state, CycleState)
    return state


def test_hopeless_rows_by_rule() -> None:
    big = {"cpu": "1", "memory": "1000", GPU: "1"}
    nodes = [node(f"n{i}", big) for i in range(5)]
    nodes[4]["status"]["allocatable"]["pods"] = "1"
    pods = [
        pod("hi", node="n0", priority=10, req=_req(900, 10, 0, 0)),  # nothing lower: hopeless
        pod("lo1", node="n1", priority=1, req=_req(100, 10, 0, 0)),  # 900m used by higher: hopeless
        pod("hi1", node="n1", priority=10, req=_req(800, 10, 0, 0)),
        pod("lo2", node="n2", priority=1, req=_req(900, 10, 0, 0)),  # evicting frees enough
        pod("lo3", node="n3", priority=1, req=_req(100, 10, 1, 0)),  # frees the gpu too
        pod("hi4", node="n4", priority=10, req=_req(0, 0, 0, 0)),  # a pod slot held by a higher pod
        pod("lo4", node="n4", priority=1, req=_req(0, 0, 0, 0)),
    ]
    snap = Snapshot.build(nodes, pods)
    p = pod("p", priority=5, req={"cpu": "500m", "memory": "10", GPU: "1"})
    fit = NodeResourcesFit()
    fw = Framework([fit, NodePorts()])
    got = hopeless(fw, _state(fw, p, snap), p, snap).tolist()
    assert got == [True, True, False, False, True]
    # without Fit in the profile only "no lower-priority pod" prunes
    fw2 = Framework([NodePorts()])
    assert hopeless(fw2, _state(fw2, p, snap), p, snap).tolist() == [True, False, False, False, False]
    # a resource no node has: every node is hopeless for a pod requesting it
    q = pod("q", priority=5, req={"cpu": "1m", "nowhere.io/x": "1"})
    assert all(hopeless(fw, _state(fw, q, snap), q, snap).tolist())


def test_ignored_resources_do_not_prune() -> None:
    nodes = [node("n0", {"cpu": "1", "memory": "1000"})]  # no gpu at all
    snap = Snapshot.build(nodes, [pod("lo", node="n0", priority=1, req=_req(100, 10, 0, 0))])
    p = pod("p", priority=5, req={"cpu": "500m", GPU: "1"})
    cases: list[tuple[Obj, bool]] = [
        ({}, True),
        ({"ignoredResources": [GPU]}, False),
        ({"ignoredResourceGroups": ["example.com"]}, False),
    ]
    for args, want in cases:
        fw = Framework([NodeResourcesFit.from_args(args)])
        assert hopeless(fw, _state(fw, p, snap), p, snap).tolist() == [want], args


def _cluster_pod(name: str, prio: int, req: dict[str, str], **kw: Any) -> Obj:
    return pod(name, priority=prio, req=req, start=int(kw.pop("start", 0)), **kw)


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Obj], list[Obj], list[Obj], Obj]:
    n = draw(st.integers(1, 7))
    nodes = []
    for i in range(n):
        alloc = {"cpu": f"{draw(st.sampled_from([500, 1000, 2000]))}m",
                 "memory": str(draw(st.sampled_from([500, 1000])))}  # fmt: skip
        if draw(st.booleans()):
            alloc[GPU] = str(draw(st.integers(0, 2)))
        nodes.append(node(f"n{i}", alloc))
        nodes[-1]["status"]["allocatable"]["pods"] = str(draw(st.integers(1, 5)))
        nodes[-1]["spec"]["unschedulable"] = draw(st.sampled_from([False, False, False, True]))
    bound = [
        _cluster_pod(f"b{k}", draw(st.sampled_from(PRIOS)), draw(requests),
                     node=f"n{draw(st.integers(0, n - 1))}", start=draw(st.integers(0, 9)),
                     labels=draw(st.sampled_from([{}, {"app": "a"}])))
        for k in range(draw(st.integers(0, 16)))
    ]  # fmt: skip
    nominated = [
        _cluster_pod(f"m{k}", draw(st.sampled_from(PRIOS)), draw(requests),
                     nominated=f"n{draw(st.integers(0, n - 1))}")
        for k in range(draw(st.integers(0, 2)))
    ]  # fmt: skip
    preemptor = _cluster_pod("p", draw(st.sampled_from(PRIOS)), draw(requests))
    return nodes, bound, nominated, preemptor


@settings(max_examples=300, deadline=None)
@given(
    clusters(),
    st.integers(0, 2**32),
    st.sampled_from([{}, {"ignoredResources": [GPU]}, {"ignoredResourceGroups": ["other.io"]}]),
    st.sampled_from([(10, 100), (40, 1), (0, 1), (30, 2)]),
    st.sampled_from([1, 2, 32]),
    st.booleans(),
)
def test_pruned_and_unpruned_preemption_decide_the_same(
    cluster: tuple[list[Obj], list[Obj], list[Obj], Obj],
    seed: int,
    fit_args: Obj,
    args: tuple[int, int],
    max_levels: int,
    with_fit: bool,
) -> None:
    nodes, bound, nominated_pods, p = cluster
    snap = Snapshot.build(nodes, bound)
    snap.view(VIEW_KEY, lambda: FreeableView(max_levels))
    pdbs = [
        {
            "metadata": {"name": "b", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "a"}}},
            "status": {"disruptionsAllowed": 1},
        }
    ]
    results = []
    for prune in (True, False):
        nominated = NominatedPods()
        for m in nominated_pods:
            nominated.add(m)
        dp = DefaultPreemption.from_args(
            {"minCandidateNodesPercentage": args[0], "minCandidateNodesAbsolute": args[1]},
            rng=random.Random(seed), pdbs=lambda: pdbs, nominated=nominated, prune=prune,
        )  # fmt: skip
        plugins: list[Any] = [NodeUnschedulable(), NodePorts()]
        if with_fit:
            plugins.insert(0, NodeResourcesFit.from_args(fit_args))
        fw = Framework([*plugins, dp])
        dp.attach(fw)
        state = CycleState(NOW)
        _, rejections = fw.filter_all(_state(fw, p, snap), p, snap)
        statuses = {
            snap.names[i]: rejections.statuses[int(rejections.which[i])]
            for i in range(snap.n)
            if rejections.which[i] >= 0
        }
        st_ = dp.post_filter(state, p, snap, statuses)
        r = PreemptionResult.of(state)
        results.append((st_.code, st_.reasons, r and (r.node, [v["metadata"]["name"] for v in r.victims])))
        if prune:
            # every pruned row is one where the victim search finds nothing
            base = _state(fw, p, snap)
            cut = hopeless(fw, base, p, snap)
            for i in np.flatnonzero(cut).tolist():
                on = nominated.for_node(snap.names[i])
                assert select_victims_on_node(fw, base, p, snap.infos[i], [], on, snap.resources) is None
            fit_state = base.get(PRE_FILTER_KEY)
            checked = fit_state.checked if isinstance(fit_state, PreFilterState) else None
            want = [oracle.hopeless(info, int(p["spec"]["priority"]), checked) for info in snap.infos]
            view = snap.view(VIEW_KEY, FreeableView)
            if view.is_exact(int(p["spec"]["priority"])):
                assert cut.tolist() == want
            else:
                assert all(w or not c for c, w in zip(cut.tolist(), want, strict=True))
            event(f"pruned {int(cut.sum())}/{snap.n}")
    assert results[0] == results[1]
    event(f"preempts: {results[0][2] is not None and results[0][2][0] is not None}")


def test_the_search_never_runs_on_a_hopeless_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every node full of pods of higher priority: unpruned, the victim search runs on every node;
    pruned, on none, with the same outcome."""
    import scheduler.plugins.defaultpreemption.plugin as plugin_module

    searched: list[str] = []
    real = plugin_module.select_victims_on_node

    def counting(*a: Any) -> Any:
        searched.append(a[3].name)
        return real(*a)

    monkeypatch.setattr(plugin_module, "select_victims_on_node", counting)
    nodes = [node(f"n{i}", {"cpu": "1", "memory": "1000"}) for i in range(20)]
    pods = [pod(f"h{i}", node=f"n{i}", priority=100, req=_req(1000, 10, 0, 0)) for i in range(20)]
    snap = Snapshot.build(nodes, pods)
    p = pod("p", priority=5, req={"cpu": "500m"})
    runs = []
    for prune in (True, False):
        searched.clear()
        dp = DefaultPreemption(rng=random.Random(1), prune=prune)
        fw = Framework([NodeResourcesFit(), dp])
        dp.attach(fw)
        statuses = {n: Status.unschedulable("Insufficient cpu") for n in snap.names}
        state = CycleState(NOW)
        st_ = dp.post_filter(state, p, snap, statuses)
        r = PreemptionResult.of(state)
        runs.append((st_.code, r, len(searched)))
    assert runs[0][:2] == runs[1][:2]
    assert runs[0][:2] == (Status.unschedulable().code, None)  # no candidate: nothing to do
    assert (runs[0][2], runs[1][2]) == (0, 20)


def test_fit_holds_is_fits_arithmetic_on_one_node() -> None:
    snap = Snapshot.build(
        [node("n0", {"cpu": "1", "memory": "1000", GPU: "1"})],
        [pod("a", node="n0", priority=1, req=_req(600, 100, 1, 0))],
    )
    info = snap.infos[0]
    assert fit_holds(info, [("cpu", 400), ("memory", 900)])
    assert not fit_holds(info, [("cpu", 401)])
    assert not fit_holds(info, [(GPU, 1)])
    assert not fit_holds(info, [(FPGA, 1)])  # a resource the node lacks
    assert fit_holds(info, [(FPGA, 0)])
    info.allocatable["pods"] = 1  # one pod there already: no room for another
    assert not fit_holds(info, [])
