"""Shared helpers for the plugin tests: object builders, snapshot changes (rows refreshed, rows added),
Hypothesis strategies for nodes, pods, resource requests and row subsets, and the checks that a
production plugin's Filter, Score and NormalizeScore equal its oracle's (tests/oracles/plugins.py) on
every row."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from hypothesis import strategies as st

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import (
    FilterAllPlugin,
    FilterPlugin,
    NormalizeScorePlugin,
    ScoreAllPlugin,
    ScorePlugin,
)
from scheduler.framework.snapshot import NodeInfo, PodInfo, Snapshot
from scheduler.framework.status import Code, Status
from tests.oracles.plugins import oracle_for

Obj = dict[str, Any]


def make_node(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    taints: list[Obj] | None = None,
    unschedulable: bool | None = None,
    allocatable: dict[str, str] | None = None,
) -> Obj:
    spec: Obj = {}
    if taints is not None:
        spec["taints"] = taints
    if unschedulable is not None:
        spec["unschedulable"] = unschedulable
    alloc = {"cpu": "4", "memory": "8Gi", "pods": "110"} if allocatable is None else allocatable
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {"allocatable": alloc},
    }


def taint(key: str, value: str = "", effect: str = "PreferNoSchedule") -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect}


def make_pod(
    name: str = "p",
    *,
    node: str | None = None,
    requests: list[dict[str, str] | None] | None = None,
    init_requests: list[dict[str, str] | None] | None = None,
    **spec: Any,
) -> Obj:
    """A pod with one container per entry of `requests` (None: a container without requests)."""

    def container(i: int, r: dict[str, str] | None, prefix: str) -> Obj:
        c: Obj = {"name": f"{prefix}{i}"}
        if r is not None:
            c["resources"] = {"requests": r}
        return c

    s: Obj = {"containers": [container(i, r, "c") for i, r in enumerate(requests or [])], **spec}
    if init_requests:
        s["initContainers"] = [container(i, r, "i") for i, r in enumerate(init_requests)]
    if node is not None:
        s["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": s}


def run_pre_filter(plugin: object, state: CycleState, pod: Obj, snapshot: Snapshot) -> None:
    pre = getattr(plugin, "pre_filter", None)
    if pre is not None:
        st_ = pre(state, pod, snapshot)
        assert isinstance(st_, Status)


def filter_one(plugin: FilterAllPlugin, pod: Obj, node: Obj, pods: list[Obj] | None = None) -> Status:
    """The status of a one-node snapshot, after checking the plugin agrees with its oracle."""
    snap = Snapshot.build([node], pods or [])
    statuses = assert_matches_oracle(plugin, pod, snap)
    return statuses[0]


def assert_matches_oracle(plugin: FilterAllPlugin, pod: Obj, snap: Snapshot) -> list[Status]:
    """filter_all equals the oracle's per-node filter on every row (code, reasons, plugin), with and
    without PreFilter; returns the statuses."""
    oracle = oracle_for(plugin)
    assert isinstance(oracle, FilterPlugin)
    state, oracle_state = CycleState(0.0), CycleState(0.0)
    run_pre_filter(plugin, state, pod, snap)
    run_pre_filter(oracle, oracle_state, pod, snap)
    res = plugin.filter_all(state, pod, snap)
    assert res.which.shape == (snap.n,)
    want = [oracle.filter(oracle_state, pod, snap, i) for i in range(snap.n)]
    assert [res.status_of(i) for i in range(snap.n)] == want
    assert all(s.is_rejected() or s.code == Code.ERROR for s in res.statuses)
    fresh = plugin.filter_all(CycleState(0.0), pod, snap)
    assert [fresh.status_of(i) for i in range(snap.n)] == want
    assert [oracle.filter(CycleState(0.0), pod, snap, i) for i in range(snap.n)] == want
    return want


def feasible_scores(
    plugin: ScoreAllPlugin, pod: Obj, snap: Snapshot, rows: list[int], state: CycleState | None = None
) -> npt.NDArray[np.int64]:
    """score_all over `rows` (in `state`, default a fresh one), as the runtime reads it: the feasible
    rows' scores, or every row's."""
    feasible = np.asarray(rows, np.int64)
    got = np.asarray(plugin.score_all(CycleState(0.0) if state is None else state, pod, snap, feasible))
    assert got.shape in ((len(rows),), (snap.n,))
    return got if len(got) == len(rows) else got.take(feasible)


def oracle_scores(oracle: ScorePlugin, pod: Obj, snap: Snapshot, rows: list[int]) -> list[int]:
    """The oracle's per-node score of each row, each of which must succeed."""
    want = []
    for i in rows:
        score, st_ = oracle.score(CycleState(0.0), pod, snap, i)
        assert st_.is_success()
        want.append(score)
    return want


def assert_scores_match_oracle(
    plugin: ScoreAllPlugin, pod: Obj, snap: Snapshot, rows: list[int]
) -> list[int]:
    """score_all over `rows` equals the oracle's per-node score of each; returns the scores."""
    oracle = oracle_for(plugin)
    assert isinstance(oracle, ScorePlugin)
    got = feasible_scores(plugin, pod, snap, rows)
    want = oracle_scores(oracle, pod, snap, rows)
    assert got.tolist() == want
    return want


def normalized_scores(plugin: ScoreAllPlugin, pod: Obj, snap: Snapshot) -> list[int]:
    """Score over every row (checked against the oracle), then NormalizeScore, which must equal the
    oracle's on the same raw scores; returns the normalized scores."""
    raw = np.asarray(assert_scores_match_oracle(plugin, pod, snap, list(range(snap.n))), np.int64)
    want = raw.copy()
    oracle = oracle_for(plugin)
    assert isinstance(oracle, NormalizeScorePlugin) and isinstance(plugin, NormalizeScorePlugin)
    oracle.normalize_scores(CycleState(0.0), pod, want)
    assert plugin.normalize_scores(CycleState(0.0), pod, raw).is_success()
    assert raw.tolist() == want.tolist()
    return [int(x) for x in raw]


def refresh_nodes(snap: Snapshot, changes: dict[int, Obj], generation: int) -> None:
    """Replace the node object of some rows (same names) the way the scheduler cache does."""
    infos = []
    for i, node in changes.items():
        info = snap.infos[i]
        info.set_node(node, generation)
        infos.append(info)
    snap.refresh(infos)


def add_pods(snap: Snapshot, pods: list[Obj], generation: int) -> None:
    infos = []
    for p in pods:
        pi = PodInfo.of(p)
        info = snap.infos[snap.index[pi.node_name]]
        info.add_pod(pi, generation)
        infos.append(info)
    snap.refresh(infos)


def add_nodes(snap: Snapshot, nodes: list[Obj], generation: int) -> None:
    """New rows (a new layout: every row-aligned view is rebuilt)."""
    snap.rebuild([*snap.infos, *(NodeInfo.of(n, generation) for n in nodes)], snap.resources)


# --- strategies ---------------------------------------------------------------------------------


def draw_rows(data: st.DataObject, n: int) -> list[int]:
    """A drawn subset of the rows 0..n-1, in row order (none when there is no row)."""
    return sorted(data.draw(st.sets(st.integers(0, n - 1)))) if n else []


LABEL_KEYS = ["zone", "tier", "example.com/gpu", "n", "bad key"]
LABEL_VALUES = ["", "a", "b", "1", "7", "10", "-3", "+4", "x_y", "99999999999999999999"]
TAINT_KEYS = ["k1", "k2", "node.kubernetes.io/unschedulable", ""]
TAINT_VALUES = ["", "v1", "v2"]
EFFECTS = ["NoSchedule", "NoExecute", "PreferNoSchedule", ""]

label_sets = st.dictionaries(st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES), max_size=4)
taints = st.lists(
    st.fixed_dictionaries(
        {
            "key": st.sampled_from(TAINT_KEYS),
            "value": st.sampled_from(TAINT_VALUES),
            "effect": st.sampled_from(EFFECTS),
        }
    ),
    max_size=3,
)
tolerations = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "key": st.sampled_from(TAINT_KEYS),
            "operator": st.sampled_from(["Exists", "Equal", "", "Bogus"]),
            "value": st.sampled_from(TAINT_VALUES),
            "effect": st.sampled_from(EFFECTS),
        },
    ),
    max_size=3,
)


@st.composite
def node_lists(draw: st.DrawFn, max_nodes: int = 8) -> list[Obj]:
    n = draw(st.integers(0, max_nodes))
    return [
        make_node(
            f"n{i}",
            labels=draw(label_sets),
            taints=draw(taints),
            unschedulable=draw(st.sampled_from([None, False, True])),
        )
        for i in range(n)
    ]


# resource requests and allocatable, for the NodeResources* property tests
RESOURCE_NAMES = [
    "cpu",
    "memory",
    "pods",
    "ephemeral-storage",
    "kubernetes.io/batch-cpu",
    "example.com/gpu",
    "foo",
]
quantities = st.sampled_from(["0", "1", "2", "3", "500m", "1500m", "1Gi", "3Gi", "100", "4000"])
request_lists = st.one_of(st.none(), st.dictionaries(st.sampled_from(RESOURCE_NAMES), quantities, max_size=4))


def bound_pod(draw: st.DrawFn, name: str, nodes: int) -> Obj:
    """A pod of up to two containers with drawn requests, bound to one of nodes n0..n{nodes-1}."""
    return make_pod(
        name, node=f"n{draw(st.integers(0, nodes - 1))}", requests=draw(st.lists(request_lists, max_size=2))
    )


@st.composite
def resource_clusters(draw: st.DrawFn, max_nodes: int, max_pods: int) -> tuple[list[Obj], list[Obj]]:
    """Up to max_nodes nodes n0.. with drawn allocatable, and up to max_pods pods e0.. bound to them."""
    n = draw(st.integers(0, max_nodes))
    allocatable = st.dictionaries(
        st.sampled_from(RESOURCE_NAMES),
        st.sampled_from(["0", "1", "2", "4", "8Gi", "16", "4000"]),
        max_size=6,
    )
    nodes = [make_node(f"n{i}", allocatable=draw(allocatable)) for i in range(n)]
    pods = [bound_pod(draw, f"e{k}", n) for k in range(draw(st.integers(0, max_pods)) if n else 0)]
    return nodes, pods
