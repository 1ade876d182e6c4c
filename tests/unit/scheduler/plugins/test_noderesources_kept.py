"""NodeResourcesFit's kept Filter patterns (``FitCodes``) and the kept allocation scores
(``AllocationScores``, strategies grouped by scored resources) equal a fresh evaluation after any
sequence of row changes: pods added and removed, node objects replaced, nodes joining and leaving in
place. The fresh Filter is the grouping the Filter used before its patterns were kept (every mask over
every row, patterns packed and sorted), so `which` and the statuses, in order, must be identical."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterResult
from scheduler.framework.snapshot import NodeInfo, PodInfo, Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.balancedallocation import NodeResourcesBalancedAllocation
from scheduler.plugins.noderesources import (
    NAME,
    REASON_TOO_MANY_PODS,
    NodeResourcesFit,
    fit_failures,
    pack_rows,
    pre_filter_state,
)
from scheduler.plugins.noderesources_allocated import NodeResourcesMostAllocated
from scheduler.plugins.noderesources_scoring import (
    BALANCED_STRATEGY,
    evaluate,
    node_columns,
    pod_inputs,
)

from ._support import RESOURCE_NAMES, bound_pod, make_node, make_pod, request_lists, resource_clusters

Obj = Any  # pods and nodes as dicts (the API's typed dicts are not needed here)


def fresh_filter(pod: Obj, snap: Snapshot) -> FilterResult:
    """The Filter evaluated from scratch on every row: masks, packed patterns grouped by np.unique."""
    checked = pre_filter_state(pod).checked
    alloc, requested, col, n = snap.allocatable, snap.requested, snap.col, snap.n
    pods = col.get("pods")
    found = fit_failures(
        checked, n,
        lambda r: alloc[col[r]] if r in col else None,
        lambda r: requested[col[r]],
        snap.pod_count,
        alloc[pods] if pods is not None else np.zeros(n, np.int64),
    )  # fmt: skip
    reasons = [reason for reason, _ in found]
    failed = np.zeros(n, np.bool_)
    for _, m in found:
        failed |= m
    if not failed.any():
        return FilterResult.all_pass(n)
    failing = np.flatnonzero(failed)
    hits = np.stack([m[failing] for _, m in found], axis=1)
    packed = np.ascontiguousarray(np.packbits(hits, axis=1))
    _, first, inverse = np.unique(
        packed.view(f"V{packed.shape[1]}").ravel(), return_index=True, return_inverse=True
    )
    statuses = tuple(
        Status.unschedulable(*(r for r, hit in zip(reasons, row, strict=True) if hit), plugin=NAME)
        for row in hits[first].tolist()
    )
    which = np.full(n, -1, np.int32)
    which[failing] = np.asarray(inverse, np.int32).reshape(-1)
    return FilterResult(which, statuses)


def assert_kept_equal_fresh(pods: list[Obj], snap: Snapshot) -> None:
    fit, balanced, most = NodeResourcesFit(), NodeResourcesBalancedAllocation(), NodeResourcesMostAllocated()
    feasible = np.arange(snap.n, dtype=np.int64)
    for pod in pods:
        state = CycleState(0.0)
        assert fit.pre_filter(state, pod, snap).is_success()
        got, want = fit.filter_all(state, pod, snap), fresh_filter(pod, snap)
        assert got.which.tolist() == want.which.tolist()
        assert got.statuses == want.statuses
        for plugin, strategy in (
            (balanced, BALANCED_STRATEGY),
            (fit, fit.args.strategy),
            (most, most.strategy),
        ):
            kept = plugin.score_all(state, pod, snap, feasible)
            inputs = pod_inputs(strategy, pod)
            assert kept.tolist() == evaluate(strategy, *node_columns(strategy, snap, inputs, None)).tolist()


incoming = st.lists(request_lists, min_size=1, max_size=2).map(lambda reqs: make_pod("p", requests=reqs))


@st.composite
def changes(draw: st.DrawFn, snap: Snapshot, k: int) -> None:
    """Applies one drawn change to `snap` (generation k)."""
    kind = draw(st.sampled_from(["add", "remove", "replace", "join", "leave"]))
    names = list(snap.names)
    if kind == "join" or not names:
        alloc = draw(
            st.dictionaries(st.sampled_from(RESOURCE_NAMES), st.sampled_from(["0", "2", "16", "8Gi"]))
        )
        snap.apply_nodes([NodeInfo.of(cast(Any, make_node(f"j{k}", allocatable=alloc)), k)])
        return
    i = draw(st.integers(0, len(names) - 1))
    info = snap.infos[i]
    if kind == "add":
        pod: Obj = bound_pod(draw, f"a{k}", 1)
        pod["spec"]["nodeName"] = info.name
        info.add_pod(PodInfo.of(pod), k)
        snap.refresh([info])
    elif kind == "remove" and info.pods:
        info.remove_pod(draw(st.sampled_from(sorted(info.pods))), k)
        snap.refresh([info])
    elif kind == "replace":
        alloc = draw(
            st.dictionaries(st.sampled_from(RESOURCE_NAMES), st.sampled_from(["0", "1", "4", "16Gi"]))
        )
        info.set_node(cast(Any, make_node(info.name, allocatable=alloc)), k)
        snap.refresh([info])
    elif kind == "leave":
        snap.apply_nodes([], [info.name])


@settings(max_examples=60, deadline=None)
@given(resource_clusters(max_nodes=6, max_pods=8), st.lists(incoming, min_size=1, max_size=4), st.data())
def test_kept_filter_and_scores_equal_a_fresh_evaluation_after_row_changes(
    cluster: tuple[list[Obj], list[Obj]], pods: list[Obj], data: st.DataObject
) -> None:
    nodes, bound = cluster
    snap = Snapshot.build(nodes, bound)
    assert_kept_equal_fresh(pods, snap)
    for k in range(data.draw(st.integers(1, 8))):
        data.draw(changes(snap, 100 + k))
        assert_kept_equal_fresh(data.draw(st.permutations(pods)), snap)


def test_a_row_that_stops_fitting_gets_its_status_and_the_pattern_order_follows_the_bytes() -> None:
    # 3 nodes; the pod fits all, then node b fills up (cpu) and node c's pods run out: statuses in
    # packed-pattern order, "Too many pods" (the first reason, most significant bit) last
    snap = Snapshot.build(
        [
            make_node("a", allocatable={"cpu": "4", "memory": "8Gi", "pods": "10"}),
            make_node("b", allocatable={"cpu": "4", "memory": "8Gi", "pods": "10"}),
            make_node("c", allocatable={"cpu": "4", "memory": "8Gi", "pods": "1"}),
        ]
    )
    pod: Obj = make_pod("p", requests=[{"cpu": "1", "memory": "1Gi"}])
    fit = NodeResourcesFit()
    state = CycleState(0.0)
    fit.pre_filter(state, pod, snap)
    assert fit.filter_all(state, pod, snap).statuses == ()
    for name, cpu in (("b", "3500m"), ("c", "100m")):
        info = snap.infos[snap.index[name]]
        info.add_pod(PodInfo.of(cast(Any, make_pod(f"x{name}", node=name, requests=[{"cpu": cpu}]))), 1)
        snap.refresh([info])
    got = fit.filter_all(state, pod, snap)
    assert got.statuses == (
        Status.unschedulable("Insufficient cpu", plugin=NAME),
        Status.unschedulable(REASON_TOO_MANY_PODS, plugin=NAME),
    )
    assert got.which.tolist() == [-1, 0, 1]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 20), st.sampled_from([0, 1, 7, 256, 257, 600]), st.integers(0, 2**32 - 1))
def test_pack_rows_is_packbits_along_the_rows(reasons: int, columns: int, seed: int) -> None:
    m = np.random.default_rng(seed).random((reasons, columns)) < 0.3
    got = pack_rows(m)
    assert got.dtype == np.uint8
    assert got.tolist() == np.packbits(m, axis=0).tolist()
