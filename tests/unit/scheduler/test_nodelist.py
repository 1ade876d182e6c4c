"""The snapshot's node list (docs/scheduler-scale.md#node-list): nodes joining, leaving and changing in
place keep `index` ↔ `names` ↔ `infos` ↔ `nodes` consistent, every node exactly once, the matrices
equal to a fresh snapshot's over the same rows, O(changes) rows moved; the rows stay a uniformly
random permutation (position histograms of 2,000 seeded runs are flat); the cache's first sync
shuffles, later ones move rows in place; the views follow (`NodeColumn`, a view without `resize`)."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from typing import Any, cast

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scheduler.cache as cache_mod
from apis.kubeobjects import Node, Pod
from scheduler.cache import SchedulerCache
from scheduler.framework.rows import RowChange, move_rows
from scheduler.framework.snapshot import NodeInfo, PodInfo, Snapshot

NAMES = [f"n{i}" for i in range(12)]
CPU = ["1", "2", "4"]


def node(name: str, cpu: str = "2", gpu: bool = False, label: str = "a") -> Node:
    alloc = {"cpu": cpu, "memory": "4Gi", **({"example.com/gpu": "2"} if gpu else {})}
    return cast(
        Node, {"metadata": {"name": name, "labels": {"tier": label}}, "status": {"allocatable": alloc}}
    )


def pod(name: str, on: str, cpu: str = "100m") -> Pod:
    containers = [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]
    return cast(
        Pod,
        {
            "metadata": {"name": name, "namespace": "ns", "uid": name},
            "spec": {"nodeName": on, "containers": containers},
        },
    )


def info(name: str, cpu: str = "2", gpu: bool = False, pods: int = 0, label: str = "a") -> NodeInfo:
    made = NodeInfo.of(node(name, cpu, gpu, label))
    for k in range(pods):
        made.add_pod(PodInfo.of(pod(f"{name}-p{k}", name)), 1)
    return made


def matrices(snap: Snapshot) -> dict[str, Any]:
    return {
        "allocatable": snap.allocatable.tolist(),
        "requested": snap.requested.tolist(),
        "pod_count": snap.pod_count.tolist(),
        "nonzero": snap.nonzero.tolist(),
    }


def assert_consistent(snap: Snapshot, expected: dict[str, NodeInfo]) -> None:
    """The rows hold exactly `expected`, each once, and equal a fresh snapshot over the same rows."""
    assert sorted(snap.names) == sorted(expected) and len(snap.infos) == len(snap.nodes) == snap.n
    assert snap.index == {name: i for i, name in enumerate(snap.names)}
    ordered = sorted(snap.names)  # name_rank: each row's name's position in name order
    assert snap.name_rank.tolist() == [ordered.index(name) for name in snap.names]
    for i, name in enumerate(snap.names):
        assert snap.infos[i] is expected[name] and snap.nodes[i] is expected[name].node
    fresh = Snapshot(snap.infos, snap.resources)
    assert fresh.names == snap.names and fresh.resources == snap.resources
    assert matrices(snap) == matrices(fresh)
    by_name = Snapshot.build([i.node for i in expected.values()])  # name order, no pods: allocatable
    perm = [by_name.index[name] for name in snap.names]
    for r, j in snap.col.items():  # columns no node uses any more stay, all zero
        want = by_name.allocatable[by_name.col[r], perm] if r in by_name.col else np.zeros(snap.n, np.int64)
        assert snap.allocatable[j].tolist() == want.tolist()
    col = snap.column("tier", lambda n: n["metadata"]["labels"]["tier"], np.object_)
    assert col.tolist() == [i.node["metadata"]["labels"]["tier"] for i in snap.infos]
    plain = snap.view("plain", PlainView)
    assert plain.values == snap.names


class PlainView:
    """A view without `resize`: rebuilt on every in-place change."""

    reads_pods = False

    def __init__(self) -> None:
        self.values: list[str] = []
        self.rebuilds = 0

    def rebuild(self, snapshot: Snapshot) -> None:
        self.values = list(snapshot.names)
        self.rebuilds += 1

    def refresh(self, snapshot: Snapshot, rows: Any) -> None:
        for i in rows:
            self.values[i] = snapshot.names[i]


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(st.sampled_from(NAMES), max_size=4, unique=True), st.booleans()),
        st.tuples(st.just("remove"), st.lists(st.sampled_from(NAMES), max_size=4, unique=True)),
        st.tuples(st.just("change"), st.lists(st.sampled_from(NAMES), max_size=3, unique=True)),
        st.tuples(
            st.just("mixed"),
            st.lists(st.sampled_from(NAMES), max_size=3, unique=True),
            st.lists(st.sampled_from(NAMES), max_size=3, unique=True),
        ),
    ),
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(NAMES), max_size=6, unique=True), OPS, st.integers(0, 1000))
def test_in_place_changes_keep_the_rows_consistent(first: list[str], ops: list[Any], seed: int) -> None:
    expected = {name: info(name, pods=k % 3) for k, name in enumerate(first)}
    snap = Snapshot(list(expected.values()), seed=seed)
    snap.column("tier", lambda n: n["metadata"]["labels"]["tier"], np.object_)
    snap.view("plain", PlainView)
    gen = 2
    for op in ops:
        gen += 1
        if op[0] == "add":
            new = [info(n, CPU[gen % 3], gpu=op[2], label=f"l{gen}") for n in op[1] if n not in expected]
            again = [info(n, label=f"l{gen}", pods=1) for n in op[1] if n in expected]  # counts as changed
            before = snap.n
            change = snap.apply_nodes([*new, *again])
            assert change.n == before + len(new) and len(change.added) == len(new)
            expected.update({i.name: i for i in (*new, *again)})
        elif op[0] == "remove":
            change = snap.apply_nodes([], [*op[1], "unknown"])
            gone = [n for n in op[1] if n in expected]
            assert len(change.removed) == len(gone) and len(change.moves) <= len(gone)
            for n in gone:
                del expected[n]
        elif op[0] == "change":
            changed = [info(n, CPU[gen % 3], pods=gen % 4, label=f"c{gen}") for n in op[1] if n in expected]
            snap.apply_nodes([], [], changed)
            expected.update({i.name: i for i in changed})
        else:  # removed and added in one batch; a name in both leaves and comes back as a new node
            removed, added = op[1], op[2]
            for n in removed:
                expected.pop(n, None)
            new = [info(n, label=f"m{gen}", pods=2) for n in added]
            snap.apply_nodes(new, removed)
            expected.update({i.name: i for i in new})
        assert_consistent(snap, expected)


def test_a_new_resource_rebuilds_keeping_the_row_order() -> None:
    snap = Snapshot([info(n) for n in ("c", "a", "b")])
    assert snap.names == ["c", "a", "b"]  # Snapshot(infos) keeps the order given; build sorts
    assert Snapshot.build([node("c"), node("a")]).names == ["a", "c"]
    plain = snap.view("plain", PlainView)
    snap.apply_nodes([info("d", gpu=True)], ["a"])
    assert "example.com/gpu" in snap.col and plain.rebuilds == 2
    assert [n for n in snap.names if n != "d"] == ["c", "b"]  # b took a's row; the rebuild moved none
    assert_consistent(snap, {i.name: i for i in snap.infos})


def test_matrices_grow_amortised_and_stay_views() -> None:
    snap = Snapshot(seed=3)
    base = snap.pod_count.base
    grown = 0
    for k in range(1000):
        snap.apply_nodes([info(f"x{k:04d}", pods=k % 2)])
        if snap.pod_count.base is not base:
            base, grown = snap.pod_count.base, grown + 1
    # spare rows grow with the row count (RowChange.array): a reallocation every ~n/8 nodes, not one
    # per node
    assert grown <= 30
    assert snap.allocatable.shape == (len(snap.resources), 1000) and snap.pod_count.base is not None
    assert_consistent(snap, {i.name: i for i in snap.infos})


def test_move_rows_is_the_inside_out_shuffle() -> None:
    names = ["a", "b", "c", "d"]
    index = {n: i for i, n in enumerate(names)}
    change = move_rows(names, index, ["b"], [], random.Random(0))
    assert names == ["a", "d", "c"] and change.removed == (1,) and change.moves == ((3, 1),)
    assert change.take.tolist() == [0, 3, 2] and change.added == () and (change.old_n, change.n) == (4, 3)
    rng = random.Random(5)
    j = random.Random(5).randint(0, 3)
    change = move_rows(names, index, [], ["e"], rng)
    assert names[j] == "e" and index == {n: i for i, n in enumerate(names)} and change.added == (j,)
    assert change.moves == (((j, 3),) if j != 3 else ())


def test_row_change_array_with_no_old_rows() -> None:
    change = RowChange(np.array([-1, -1], np.int64), (), (), (0, 1), 0, 2)
    assert change.array(np.zeros(0, np.int32), 7).tolist() == [7, 7]
    assert change.array(np.zeros((2, 0), np.int64)).shape == (2, 2)


@pytest.mark.parametrize("k", [3, 4])
def test_rows_are_a_uniform_permutation(k: int) -> None:
    """Over 2,000 seeded runs of joins and leaves, every node sits in every row about equally often and
    every order of the nodes appears: bounds far wider than the sampling noise (never flaky; the
    seeds are fixed anyway)."""
    runs = 2000
    positions: Counter[tuple[str, int]] = Counter()
    orders: Counter[tuple[str, ...]] = Counter()
    for seed in range(runs):
        snap = Snapshot(seed=seed)
        snap.apply_nodes([info("a"), info("b")])
        snap.apply_nodes([info("c")])
        snap.apply_nodes([info("d"), info("e")], ["a"])
        if k == 3:
            snap.apply_nodes([], ["c"])
        assert snap.n == k
        orders[tuple(snap.names)] += 1
        positions.update((name, i) for i, name in enumerate(snap.names))
    expected = runs / k
    for name, i in itertools.product(snap.names, range(k)):
        assert 0.8 * expected < positions[(name, i)] < 1.2 * expected, (name, i, positions)
    perms = len(list(itertools.permutations(range(k))))
    assert len(orders) == perms
    assert all(0.5 * runs / perms < c < 1.5 * runs / perms for c in orders.values()), orders


def test_the_cache_shuffles_first_then_moves_rows_in_place() -> None:
    cache = SchedulerCache()
    for n in NAMES:
        cache.add_node(node(n))
    firsts = set()
    for seed in range(20):
        snap = Snapshot(seed=seed)
        cache.update_snapshot(snap)
        firsts.add(tuple(snap.names))
        assert sorted(snap.names) == sorted(NAMES)
    assert len(firsts) > 15  # random orders, not name order
    again = Snapshot(seed=0)
    cache.update_snapshot(again)
    assert tuple(again.names) in firsts  # the same seed repeats
    plain = again.view("plain", PlainView)
    rows = {n: again.index[n] for n in NAMES}
    cache.remove_node("n3")
    cache.add_node(node("late"))
    cache.add_pod(pod("p", "n5"))
    cache.update_snapshot(again)
    moved = [n for n in NAMES if n != "n3" and again.index[n] != rows[n]]
    assert len(moved) <= 2 and plain.values == again.names and plain.rebuilds == 2
    assert again.pod_count[again.index["n5"]] == 1 and again.layout > 1
    assert_consistent(again, {i.name: i for i in again.infos})


@pytest.mark.parametrize("limit", [1, 3, 1000])
def test_the_cache_finds_joins_and_leaves_from_its_log_or_by_set_difference(
    monkeypatch: pytest.MonkeyPatch, limit: int
) -> None:
    """A snapshot synced after the log was cut falls back to a set difference: same rows either way."""
    monkeypatch.setattr(cache_mod, "NODE_LOG_LIMIT", limit)
    rng = random.Random(limit)
    cache = SchedulerCache()
    often, rarely = Snapshot(seed=1), Snapshot(seed=2)
    for step in range(120):
        name = rng.choice(NAMES)
        if rng.random() < 0.5:
            cache.add_node(node(name, label=f"s{step}"))
        else:
            cache.remove_node(name)
        cache.update_snapshot(often)
        if step % 9 == 0:
            cache.update_snapshot(rarely)
    cache.update_snapshot(rarely)
    known = {n["metadata"]["name"]: n for n in cache.list_nodes()}
    for snap in (often, rarely):
        assert sorted(snap.names) == sorted(known)
        assert all(snap.infos[snap.index[n]].node is known[n] for n in known)
        assert_consistent(snap, {i.name: i for i in snap.infos})
    assert len(cache._node_log) <= 2 * limit
