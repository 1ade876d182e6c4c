"""Sampling nodes (docs/architecture.md#sampling-nodes): kube-scheduler 1.20's `numFeasibleNodesToFind`
to the integer; the rotating start advanced by the rows processed; Filter stops at the k-th feasible
row in rotation order (per-node plugins are not called past it), only those rows are scored, and with
no feasible row the result is the full pass's; nominated pods keep counting; a property test against
the full pass read in rotation order."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterResult, IntArray
from scheduler.framework.nominated import NominatedPods
from scheduler.framework.runtime import Framework
from scheduler.framework.sampling import num_feasible_nodes_to_find
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.noderesources import NodeResourcesFit
from tests.unit.scheduler.plugins._preemption_support import HIGH, LOW
from tests.unit.scheduler.plugins._preemption_support import node as knode
from tests.unit.scheduler.plugins._preemption_support import pod as kpod

Obj = dict[str, Any]
POD: Obj = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": []}}

# kube's formula by hand: n < 100 or pct >= 100 → n; pct 0 → max(5, 50 - n/125) %; n*pct/100, at least 100.
TABLE = {
    50: [50, 50, 50, 50, 50, 50, 50],
    100: [100, 100, 100, 100, 100, 100, 100],
    101: [100, 100, 100, 100, 100, 100, 101],
    1000: [420, 100, 100, 100, 500, 990, 1000],
    5000: [500, 100, 250, 500, 2500, 4950, 5000],
    6000: [300, 100, 300, 600, 3000, 5940, 6000],
    20000: [1000, 200, 1000, 2000, 10000, 19800, 20000],
}
PCTS = [0, 1, 5, 10, 50, 99, 100]


@pytest.mark.parametrize("n", sorted(TABLE))
def test_num_feasible_nodes_to_find_is_kubes(n: int) -> None:
    assert [num_feasible_nodes_to_find(n, pct) for pct in PCTS] == TABLE[n]


def test_num_feasible_nodes_to_find_kube_test_table() -> None:
    # TestNumFeasibleNodesToFind of kube-scheduler 1.20.2.
    assert num_feasible_nodes_to_find(10, 0) == 10
    assert num_feasible_nodes_to_find(10, 40) == 10
    assert num_feasible_nodes_to_find(1000, 0) == 420
    assert num_feasible_nodes_to_find(1000, 40) == 400
    assert num_feasible_nodes_to_find(6000, 0) == 300
    assert num_feasible_nodes_to_find(6000, 40) == 2400


def test_num_feasible_nodes_to_find_wraps_in_int32() -> None:
    # 30,000,000 nodes × 99 % overflows int32 in Go: -1325032704 / 100 → the 100-node minimum.
    assert num_feasible_nodes_to_find(30_000_000, 99) == 100
    assert num_feasible_nodes_to_find(21_000_000, 99) == 20_790_000


def nodes(n: int, labelled: set[int] | None = None) -> list[Obj]:
    """n nodes; those numbered in `labelled` (all when None) carry label x."""
    return [
        {
            "metadata": {
                "name": f"n{k:04d}",
                "labels": {"x": "1"} if labelled is None or k in labelled else {},
            },
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
        }
        for k in range(n)
    ]


def has(snapshot: Snapshot, i: int, key: str) -> bool:
    return key in snapshot.infos[i].node["metadata"].get("labels", {})


class PerNode:
    """A per-node Filter rejecting rows without label `key`; records the rows it was called on."""

    def __init__(self, key: str = "x") -> None:
        self.key, self.rows = key, list[int]()

    @property
    def name(self) -> str:
        return f"PerNode-{self.key}"

    def filter(self, state: CycleState, pod: Obj, snapshot: Snapshot, i: int) -> Status:
        self.rows.append(i)
        return Status.success() if has(snapshot, i, self.key) else Status.unschedulable(f"no {self.key}")


class Vectorised:
    """The same rule vectorised."""

    def __init__(self, key: str = "x") -> None:
        self.key = key

    @property
    def name(self) -> str:
        return f"Vectorised-{self.key}"

    def filter_all(self, state: CycleState, pod: Obj, snapshot: Snapshot) -> FilterResult:
        failed = np.array([not has(snapshot, i, self.key) for i in range(snapshot.n)], bool)
        return FilterResult.from_mask(failed, Status.unschedulable(f"no {self.key}"))


class Scored:
    """A Score plugin recording the rows it scored (all score 0)."""

    def __init__(self) -> None:
        self.rows: list[int] = []

    @property
    def name(self) -> str:
        return "Scored"

    def score_all(self, state: CycleState, pod: Obj, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        self.rows = feasible.tolist()
        return np.zeros(len(feasible), np.int64)


def rotation(n: int, start: int) -> list[int]:
    return [(start + j) % n for j in range(n)]


def first_k(passes: list[bool], start: int, k: int) -> tuple[list[int], int]:
    """The first k passing rows in rotation order from `start`, and the rows processed to find them."""
    found: list[int] = []
    for j, i in enumerate(rotation(len(passes), start)):
        if passes[i]:
            found.append(i)
            if len(found) == k:
                return found, j + 1
    return found, len(passes)


def test_every_node_passes_the_start_advances_by_k() -> None:
    # kube's TestFairEvaluationForNodes: 500 nodes, 30 %: 150 nodes each time, start (i+1)*150 % 500.
    snap = Snapshot.build(nodes(500))
    for plugins in ([], [Vectorised()], [PerNode()]):
        fw = Framework(plugins, percentage_of_nodes_to_score=30)
        for i in range(2 * (500 // 150 + 1)):
            res = fw.schedule(CycleState(0), POD, snap)
            assert res.feasible == 150 and res.evaluated == 150
            assert fw.next_start == (i + 1) * 150 % 500


def test_three_pods_advance_the_start_by_the_rows_processed() -> None:
    snap = Snapshot.build(nodes(250, set(range(0, 250, 2))))  # 125 feasible, k = 250 × 48 % = 120
    passes = [has(snap, i, "x") for i in range(snap.n)]
    fw = Framework([Vectorised()], percentage_of_nodes_to_score=0)
    start = 0
    for _ in range(3):
        _, processed = first_k(passes, start, 120)
        res = fw.schedule(CycleState(0), POD, snap)
        assert res.feasible == 120 and res.evaluated == processed
        start = (start + processed) % 250
        assert fw.next_start == start
    assert start != 0


def test_rows_past_the_kth_feasible_are_not_filtered_nor_scored() -> None:
    snap = Snapshot.build(nodes(300, set(range(0, 300, 2))))  # 150 feasible: k = 100 (1 % of 300 → 100)
    passes = [has(snap, i, "x") for i in range(snap.n)]
    per_node, scored = PerNode(), Scored()
    fw = Framework([per_node, scored], percentage_of_nodes_to_score=1)
    fw.next_start = 7
    want, processed = first_k(passes, 7, 100)
    res = fw.schedule(CycleState(0), POD, snap)
    assert processed < 300 and res.evaluated == processed
    assert per_node.rows == rotation(300, 7)[:processed]  # row by row in rotation order, then stops
    assert sorted(scored.rows) == sorted(want)
    assert res.node is not None and snap.index[res.node] in want
    full = Framework([PerNode(), Scored()]).filter_all(CycleState(0), POD, snap)[0]
    assert set(scored.rows) <= set(full.tolist())
    # Only processed rows carry a status, each the full pass's.
    processed_rows = set(rotation(300, 7)[:processed])
    assert {snap.index[name] for name in res.diagnosis} == processed_rows - set(want)
    assert all(st.reasons == ("no x",) and st.plugin == "PerNode-x" for st in res.diagnosis.values())


def test_a_per_node_plugin_runs_only_where_earlier_plugins_passed() -> None:
    labelled = set(range(0, 400, 2))
    snap = Snapshot.build(
        [
            {**n, "metadata": {**n["metadata"], "labels": {**n["metadata"]["labels"], "y": "1"}}}
            if k % 4 == 0
            else n
            for k, n in enumerate(nodes(400, labelled))
        ]
    )
    before, after = PerNode("x"), PerNode("y")
    fw = Framework([before, Vectorised("x"), after], percentage_of_nodes_to_score=1)
    res = fw.schedule(CycleState(0), POD, snap)
    assert res.feasible == 100
    assert set(after.rows) <= {i for i in range(snap.n) if has(snap, i, "x")}
    for name, status in res.diagnosis.items():
        i = snap.index[name]
        assert status.plugin == ("PerNode-x" if not has(snap, i, "x") else "PerNode-y")


def test_no_feasible_node_gives_the_full_pass() -> None:
    snap = Snapshot.build(nodes(200, set()))
    sampled = Framework([PerNode(), Vectorised("y")], percentage_of_nodes_to_score=0)
    sampled.next_start = 33
    full = Framework([PerNode(), Vectorised("y")])
    a, b = sampled.schedule(CycleState(0), POD, snap), full.schedule(CycleState(0), POD, snap)
    assert a.status.message() == b.status.message() == "0/200 nodes are available: 200 no x."
    assert a.diagnosis == b.diagnosis and a.evaluated == b.evaluated == 200
    assert sampled.next_start == 33  # every row processed: the start comes back to itself


def test_fewer_feasible_than_k_processes_every_row() -> None:
    snap = Snapshot.build(nodes(200, {5, 150}))
    fw = Framework([Vectorised()], percentage_of_nodes_to_score=0)
    fw.next_start = 10
    res = fw.schedule(CycleState(0), POD, snap)
    assert res.feasible == 2 and res.evaluated == 200 and len(res.diagnosis) == 198
    assert fw.next_start == 10


def test_unset_percentage_filters_every_node_and_keeps_the_start() -> None:
    snap = Snapshot.build(nodes(300))
    per_node = PerNode()
    fw = Framework([per_node])
    res = fw.schedule(CycleState(0), POD, snap)
    assert res.feasible == 300 and res.evaluated == 300 and len(per_node.rows) == 300
    assert fw.next_start == 0
    with pytest.raises(ValueError, match="percentageOfNodesToScore=101"):
        Framework([], percentage_of_nodes_to_score=101)


def test_nominated_pods_count_in_the_window() -> None:
    nominated = NominatedPods()
    snap = Snapshot.build([knode(f"n{k:03d}", {"cpu": "4", "memory": "8Gi"}) for k in range(150)])
    # A higher-priority pod nominated to the second row in rotation order fills it for the incoming pod.
    target = snap.names[1]
    nominated.add(kpod("nom", priority=HIGH, req={"cpu": "2"}, nominated=target))
    fw = Framework([NodeResourcesFit()], percentage_of_nodes_to_score=1, nominated=nominated)
    incoming = kpod("p", priority=LOW, req={"cpu": "3"})
    res = fw.schedule(CycleState(0), incoming, snap)
    assert res.feasible == 100 and res.evaluated == 101  # the window went one row further
    assert res.diagnosis == {target: Status.unschedulable("Insufficient cpu", plugin="NodeResourcesFit")}
    assert fw.next_start == 101
    # A lower-priority nominated pod does not count.
    nominated.add(kpod("nom", priority=LOW - 1, req={"cpu": "2"}, nominated=target))
    fw.next_start = 0
    res = fw.schedule(CycleState(0), incoming, snap)
    assert res.feasible == 100 and res.evaluated == 100 and res.diagnosis == {}


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(100, 260),
    pct=st.integers(0, 100),
    seed=st.integers(0, 2**32 - 1),
    start=st.integers(0, 10_000),
    layout=st.sampled_from(["vv", "pp", "pv", "vp"]),
    density=st.sampled_from([0.0, 0.05, 0.5, 0.95, 1.0]),
)
def test_window_is_the_full_pass_read_in_rotation_order(
    n: int, pct: int, seed: int, start: int, layout: str, density: float
) -> None:
    rng = np.random.default_rng(seed)
    raw = nodes(n, set(np.flatnonzero(rng.random(n) < density).tolist()))
    for node_ in raw:
        if rng.random() < density:
            node_["metadata"]["labels"]["y"] = "1"
    snap = Snapshot.build(raw)

    def plugins() -> list[Any]:
        return [(Vectorised if kind == "v" else PerNode)(key) for kind, key in zip(layout, "xy", strict=True)]

    full_feasible, full_rej = Framework(plugins()).filter_all(CycleState(0), POD, snap)
    full = full_rej.as_dict()
    passes = [False] * n
    for i in full_feasible.tolist():
        passes[i] = True
    scored = Scored()
    fw = Framework([*plugins(), scored], percentage_of_nodes_to_score=pct)
    fw.next_start = start
    k = num_feasible_nodes_to_find(n, pct)
    res = fw.schedule(CycleState(0), POD, snap)
    want, processed = first_k(passes, start % n, k)
    assert res.feasible == len(want)
    if len(want) > 1:
        assert sorted(scored.rows) == sorted(want)
    elif want:
        assert res.node == snap.names[want[0]]
    if not want:
        assert res.diagnosis == full and res.evaluated == n
        return
    assert res.evaluated == processed
    assert fw.next_start == ((start % n + processed) % n if k < n else start)
    assert res.node is not None and snap.index[res.node] in want
    seen = set(rotation(n, start % n)[:processed]) if k < n else set(range(n))
    assert res.diagnosis == {name: s for name, s in full.items() if snap.index[name] in seen}
