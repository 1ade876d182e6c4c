"""The shard's queue gate (docs/shards.md#partition): it admits exactly the pods it owns, and a
membership change drops and adds exactly the pods whose owner changed to or from it."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.shards.admission import ShardGate
from scheduler.shards.ring import owner


def pod(uid: str) -> Any:
    return {"metadata": {"name": f"p-{uid}", "namespace": "ns", "uid": uid}, "spec": {}}


PODS = [pod(f"uid-{i}") for i in range(600)]
members = st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), unique=True, max_size=5)


def test_admits_only_owned_pods() -> None:
    gate = ShardGate("a", ["a", "b"])
    owned = [p for p in PODS if gate.admits(p)]
    assert owned == [p for p in PODS if owner(p["metadata"]["uid"], ["a", "b"]) == "a"]
    assert 0 < len(owned) < len(PODS)
    assert not gate.admits({"metadata": {}})
    assert all(ShardGate("a", ["a"]).admits(p) for p in PODS)
    assert not any(ShardGate("a").admits(p) for p in PODS)  # no membership seen yet


@settings(max_examples=40, deadline=None)
@given(members, members)
def test_update_moves_exactly_the_pods_whose_owner_changed(before: list[str], after: list[str]) -> None:
    gate = ShardGate("a", before)
    queued = {p["metadata"]["uid"] for p in PODS if gate.admits(p)}
    moves = gate.update(after, PODS)
    for p in moves.drop:
        queued.discard(p["metadata"]["uid"])
    queued |= {p["metadata"]["uid"] for p in moves.add}
    assert queued == {p["metadata"]["uid"] for p in PODS if gate.admits(p)}
    assert not {p["metadata"]["uid"] for p in moves.drop} & {p["metadata"]["uid"] for p in moves.add}
    if sorted(before) == sorted(after):
        assert not moves.drop and not moves.add


def test_a_join_moves_about_a_share() -> None:
    gate = ShardGate("a", ["a", "b"])
    moves = gate.update(["a", "b", "c"], PODS)
    assert not moves.add
    # c takes ~1/3 of all pods, half of them from a: ~100 of a's ~300.
    assert 60 < len(moves.drop) < 140
