"""The NodeNUMAResource plugin (docs/rules/scheduler-nodenumaresource.md#wiring): args, Reserve / Unreserve /
PreBind annotations, assigned-pod and topology events, the vectorised Filter and Score (the fast path, and
agreement with the per-node rules on random clusters)."""

from __future__ import annotations

import json
from typing import Any, cast

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apis.kubeobjects import Pod
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterResult
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code
from scheduler.plugins.nodenumaresource import plugin as plugin_module
from scheduler.plugins.nodenumaresource.filtering import filter_node
from scheduler.plugins.nodenumaresource.plugin import NodeNUMAResource
from tests.oracles.nodenumaresource import oracle_filter, oracle_score
from tests.unit.scheduler.plugins.nodenumaresource._score_oracle import score_node
from tests.unit.scheduler.plugins.nodenumaresource._support import node, nrt, pod, status_annotation

SPEC = "scheduling.koordinator.sh/resource-spec"
STATUS = "scheduling.koordinator.sh/resource-status"
FULL_ONLY = {"node.koordinator.sh/cpu-bind-policy": "FullPCPUsOnly"}
RATIO = "node.koordinator.sh/resource-amplification-ratio"


def cycle(
    p: NodeNUMAResource, the_pod: Pod, nodes: list[dict[str, Any]], pods: list[Pod] | None = None
) -> tuple[CycleState, Snapshot]:
    snap = Snapshot.build(nodes, pods or [])
    state = CycleState(0)
    p.pre_filter(state, the_pod, snap)
    return state, snap


# --- args ----------------------------------------------------------------------------------------------
def test_defaults() -> None:
    p = NodeNUMAResource.from_args(None)
    assert (p.default_bind_policy, p.scoring.type, p.scoring.resources) == (
        "FullPCPUs",
        "LeastAllocated",
        (("cpu", 1), ("memory", 1)),
    )
    assert p.default_strategy == "LeastAllocated"
    assert (
        NodeNUMAResource.from_args({"numaScoringStrategy": {"type": "MostAllocated"}}).default_strategy
        == "MostAllocated"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"defaultCPUBindPolicy": "Tight"}, "defaultCPUBindPolicy='Tight'"),
        ({"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
         "scoringStrategy.type='RequestedToCapacityRatio'"),
        ({"numaScoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 0}]}},
         r"numaScoringStrategy.resources\[0\].weight=0"),
        ({"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 101}]}},
         "weight=101"),
        ({"bindPolicy": "x"}, "bindPolicy='x': unknown field"),
    ],
)  # fmt: skip
def test_bad_args_are_named(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        NodeNUMAResource.from_args(args)


# --- Reserve / Unreserve / PreBind ----------------------------------------------------------------------
def test_reserve_prebind_writes_status_and_preferred_spec() -> None:
    p = NodeNUMAResource.from_args({})
    p.on_topology("n1", nrt())
    the_pod = pod()
    state, snap = cycle(p, the_pod, [node()])
    assert p.filter_all(state, the_pod, snap).passed.all()
    assert p.reserve(state, the_pod, "n1").is_success()
    assert p.cache.allocations["n1"].pods["uid-p"].cpus == frozenset(range(4))
    old = the_pod["metadata"].get("annotations")
    assert p.pre_bind(state, the_pod, "n1").is_success()
    ann = the_pod["metadata"]["annotations"]
    assert ann is not old
    assert ann[STATUS] == '{"cpuset":"0-3"}'
    assert ann[SPEC] == '{"preferredCPUBindPolicy":"FullPCPUs"}'


def test_prebind_on_a_full_pcpus_only_node_writes_the_required_policy() -> None:
    p = NodeNUMAResource.from_args({})
    p.on_topology("n1", nrt())
    the_pod = pod(annotations={SPEC: json.dumps({"preferredCPUExclusivePolicy": "PCPULevel"})})
    state, _ = cycle(p, the_pod, [node(labels=FULL_ONLY)])
    assert p.reserve(state, the_pod, "n1").is_success()
    p.pre_bind(state, the_pod, "n1")
    spec = the_pod["metadata"]["annotations"][SPEC]
    assert spec == '{"requiredCPUBindPolicy":"FullPCPUs","preferredCPUExclusivePolicy":"PCPULevel"}'


def test_prebind_keeps_a_complete_spec() -> None:
    p = NodeNUMAResource.from_args({})
    p.on_topology("n1", nrt())
    text = json.dumps({"preferredCPUBindPolicy": "SpreadByPCPUs"})
    the_pod = pod(annotations={SPEC: text})
    state, _ = cycle(p, the_pod, [node()])
    p.reserve(state, the_pod, "n1")
    p.pre_bind(state, the_pod, "n1")
    assert the_pod["metadata"]["annotations"][SPEC] == text
    assert the_pod["metadata"]["annotations"][STATUS] == '{"cpuset":"0,2,4,6"}'


def test_unreserve_releases_and_a_failed_reserve_is_unschedulable() -> None:
    p = NodeNUMAResource.from_args({})
    p.on_topology("n1", nrt(sockets=1, cores_per_node=2))  # 4 CPUs
    first = pod("a", cpu="4")
    state, _ = cycle(p, first, [node()])
    assert p.reserve(state, first, "n1").is_success()
    second = pod("b", cpu="2")
    state2, _ = cycle(p, second, [node()])
    st = p.reserve(state2, second, "n1")
    assert (st.code, st.reasons) == (Code.UNSCHEDULABLE, ("not enough cpus available to satisfy request",))
    p.unreserve(state, first, "n1")
    assert p.cache.allocations["n1"].cpus == {}
    assert p.reserve(state2, second, "n1").is_success()


def test_a_pod_that_does_not_bind_gets_no_allocation() -> None:
    p = NodeNUMAResource.from_args({})
    p.on_topology("n1", nrt())
    the_pod = pod(qos="LS")
    state, _ = cycle(p, the_pod, [node()])
    assert p.reserve(state, the_pod, "n1").is_success()
    assert p.pre_bind(state, the_pod, "n1").is_success()
    assert "annotations" not in the_pod["metadata"]


# --- events ---------------------------------------------------------------------------------------------
def test_assigned_pods_become_allocations_and_assumed_ones_count_once() -> None:
    p = NodeNUMAResource.from_args({})
    p.on_topology("n1", nrt())
    the_pod = pod()
    state, _ = cycle(p, the_pod, [node()])
    p.reserve(state, the_pod, "n1")
    p.pre_bind(state, the_pod, "n1")
    bound = cast(Pod, {**the_pod, "spec": {**the_pod["spec"], "nodeName": "n1"}})
    p.on_pod_add(bound)
    alloc = p.cache.allocations["n1"]
    assert {c: r.ref_count for c, r in alloc.cpus.items()} == dict.fromkeys(range(4), 1)
    other = pod("o", node_name="n1", annotations=status_annotation("8-9"))
    p.on_pod_add(other)
    assert set(alloc.cpus) == {0, 1, 2, 3, 8, 9}
    p.on_pod_update(other, cast(Pod, {**other, "status": {"phase": "Succeeded"}}))
    assert set(alloc.cpus) == {0, 1, 2, 3}
    p.on_pod_delete(bound)
    assert alloc.cpus == {}


def test_unreadable_annotations_change_nothing_and_a_lost_node_releases() -> None:
    p = NodeNUMAResource.from_args({})
    a = pod("a", node_name="n1", annotations=status_annotation("0-1"))
    p.on_pod_add(a)
    broken = pod("a", node_name="n1", annotations={STATUS: "{"})
    p.on_pod_update(a, broken)
    assert set(p.cache.allocations["n1"].cpus) == {0, 1}
    p.on_pod_update(broken, pod("a"))
    assert p.cache.allocations["n1"].cpus == {}


def test_topology_events() -> None:
    p = NodeNUMAResource.from_args({})
    p.on_topology("n1", nrt(kubelet={"policy": "static", "options": {"full-pcpus-only": "true"}}))
    assert "n1" in p.cache.forcing and "n1" in p.cache.valid
    p.cache.options["n1"].max_ref_count = 2
    p.on_topology("n1", nrt())
    assert "n1" not in p.cache.forcing and p.cache.options["n1"].max_ref_count == 2
    p.on_topology("n1", None)
    assert "n1" not in p.cache.options and "n1" not in p.cache.valid


# --- fast path ------------------------------------------------------------------------------------------
def test_a_pod_that_binds_nothing_on_plain_nodes_costs_no_per_node_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    p = NodeNUMAResource.from_args({})
    for i in range(3):
        p.on_topology(f"n{i}", nrt(f"n{i}"))
    nodes = [node(f"n{i}") for i in range(3)]
    the_pod = pod(qos="LS", cpu="4", memory="16Gi")
    state, snap = cycle(p, the_pod, nodes, [pod("x", qos="LS", cpu="4", memory="16Gi", node_name="n1")])

    def boom(*a: object) -> None:
        raise AssertionError("per-node work")

    monkeypatch.setattr(plugin_module, "filter_node", boom)
    monkeypatch.setattr(plugin_module.NodeNUMAResource, "facts", boom)
    res = p.filter_all(state, the_pod, snap)
    assert res.which is FilterResult.all_pass(3).which
    scores = p.score_all(state, the_pod, snap, np.arange(3))
    # n1: cpu (16000-8000)*100/16000 = 50, memory (64Gi-32Gi)*100/64Gi = 50 -> 50; others 75
    assert [int(scores[snap.index[f"n{i}"]]) for i in range(3)] == [75, 50, 75]


def test_score_binding_pod_without_topology_and_amplified_cpus() -> None:
    p = NodeNUMAResource.from_args({})
    p.on_topology("n1", nrt("n1"))
    nodes = [node("n0"), node("n1", annotations={RATIO: '{"cpu": 2}'})]
    held = pod("h", cpu="4", node_name="n1", annotations=status_annotation("0-3"))
    p.on_pod_add(held)
    lse = pod(cpu="4")
    state, snap = cycle(p, lse, nodes, [held])
    scores = p.score_all(state, lse, snap, np.arange(2))
    # n0: no topology for a binding pod -> 0. n1: requested 4000 - 4000 + 8000 = 8000, pod 4000*2 = 8000:
    # cpu (16000-16000)*100/16000 = 0, memory 100 -> (0+100)/2 = 50
    assert (int(scores[snap.index["n0"]]), int(scores[snap.index["n1"]])) == (0, 50)
    ls = pod("l", qos="LS", cpu="4")
    state, snap = cycle(p, ls, nodes, [held])
    scores = p.score_all(state, ls, snap, np.arange(2))
    # n0: cpu (16000-4000)*100/16000 = 75, memory 100 -> 87. n1: 8000 + 4000 (not amplified) -> 25, 100 -> 62
    assert (int(scores[snap.index["n0"]]), int(scores[snap.index["n1"]])) == (87, 62)


def test_the_memoised_trial_follows_allocation_and_topology_changes() -> None:
    p = NodeNUMAResource.from_args({})
    p.on_topology("n1", nrt(sockets=1, cores_per_node=2))  # 4 CPUs
    the_pod = pod(cpu="4", annotations={SPEC: '{"requiredCPUBindPolicy":"FullPCPUs"}'})
    state, snap = cycle(p, the_pod, [node()])
    assert p.filter_all(state, the_pod, snap).passed.all()
    p.on_pod_add(pod("h", node_name="n1", annotations=status_annotation("0-1")))
    state, snap = cycle(p, the_pod, [node()])
    assert p.filter_all(state, the_pod, snap).status_of(0).reasons == (
        "not enough cpus available to satisfy request",
    )
    p.on_topology("n1", nrt(sockets=1, cores_per_node=4))  # 8 CPUs
    state, snap = cycle(p, the_pod, [node()])
    assert p.filter_all(state, the_pod, snap).passed.all()


def test_preemption_frees_the_victims_cpus_on_a_cloned_state() -> None:
    p = NodeNUMAResource.from_args({})
    p.on_topology("n1", nrt(sockets=1, cores_per_node=2))  # 4 CPUs
    victim = pod("v", qos="LS", node_name="n1", annotations=status_annotation("0-3"))
    p.on_pod_add(victim)
    preemptor = pod(cpu="4", annotations={SPEC: '{"requiredCPUBindPolicy":"FullPCPUs"}'})
    state, snap = cycle(p, preemptor, [node()], [victim])
    assert not p.filter_all(state, preemptor, snap).passed.any()
    what_if = state.clone()
    info = snap.infos[0].copy()
    info.remove_pod("default/v", info.generation + 1)
    assert p.remove_pod(what_if, preemptor, victim, info).is_success()
    one = Snapshot([info])
    assert p.filter_all(what_if, preemptor, one).passed.all()
    assert not p.filter_all(state, preemptor, snap).passed.any()  # the original state is untouched
    assert p.add_pod(what_if, preemptor, victim, info).is_success()
    assert not p.filter_all(what_if, preemptor, one).passed.any()


# --- vectorised forms agree with the per-node rules ------------------------------------------------------
LABELS = st.sampled_from([{}, FULL_ONLY, {"node.koordinator.sh/cpu-bind-policy": "SpreadByPCPUs"},
                          {"node.koordinator.sh/numa-topology-policy": "BestEffort"}])  # fmt: skip
ANNOTATIONS = st.sampled_from(
    [
        {},
        {RATIO: '{"cpu": 1.5}'},
        {RATIO: "bad"},
        {RATIO: '{"cpu": 1}'},
        {RATIO: '{"memory": 2}'},
        {RATIO: "null"},
    ]
)
NRTS = ("none", "valid", "kubelet", "empty", "policy")
PODS = st.sampled_from([
    pod("q", qos="LS", cpu="3"), pod("q", qos="LS", cpu="1.5"), pod("q", qos="LSE", cpu="4"),
    pod("q", qos="LSE", cpu="3", annotations={SPEC: '{"requiredCPUBindPolicy":"FullPCPUs"}'}),
    pod("q", qos="LSE", cpu="4", annotations={SPEC: '{"requiredCPUBindPolicy":"FullPCPUs"}'}),
    pod("q", qos="LSR", cpu="2", annotations={SPEC: '{"requiredCPUBindPolicy":"SpreadByPCPUs"}'}),
    pod("q", qos="BE", cpu=None, memory="1Gi"), pod("q", qos="LS", cpu=None, memory=None),
    pod("q", qos="LS", cpu="2", annotations={"scheduling.koordinator.sh/numa-topology-spec":
                                               '{"numaTopologyPolicy":"Restricted"}'}),
    pod("q", qos="LSR", cpu="2", memory="2Gi"),
])  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(LABELS, ANNOTATIONS, st.sampled_from(NRTS), st.integers(0, 16)), min_size=1, max_size=5
    ),
    PODS,
)
def test_filter_all_and_score_all_equal_the_per_node_rules(
    shape: list[tuple[dict[str, str], dict[str, str], str, int]], the_pod: Pod
) -> None:
    p = NodeNUMAResource.from_args({})
    nodes: list[dict[str, Any]] = []
    pods: list[Pod] = []
    for i, (labels, node_annotations, has_nrt, held) in enumerate(shape):
        nodes.append(node(f"n{i}", labels, node_annotations))
        if has_nrt == "valid":
            p.on_topology(f"n{i}", nrt(f"n{i}"))
        elif has_nrt == "kubelet":
            p.on_topology(
                f"n{i}", nrt(f"n{i}", kubelet={"policy": "static", "options": {"full-pcpus-only": "true"}})
            )
        elif has_nrt == "empty":
            p.on_topology(f"n{i}", {"metadata": {"name": f"n{i}"}})
        elif has_nrt == "policy":
            p.on_topology(f"n{i}", {**nrt(f"n{i}"), "topologyPolicies": ["SingleNUMANodePodLevel"]})
        if held:
            pods.append(
                pod(f"h{i}", cpu=str(held), node_name=f"n{i}", annotations=status_annotation(f"0-{held - 1}"))
            )
    for q in pods:
        p.on_pod_add(q)
    state, snap = cycle(p, the_pod, nodes, pods)
    res = p.filter_all(state, the_pod, snap)
    scores = p.score_all(state, the_pod, snap, np.arange(snap.n))
    st_ = p.pod_state(state, the_pod)
    for i in range(snap.n):
        facts = p.facts(snap, i)
        assert res.status_of(i) == filter_node(st_, facts, p.default_strategy)
        info = snap.infos[i]
        assert int(scores[i]) == score_node(st_, facts, p.scoring, info.requested, info.allocatable)
        assert res.status_of(i) == oracle_filter(p, the_pod, snap, i)
        assert int(scores[i]) == oracle_score(p, the_pod, snap, i)
