"""The quota tree's incremental sums and lazily refreshed runtime
(docs/rules/scheduler-elasticquota.md#performance) equal a full recomputation from scratch
(tests/unit/scheduler/plugins/elasticquota/_fullrecompute.py) after any sequence of events: random trees
(missing parents and parent cycles included), mins, maxes, weights, lending, pods added, resized, bound,
terminated, deleted, reserved and unreserved, quotas added, changed and deleted, the cluster total moved,
and reads of one quota at a time in between. Also: a read recomputes only the calculators of its own path,
and an update of a quota that changes nothing the rules read leaves the pods where they are."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.elasticquota import DEFAULT_QUOTA, LABEL_PREEMPTIBLE, ROOT_QUOTA, SYSTEM_QUOTA
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Pod
from scheduler.plugins.elasticquota import calculator
from scheduler.plugins.elasticquota import tree as tree_module
from scheduler.plugins.elasticquota.args import ElasticQuotaArgs
from scheduler.plugins.elasticquota.plugin import ElasticQuota

from ._fullrecompute import derived_of, full_recompute
from ._support import pod, quota


def _p(name: str, requests: dict[str, str], quota_name: str) -> Pod:
    return pod(name, requests, quota_name=quota_name)  # type: ignore[return-value]


NAMES = ["q0", "q1", "q2", "q3", "q4", "q5"]
PARENTS = ["", *NAMES, "missing", SYSTEM_QUOTA]
RES = ["cpu", "memory", "gpu"]
POD_QUOTAS = [*NAMES, "", ROOT_QUOTA, SYSTEM_QUOTA, DEFAULT_QUOTA, "gone"]


def _amounts(draw: st.DrawFn, low: int, high: int) -> dict[str, str]:
    return {n: str(draw(st.integers(low, high))) for n in RES if draw(st.booleans())}


@st.composite
def quota_objects(draw: st.DrawFn, name: str) -> dict[str, Any]:
    """Mostly a tree (the root's child or a lower-numbered quota's); sometimes any parent at all: a
    missing one, a cycle, the system quota."""
    kind = draw(st.integers(0, 9))
    earlier = NAMES[: NAMES.index(name)]
    if kind < 3 or (kind < 9 and not earlier):
        parent = ""
    elif kind < 9:
        parent = draw(st.sampled_from(earlier))
    else:
        parent = draw(st.sampled_from(PARENTS))
    weight = draw(st.one_of(st.none(), st.dictionaries(st.sampled_from(RES), st.integers(0, 5).map(str))))
    max_ = _amounts(draw, 0, 40)
    if draw(st.booleans()):
        max_["cpu"] = str(draw(st.integers(0, 40)))
    return quota(
        name,
        max_,
        _amounts(draw, 0, 20),
        parent=parent,
        is_parent=draw(st.booleans()),
        lend=draw(st.booleans()),
        annotations=None
        if weight is None
        else {"quota.scheduling.koordinator.sh/shared-weight": json.dumps(weight)},
    )


@st.composite
def pods(draw: st.DrawFn, i: int) -> dict[str, Any]:
    requests = _amounts(draw, 0, 12)
    if draw(st.integers(0, 9)) == 0:  # a negative request: the own sums clamp at 0
        requests["cpu"] = "-3"
    labels = {LABEL_PREEMPTIBLE: "false"} if draw(st.booleans()) else None
    return pod(
        f"p{i}",
        requests,
        quota_name=draw(st.sampled_from(NAMES if draw(st.integers(0, 3)) else POD_QUOTAS)),
        node=draw(st.sampled_from(["", "", "n1"])),
        labels=labels,
        phase=draw(st.sampled_from(["", "", "Succeeded"])),
    )


POD_OPS = ["add", "add", "add", "update", "bind", "delete", "reserve", "unreserve", "total"]
OPS = [*POD_OPS, "quota", "unquota"]


@st.composite
def histories(draw: st.DrawFn) -> tuple[bool, list[dict[str, Any]], list[tuple[str, Any]]]:
    n = draw(st.integers(1, 6))
    quotas = [draw(quota_objects(NAMES[i])) for i in range(n)]
    ops: list[tuple[str, Any]] = []
    reshape = draw(st.booleans())  # else the tree keeps its shape: nothing is ever summed again
    for i in range(draw(st.integers(1, 30))):
        op = draw(st.sampled_from(OPS if reshape else POD_OPS))
        if op in ("add", "update"):
            ops.append((op, draw(pods(draw(st.integers(0, 9))))))
        elif op == "quota":
            ops.append((op, draw(quota_objects(draw(st.sampled_from(NAMES))))))
        elif op == "total":
            amounts = {n: draw(st.integers(0, 40)) for n in RES if draw(st.booleans())}
            ops.append((op, {n: v * 1000 if n == "cpu" else v for n, v in amounts.items()}))
        elif op in ("unquota", "read"):
            ops.append((op, draw(st.sampled_from([*NAMES, ROOT_QUOTA, SYSTEM_QUOTA, DEFAULT_QUOTA]))))
        else:
            ops.append((op, f"p{draw(st.integers(0, 9))}"))
        ops.append(("read", draw(st.sampled_from([*NAMES, ROOT_QUOTA]))) if i % 3 == 0 else ("", None))
    return draw(st.booleans()), quotas, [o for o in ops if o[0]]


def _check(plugin: ElasticQuota, name: str) -> None:
    """The quota just read (and every quota's sums) equal the full recomputation."""
    mgr = plugin.manager
    info = mgr.info(name)
    want, root_total = full_recompute(mgr)
    assert mgr.root_total() == root_total
    for n, q in mgr.quotas.items():
        got, exp = derived_of(q), want[n]
        assert (got.request, got.child_request, got.used) == (exp.request, exp.child_request, exp.used), n
        assert (got.np_request, got.np_used) == (exp.np_request, exp.np_used), n
    if info is not None:
        got = derived_of(info)
        assert (got.runtime, got.auto_scale_min) == (want[name].runtime, want[name].auto_scale_min), name


@settings(max_examples=60, deadline=None)
@given(histories())
def test_incremental_and_lazy_state_equals_a_full_recomputation(
    case: tuple[bool, list[dict[str, Any]], list[tuple[str, Any]]],
) -> None:
    scale, quotas, ops = case
    plugin = ElasticQuota(ElasticQuotaArgs(enable_min_quota_scale=scale))
    plugin.on_node("n1", {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "20", "gpu": "9"}}})
    for q in quotas:
        plugin.on_quota_add(q)
    live: dict[str, Any] = {}
    for op, arg in ops:
        if op == "add" and arg["metadata"]["name"] not in live:
            live[arg["metadata"]["name"]] = arg
            plugin.on_any_pod_add(arg)
        elif op == "update" and arg["metadata"]["name"] in live:
            plugin.on_any_pod_update(live[arg["metadata"]["name"]], arg)
            live[arg["metadata"]["name"]] = arg
        elif op == "bind" and arg in live:
            old = live[arg]
            live[arg] = {**old, "spec": {**old["spec"], "nodeName": "n1"}}
            plugin.on_any_pod_update(old, live[arg])
        elif op == "delete" and arg in live:
            plugin.on_any_pod_delete(live.pop(arg))
        elif op == "reserve" and arg in live:
            plugin.reserve(CycleState(0.0), live[arg], "n1")
        elif op == "unreserve" and arg in live:
            plugin.unreserve(CycleState(0.0), live[arg], "n1")
        elif op == "quota":
            plugin.on_quota_add(arg)
        elif op == "unquota":
            plugin.on_quota_delete(quota(arg, {}))
        elif op == "total":
            plugin.manager.set_cluster_total(arg)
        elif op == "read":
            _check(plugin, arg)
    for name in reversed(sorted(plugin.manager.quotas)):  # each read refreshes its own path only
        _check(plugin, name)
    plugin.manager.refresh()
    want, _ = full_recompute(plugin.manager)
    assert {n: derived_of(q) for n, q in plugin.manager.quotas.items()} == want


def _tree_plugin(children: int) -> ElasticQuota:
    plugin = ElasticQuota(ElasticQuotaArgs())
    plugin.manager.set_cluster_total({"cpu": 100_000})
    for team in ("a", "b"):
        plugin.on_quota_add(quota(team, {"cpu": "100"}, {"cpu": "10"}, is_parent=True))
        for c in range(children):
            plugin.on_quota_add(quota(f"{team}{c}", {"cpu": "50"}, {"cpu": "1"}, parent=team))
    plugin.manager.refresh()
    return plugin


def test_a_read_runs_only_the_stale_calculators_on_its_path(monkeypatch: Any) -> None:
    plugin = _tree_plugin(3)
    calls: list[list[str]] = []

    def counting(*args: Any) -> Any:
        calls.append([k.name for k in args[2]])
        return calculator.split(*args)

    monkeypatch.setattr(tree_module, "split", counting)
    mgr = plugin.manager
    assert mgr.refresh_runtime("a0") == {"cpu": 0} and calls == []  # nothing moved: nothing runs
    plugin.on_any_pod_add(_p("p", {"cpu": "3"}, quota_name="a1"))
    assert mgr.refresh_runtime("a1") == {"cpu": 3000}
    assert calls == [["a", "b"], ["a0", "a1", "a2"]]  # the root's and a's calculators; b's stays
    assert mgr.refresh_runtime("a0") == {"cpu": 0} and len(calls) == 2
    mgr.refresh()  # b's runtime did not move with the root's split: its calculator is not stale
    assert len(calls) == 2
    plugin.on_any_pod_add(_p("q", {"cpu": "4"}, quota_name="b2"))
    mgr.refresh()  # everything stale runs, parents first
    assert calls[2:] == [["a", "b"], ["b0", "b1", "b2"]]
    assert mgr.quotas["b2"].runtime == {"cpu": 4000}
    plugin.reserve(CycleState(0.0), _p("p", {"cpu": "3"}, quota_name="a1"), "n1")  # used only
    info = mgr.info("a1")
    assert info is not None and info.used == {"cpu": 3000} and mgr.quotas["a"].used == {"cpu": 3000}
    mgr.refresh()
    assert len(calls) == 4


def test_a_parent_whose_runtime_moved_splits_again() -> None:
    """root → a → a0, and b: the cluster total grows, a's share with it, and a0's read sees it although
    no request below a moved."""
    plugin = ElasticQuota(ElasticQuotaArgs())
    plugin.manager.set_cluster_total({"cpu": 10_000})
    plugin.on_quota_add(quota("a", {"cpu": "100"}, is_parent=True))
    plugin.on_quota_add(quota("a0", {"cpu": "100"}, parent="a"))
    plugin.on_quota_add(quota("b", {"cpu": "100"}))
    plugin.on_any_pod_add(_p("p", {"cpu": "8"}, quota_name="a0"))
    plugin.on_any_pod_add(_p("q", {"cpu": "8"}, quota_name="b"))
    assert plugin.manager.refresh_runtime("a0") == {"cpu": 5000}  # a and b split 10 cpu by equal weights
    plugin.manager.set_cluster_total({"cpu": 16_000})
    assert plugin.manager.refresh_runtime("a0") == {"cpu": 8000}
    assert plugin.manager.refresh_runtime("b") == {"cpu": 8000}


def test_a_request_beyond_max_moves_no_calculator(monkeypatch: Any) -> None:
    """A leaf already asking for more than its max: more pods move its own request, not its limited
    request, so no calculator is stale."""
    plugin = _tree_plugin(2)
    plugin.on_any_pod_add(_p("big", {"cpu": "60"}, quota_name="a0"))
    plugin.manager.refresh()
    calls: list[int] = []

    def counting(*args: Any) -> Any:
        calls.append(1)
        return calculator.split(*args)

    monkeypatch.setattr(tree_module, "split", counting)
    plugin.on_any_pod_add(_p("more", {"cpu": "5"}, quota_name="a0"))
    info = plugin.manager.info("a0")
    assert info is not None and info.request == {"cpu": 65_000} and info.runtime == {"cpu": 50_000}
    assert plugin.manager.quotas["a"].child_request == {"cpu": 50_000} and calls == []


def test_an_unchanged_quota_update_keeps_the_pods_and_the_tree() -> None:
    plugin = _tree_plugin(1)
    obj = quota("a0", {"cpu": "50"}, {"cpu": "1"}, parent="a")
    plugin.on_any_pod_add(_p("p", {"cpu": "2"}, quota_name="a0"))
    plugin.manager.refresh()
    entry = plugin.manager.quotas["a0"].pods["default/p"]
    annotated = {**obj, "metadata": {**obj["metadata"], "annotations": {"x": "runtime written"}}}
    plugin.on_quota_update(obj, annotated)
    assert plugin.manager.tree.built and plugin.manager.quotas["a0"].pods["default/p"] is entry
    changed = quota("a0", {"cpu": "40"}, {"cpu": "1"}, parent="a")
    plugin.on_quota_update(obj, changed)
    assert not plugin.manager.tree.built  # a new max: the pods are charged again, the tree rebuilt
    info = plugin.manager.info("a0")
    assert info is not None and info.max == {"cpu": 40_000} and info.request == {"cpu": 2000}


def test_a_node_update_keeping_its_allocatable_leaves_the_total_alone(monkeypatch: Any) -> None:
    plugin = ElasticQuota(ElasticQuotaArgs())
    node = {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4"}}}
    plugin.on_node("n1", node)
    totals: list[dict[str, int]] = []
    real = plugin.manager.set_cluster_total

    def recording(total: dict[str, int]) -> None:
        totals.append(dict(total))
        real(total)

    monkeypatch.setattr(plugin.manager, "set_cluster_total", recording)
    plugin.on_node("n1", {**node, "status": {"allocatable": {"cpu": "4000m"}, "phase": "x"}})
    plugin.on_node("n2", None)  # a node never seen goes
    assert totals == [] and plugin.manager.cluster_total == {"cpu": 4000}
    plugin.on_node("n1", {**node, "status": {"allocatable": {"cpu": "6"}}})
    plugin.on_node("n1", None)
    assert totals == [{"cpu": 6000}, {}]
