"""Tests for scheduler.cache: assumed pods (confirm, forget, expire), pods moving nodes, node removal,
pods before their node, and the incremental snapshot (equal to a from-scratch one, O(changed) copies)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scheduler.cache as cache_mod
from scheduler.cache import SchedulerCache
from scheduler.framework.snapshot import NodeInfo, Snapshot


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def node(name: str, cpu: str = "4", memory: str = "8Gi", **extra: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"allocatable": {"cpu": cpu, "memory": memory, **extra}}}


def pod(
    name: str, node_name: str | None = None, cpu: str = "100m", phase: str | None = None, **extra: str
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, **extra}}}]}
    if node_name is not None:
        spec["nodeName"] = node_name
    out: dict[str, Any] = {"metadata": {"name": name, "namespace": "ns"}, "spec": spec}
    if phase is not None:
        out["status"] = {"phase": phase}
    return out


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cache(clock: FakeClock) -> SchedulerCache:
    c = SchedulerCache(ttl=30.0, clock=clock)
    c.add_node(node("n1"))
    c.add_node(node("n2"))
    return c


def pods_on(cache: SchedulerCache) -> dict[str, list[str]]:
    return dict(cache.dump()["nodes"])


# --- assumed pods -------------------------------------------------------------------------------------


def test_assume_then_confirm_by_informer(cache: SchedulerCache, clock: FakeClock) -> None:
    assumed = cache.assume_pod(pod("a"), "n1")
    assert assumed["spec"]["nodeName"] == "n1" and cache.is_assumed("ns/a")
    assert pods_on(cache) == {"n1": ["ns/a"], "n2": []} and cache.dump()["assumed"] == ["ns/a"]
    cache.finish_binding(assumed)
    cache.add_pod(pod("a", "n1", cpu="200m"))
    assert not cache.is_assumed(assumed)
    clock.now += 100
    assert cache.cleanup_expired_assumed() == []
    assert pods_on(cache) == {"n1": ["ns/a"], "n2": []}
    assert cache.get_pod("ns/a") == pod("a", "n1", cpu="200m")
    with pytest.raises(ValueError):
        cache.assume_pod(pod("a"), "n2")


def test_update_confirms_assumed_pod(cache: SchedulerCache) -> None:
    cache.assume_pod(pod("a"), "n1")
    cache.update_pod(None, pod("a", "n1"))
    assert not cache.is_assumed("ns/a") and pods_on(cache)["n1"] == ["ns/a"]


def test_informer_puts_assumed_pod_elsewhere(cache: SchedulerCache) -> None:
    cache.assume_pod(pod("a"), "n1")
    cache.add_pod(pod("a", "n2"))
    assert pods_on(cache) == {"n1": [], "n2": ["ns/a"]} and not cache.is_assumed("ns/a")


def test_assume_then_forget(cache: SchedulerCache) -> None:
    g = cache.generation
    cache.assume_pod(pod("a"), "n1")
    assert cache.forget_pod(pod("a")) is True
    assert pods_on(cache) == {"n1": [], "n2": []} and cache.dump()["assumed"] == []
    assert cache.generation == g + 2
    assert cache.forget_pod(pod("a")) is False
    cache.add_pod(pod("b", "n1"))
    assert cache.forget_pod(pod("b")) is False and pods_on(cache)["n1"] == ["ns/b"]


def test_assumed_pod_expires_ttl_after_binding(cache: SchedulerCache, clock: FakeClock) -> None:
    cache.assume_pod(pod("a"), "n1")
    cache.assume_pod(pod("b"), "n2")
    clock.now += 1000
    assert cache.cleanup_expired_assumed() == []  # binding not finished: never expires
    cache.finish_binding("ns/a")
    clock.now += 29.9
    assert cache.cleanup_expired_assumed() == []
    clock.now += 0.1
    assert cache.cleanup_expired_assumed() == ["ns/a"]
    assert pods_on(cache) == {"n1": [], "n2": ["ns/b"]}
    assert cache.is_assumed("ns/b") and not cache.is_assumed("ns/a")
    cache.add_pod(pod("a", "n1"))  # the informer's add after expiry adds it normally
    assert pods_on(cache)["n1"] == ["ns/a"]


_EXPIRY_OPS = st.lists(
    st.tuples(
        st.sampled_from(["assume", "finish", "confirm", "forget", "remove", "tick", "cleanup"]),
        st.sampled_from(["a", "b", "c", "d"]),
        st.floats(min_value=0, max_value=40),
    ),
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(_EXPIRY_OPS)
def test_expiry_drops_exactly_the_assumed_pods_past_their_deadline(ops: list[tuple[str, str, float]]) -> None:
    """The deadline heap expires what a walk over every assumed pod would (the readable rule: assumed,
    binding finished, latest deadline passed), whatever confirmations, forgets and repeated
    finish_binding calls came in between."""
    clock = FakeClock()
    cache = SchedulerCache(ttl=30.0, clock=clock)
    cache.add_node(node("n1"))
    deadline: dict[str, float] = {}  # the model: assumed pods -> their deadline (inf before finish)
    for op, name, dt in ops:
        key = f"ns/{name}"
        if op == "assume":
            try:
                cache.assume_pod(pod(name), "n1")
            except ValueError:
                continue
            deadline[key] = float("inf")
        elif op == "finish":
            cache.finish_binding(key)
            if key in deadline:
                deadline[key] = clock.now + 30.0
        elif op == "confirm":
            cache.add_pod(pod(name, "n1"))
            deadline.pop(key, None)
        elif op == "forget":
            cache.forget_pod(key)
            deadline.pop(key, None)
        elif op == "remove":
            cache.remove_pod(key)
            deadline.pop(key, None)
        elif op == "tick":
            clock.now += dt
        else:
            want = sorted(k for k, d in deadline.items() if clock.now >= d)
            assert cache.cleanup_expired_assumed() == want
            for k in want:
                del deadline[k]
        assert {k for k in deadline if cache.is_assumed(k)} == set(deadline)


# --- informer path ------------------------------------------------------------------------------------


def test_pod_moving_nodes(cache: SchedulerCache) -> None:
    cache.add_pod(pod("a", "n1", cpu="1"))
    cache.update_pod(pod("a", "n1", cpu="1"), pod("a", "n2", cpu="1"))
    snap = Snapshot()
    cache.update_snapshot(snap)
    assert pods_on(cache) == {"n1": [], "n2": ["ns/a"]}
    cpu = snap.col["cpu"]
    assert snap.requested[cpu, snap.index["n1"]] == 0 and snap.requested[cpu, snap.index["n2"]] == 1000


def test_terminated_and_unassigned_pods(cache: SchedulerCache) -> None:
    cache.add_pod(pod("a", "n1"))
    cache.add_pod(pod("pending"))  # no nodeName: not the cache's business
    cache.add_pod(pod("done", "n1", phase="Succeeded"))
    assert pods_on(cache)["n1"] == ["ns/a"]
    cache.update_pod(pod("a", "n1"), pod("a", "n1", phase="Failed"))
    assert pods_on(cache)["n1"] == [] and cache.list_pods() == []
    cache.assume_pod(pod("b"), "n2")
    cache.update_pod(None, pod("b", "n2", phase="Succeeded"))
    assert cache.dump()["assumed"] == [] and pods_on(cache)["n2"] == []


def test_node_removal_with_pods(cache: SchedulerCache) -> None:
    cache.add_pod(pod("a", "n1"))
    cache.assume_pod(pod("b"), "n1")
    cache.remove_node(node("n1"))
    dump = cache.dump()
    assert dump["nodes"] == {"n2": []} and dump["unknown_nodes"] == {"n1": ["ns/a", "ns/b"]}
    snap = Snapshot()
    cache.update_snapshot(snap)
    assert snap.names == ["n2"] and [n["metadata"]["name"] for n in cache.list_nodes()] == ["n2"]
    cache.add_node(node("n1", cpu="2"))  # back: its pods are attached again
    cache.update_snapshot(snap)
    n1, n2 = snap.index["n1"], snap.index["n2"]  # rows follow no name order in the live path
    assert sorted(snap.names) == ["n1", "n2"] and (snap.pod_count[n1], snap.pod_count[n2]) == (2, 0)
    assert snap.allocatable[snap.col["cpu"], n1] == 2000
    cache.remove_node("n1")
    cache.remove_pod(pod("a"))
    cache.forget_pod(pod("b"))
    assert cache.dump()["unknown_nodes"] == {}  # the imaginary NodeInfo is gone with its last pod
    cache.remove_node("n1")  # unknown: no-op


def test_pods_before_their_node(clock: FakeClock) -> None:
    cache = SchedulerCache(clock=clock)
    cache.add_pod(pod("a", "late", cpu="1"))
    cache.update_pod(None, pod("b", "late", cpu="2"))
    snap = Snapshot()
    cache.update_snapshot(snap)
    assert snap.n == 0 and cache.dump()["unknown_nodes"] == {"late": ["ns/a", "ns/b"]}
    cache.add_node(node("late"))
    cache.update_snapshot(snap)
    assert snap.names == ["late"] and snap.requested[snap.col["cpu"], 0] == 3000
    assert cache.dump()["unknown_nodes"] == {}


def test_generation_stamped_on_changed_node(cache: SchedulerCache) -> None:
    g = cache.generation
    cache.add_pod(pod("a", "n2"))
    assert cache.generation == g + 1
    snap = Snapshot()
    cache.update_snapshot(snap)
    gens = {info.name: info.generation for info in snap.infos}
    assert gens["n2"] == g + 1 and gens["n1"] < g + 1


# --- snapshot ------------------------------------------------------------------------------------------


def rows(snap: Snapshot) -> dict[str, tuple[dict[str, int], dict[str, int], int, list[str]]]:
    """Row by row, independent of column order and of all-zero columns."""
    out = {}
    for i, name in enumerate(snap.names):
        alloc = {r: int(snap.allocatable[j, i]) for r, j in snap.col.items() if snap.allocatable[j, i]}
        req = {r: int(snap.requested[j, i]) for r, j in snap.col.items() if snap.requested[j, i]}
        assert snap.infos[i].name == name
        out[name] = (alloc, req, int(snap.pod_count[i]), sorted(snap.infos[i].pods))
    return out


def assert_matches_scratch(cache: SchedulerCache, snap: Snapshot) -> None:
    scratch = Snapshot.build(cache.list_nodes(), cache.list_pods())
    assert sorted(snap.names) == scratch.names  # the live rows are a permutation of the nodes
    assert snap.index == {name: i for i, name in enumerate(snap.names)}
    assert rows(snap) == rows(scratch)
    for i, info in enumerate(snap.infos):
        assert snap.nodes[i] is info.node  # the Node object the row was copied from


NODES = [f"n{i}" for i in range(5)]
PODS = [f"p{i}" for i in range(8)]
CPU = st.sampled_from(["100m", "250m", "1", "2"])
OPS = st.one_of(
    st.tuples(st.just("add_node"), st.sampled_from(NODES), st.sampled_from(["2", "4", "8"]), st.booleans()),
    st.tuples(st.just("remove_node"), st.sampled_from(NODES)),
    st.tuples(st.just("add_pod"), st.sampled_from(PODS), st.sampled_from(NODES), CPU, st.booleans()),
    st.tuples(st.just("remove_pod"), st.sampled_from(PODS)),
    st.tuples(st.just("terminate"), st.sampled_from(PODS), st.sampled_from(NODES)),
    st.tuples(st.just("assume"), st.sampled_from(PODS), st.sampled_from(NODES), CPU),
    st.tuples(st.just("forget"), st.sampled_from(PODS)),
    st.tuples(st.just("bind_and_expire"), st.sampled_from(PODS), st.sampled_from([10.0, 40.0])),
    st.tuples(st.just("sync")),
)


def apply(cache: SchedulerCache, clock: FakeClock, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "add_node":
        cache.add_node(node(op[1], cpu=op[2], **({"example.com/gpu": "2"} if op[3] else {})))
    elif kind == "remove_node":
        cache.remove_node(op[1])
    elif kind == "add_pod":
        cache.update_pod(None, pod(op[1], op[2], cpu=op[3], **({"example.com/gpu": "1"} if op[4] else {})))
    elif kind == "remove_pod":
        cache.remove_pod(pod(op[1]))
    elif kind == "terminate":
        cache.update_pod(None, pod(op[1], op[2], phase="Failed"))
    elif kind == "assume":
        if cache.get_pod("ns/" + op[1]) is None:
            cache.assume_pod(pod(op[1], cpu=op[3]), op[2])
    elif kind == "forget":
        cache.forget_pod(pod(op[1]))
    elif kind == "bind_and_expire":
        cache.finish_binding(pod(op[1]))
        clock.now += op[2]
        cache.cleanup_expired_assumed()


@settings(max_examples=300, deadline=None)
@given(st.lists(OPS, max_size=60))
def test_incremental_snapshot_equals_scratch(ops: list[tuple[Any, ...]]) -> None:
    clock = FakeClock()
    cache = SchedulerCache(clock=clock)
    snap = Snapshot()
    other = Snapshot()  # synced rarely: many changes at once, or a rebuild
    for n, op in enumerate(ops):
        if op[0] == "sync":
            cache.update_snapshot(snap)
            assert_matches_scratch(cache, snap)
        else:
            before = rows(snap)
            apply(cache, clock, op)
            assert rows(snap) == before  # the snapshot holds copies: cache changes don't reach it
        if n % 7 == 6:
            cache.update_snapshot(other)
            assert_matches_scratch(cache, other)
    cache.update_snapshot(snap)
    assert_matches_scratch(cache, snap)
    cache.update_snapshot(other)
    assert_matches_scratch(cache, other)


def count_copies(monkeypatch: pytest.MonkeyPatch, snap: Snapshot) -> dict[str, int]:
    counts = {"rows": 0, "infos": 0, "rebuilds": 0}
    copy_rows, copy_info, rebuild = snap._copy_rows, cache_mod.copy_node_info, snap.rebuild

    def counting_rows(rows: list[int], alloc: list[int] | None = None) -> None:
        counts["rows"] += len(rows)
        copy_rows(rows, alloc)

    def counting_info(info: NodeInfo) -> NodeInfo:
        counts["infos"] += 1
        return copy_info(info)

    def counting_rebuild(*args: Any, **kwargs: Any) -> None:
        counts["rebuilds"] += 1
        rebuild(*args, **kwargs)

    monkeypatch.setattr(snap, "_copy_rows", counting_rows)
    monkeypatch.setattr(snap, "rebuild", counting_rebuild)
    monkeypatch.setattr(cache_mod, "copy_node_info", counting_info)
    return counts


@pytest.mark.parametrize("k", [0, 1, 3, 10])
def test_update_snapshot_copies_only_changed_rows(monkeypatch: pytest.MonkeyPatch, k: int) -> None:
    cache = SchedulerCache(clock=FakeClock())
    for i in range(50):
        cache.add_node(node(f"n{i:02d}"))
        cache.add_pod(pod(f"p{i}", f"n{i:02d}"))
    snap = Snapshot()
    cache.update_snapshot(snap)
    counts = count_copies(monkeypatch, snap)
    for i in range(k):
        cache.add_pod(pod(f"q{i}", f"n{i * 5:02d}"))  # k distinct nodes, several changes on one
        cache.update_pod(None, pod(f"q{i}", f"n{i * 5:02d}", cpu="1"))
    cache.update_snapshot(snap)
    assert counts == {"rows": k, "infos": k, "rebuilds": 0}
    cache.update_snapshot(snap)  # nothing changed since
    assert counts == {"rows": k, "infos": k, "rebuilds": 0}
    assert_matches_scratch(cache, snap)


def test_node_set_change_moves_rows_in_place(monkeypatch: pytest.MonkeyPatch, cache: SchedulerCache) -> None:
    snap = Snapshot()
    cache.update_snapshot(snap)
    counts = count_copies(monkeypatch, snap)
    cache.add_node(node("n3"))
    cache.update_snapshot(snap)  # the new node's row only: no rebuild, no other row copied
    assert counts == {"rows": 1, "infos": 1, "rebuilds": 0} and sorted(snap.names) == ["n1", "n2", "n3"]
    cache.remove_node("n1")
    cache.add_pod(pod("late", "n2"))
    cache.update_snapshot(snap)  # a row leaves, a changed one is re-copied
    assert counts == {"rows": 2, "infos": 2, "rebuilds": 0} and sorted(snap.names) == ["n2", "n3"]
    assert_matches_scratch(cache, snap)


def test_new_resource_in_refresh_keeps_every_changed_row(cache: SchedulerCache) -> None:
    snap = Snapshot()
    cache.update_snapshot(snap)
    cache.add_pod(pod("gpu", "n1", **{"example.com/gpu": "1"}))  # a column the snapshot lacks
    cache.add_pod(pod("plain", "n2", cpu="3"))  # changed after it: still copied
    cache.update_snapshot(snap)
    assert_matches_scratch(cache, snap)
    assert snap.requested[snap.col["cpu"], snap.index["n2"]] == 3000


def test_foreign_snapshot_is_rebuilt(cache: SchedulerCache) -> None:
    cache.add_pod(pod("a", "n1"))
    snap = Snapshot.build([node("zzz")])
    cache.update_snapshot(snap)
    assert_matches_scratch(cache, snap)
    snap.rebuild([])  # changed behind the cache's back: layout moved, so rebuilt again
    cache.update_snapshot(snap)
    assert_matches_scratch(cache, snap)
