"""Property: under random realistic sequences of pod events and scheduling calls (add, update, bind by
informer, Permit, Unreserve, PostBind, delete) the gang cache equals the oracle of
tests/oracles/coscheduling.py: children/pending/waitingForBind/bound partition each gang's pods as the
pods' states say, gangs and group infos live exactly while they have pods, and a group is satisfied once
exactly when one of its pods bound since its group info was created. Every min is valid, so each gang
joins its group when first seen (the group-info quirk of an unparsable min is a unit test in
test_plugin.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.pod import pod_key
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Pod
from scheduler.plugins.coscheduling.plugin import Coscheduling
from tests.oracles.coscheduling import ABSENT, BOUND, PENDING, WAITING, GangCacheOracle

from ._support import gang_pod

STATE = CycleState(0.0)
GROUP_AB = '["default/a","default/b"]'
GANGS = {"a": GROUP_AB, "b": GROUP_AB, "c": ""}
PODS = [(gang, f"{gang}-{i}") for gang in GANGS for i in range(3)]
OPS = ("add", "update", "addBound", "permit", "unreserve", "postBind", "delete")


def _pod(gang: str, name: str, min_available: str, node: str = "") -> Pod:
    groups = GANGS[gang]
    annotations = {"gang.scheduling.koordinator.sh/groups": groups} if groups else None
    return gang_pod(name, gang, min_available, node=node, annotations=annotations)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(OPS), st.integers(0, len(PODS) - 1), st.sampled_from(["0", "1", "2", "3"])),
        max_size=40,
    )
)
def test_gang_cache_matches_the_oracle(ops: list[tuple[str, int, str]]) -> None:
    plugin = Coscheduling()
    oracle = GangCacheOracle(
        gang_of={f"default/{name}": f"default/{gang}" for gang, name in PODS},
        group_of={
            "default/a": "default/a,default/b",
            "default/b": "default/a,default/b",
            "default/c": "default/c",
        },
    )
    for op, index, min_available in ops:
        gang, name = PODS[index]
        pod = _pod(gang, name, min_available)
        key = pod_key(pod)
        state = oracle.state.get(key, ABSENT)
        if op == "add" and state in (ABSENT, PENDING, WAITING):  # an unbound pod never follows its binding
            plugin.on_any_pod_add(pod)
            oracle.add(key, node=False)
        elif op == "update" and state in (PENDING, WAITING):
            plugin.on_any_pod_update(pod, pod)
            oracle.add(key, node=False)
        elif op == "addBound":
            plugin.on_any_pod_update(pod, _pod(gang, name, min_available, node="n1"))
            oracle.add(key, node=True)
        elif op == "permit" and state == PENDING:
            plugin.permit(STATE, pod, "n1")
            oracle.permit(key)
        elif op == "unreserve" and state == WAITING:
            plugin.unreserve(STATE, pod, "n1")
            oracle.unreserve(key)
        elif op == "postBind" and state == WAITING:
            plugin.post_bind(STATE, pod, "n1")
            oracle.post_bind(key)
        elif op == "delete" and state != ABSENT:
            plugin.on_any_pod_delete(pod if state != BOUND else _pod(gang, name, min_available, node="n1"))
            oracle.delete(key)
        _check(plugin, oracle)


def _check(plugin: Coscheduling, oracle: GangCacheOracle) -> None:
    expected = oracle.gangs()
    summaries = plugin.cache.summaries()
    assert sorted(summaries) == sorted(expected)
    for gid, sets in expected.items():
        summary = summaries[gid]
        for name, keys in sets.items():
            assert summary[name] == keys, (gid, name)
        parts = [set(summary[n]) for n in ("pendingChildren", "waitingForBindChildren", "boundChildren")]
        assert sum(map(len, parts)) == len(summary["children"]) and set().union(*parts) == set(
            summary["children"]
        )
        assert summary["onceResourceSatisfied"] == (oracle.group_of[gid] in oracle.satisfied), gid
        gang = plugin.cache.get(gid)
        assert gang is not None and gang.group_info.waiting_gang_ids <= set(gang.gang_group)
    assert set(plugin.cache.groups) == oracle.groups()
