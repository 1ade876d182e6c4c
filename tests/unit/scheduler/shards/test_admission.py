"""The shard's queue gate (docs/shards.md#partition): it admits exactly the pods it owns, and a
membership change drops and adds exactly the pods whose owner changed to or from it."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.podgroup import LABEL_POD_GROUP
from scheduler.shards.admission import ShardGate, partition_key
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


def gang_pod(uid: str, gang: str, ns: str = "ns", groups: str | None = None) -> Any:
    annotations = {"gang.scheduling.koordinator.sh/name": gang}
    if groups is not None:
        annotations["gang.scheduling.koordinator.sh/groups"] = groups
    return {
        "metadata": {"name": f"p-{uid}", "namespace": ns, "uid": uid, "annotations": annotations},
        "spec": {},
    }


def test_a_gang_is_owned_by_one_shard_and_gangs_spread() -> None:
    """docs/shards.md#gangs: every pod of a gang has one owner, and gangs still spread over members."""
    members = ["a", "b", "c"]
    owners_by_gang = {}
    for g in range(60):
        keys = {partition_key(gang_pod(f"{g}-{i}", f"job-{g}")) for i in range(8)}
        assert keys == {f"gang/ns/job-{g}"}
        owners_by_gang[g] = owner(keys.pop(), members)
    assert set(owners_by_gang.values()) == set(members)
    assert partition_key(pod("u1")) == "u1"  # not a gang: the UID
    assert partition_key({"metadata": {"annotations": {"gang.scheduling.koordinator.sh/name": "x"}}}) == ""


def test_a_gang_group_hashes_its_smallest_gang_id() -> None:
    groups = '["ns/worker","ns/ps"]'
    ps, worker = gang_pod("1", "ps", groups=groups), gang_pod("2", "worker", groups=groups)
    assert partition_key(ps) == partition_key(worker) == "gang/ns/ps"
    assert partition_key(gang_pod("3", "worker", groups="not json")) == "gang/ns/worker"
    # The gang cache's answer (it also knows groups declared on PodGroups) wins when it has one.
    crd = {"metadata": {"name": "w", "namespace": "ns", "uid": "9", "labels": {LABEL_POD_GROUP: "worker"}}}
    assert partition_key(crd) == "gang/ns/worker"
    assert partition_key(crd, lambda p: "ns/ps") == "gang/ns/ps"
    assert partition_key(crd, lambda p: None) == "gang/ns/worker"
    gate = ShardGate("a", ["a", "b", "c", "d"])
    gate.group_of = lambda p: "ns/ps"
    assert gate.admits(crd) == (owner("gang/ns/ps", gate.members) == "a")
