"""NodeNUMAResource's Score (docs/rules/scheduler-nodenumaresource.md#score) in its one production form,
the vectorised ``score_rows``, held to the per-node oracle (_score_oracle) on random columns and on
random clusters with amplified nodes, CPUs held by pods and pods that bind CPUs; and worked examples."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from apis.kubeobjects import Pod
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.nodenumaresource.plugin import NodeNUMAResource
from scheduler.plugins.nodenumaresource.prefilter import PodState
from scheduler.plugins.nodenumaresource.scoring import (
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    ScoreRows,
    ScoringStrategy,
    amplify_rows,
    score_rows,
)
from tests.oracles.nodenumaresource import oracle_score
from tests.unit.scheduler.plugins.nodenumaresource._score_oracle import score_facts, score_node
from tests.unit.scheduler.plugins.nodenumaresource._support import node, nrt, pod, status_annotation

RATIO = "node.koordinator.sh/resource-amplification-ratio"
SPEC = "scheduling.koordinator.sh/resource-spec"
GPU = "nvidia.com/gpu"
RATIOS = [-1.0, 0.0, 1.0, 1.5, 2.25, 1.3333333333333333, 3.7, 1.0000001, math.nan]
STRATEGIES = st.sampled_from(
    [
        ScoringStrategy(),
        ScoringStrategy(MOST_ALLOCATED),
        ScoringStrategy(LEAST_ALLOCATED, (("cpu", 3), ("memory", 1), (GPU, 2))),
        ScoringStrategy(MOST_ALLOCATED, (("cpu", 1), ("ephemeral-storage", 5))),
        ScoringStrategy(LEAST_ALLOCATED, (("memory", 1),)),
        ScoringStrategy(MOST_ALLOCATED, ()),
    ]
)


# --- the formula against the oracle, column by column ----------------------------------------------------
@st.composite
def row(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "ratio": draw(st.sampled_from(RATIOS)),
        "bind": draw(st.booleans()),
        "refused": draw(st.integers(0, 5)) == 0,
        "valid": draw(st.integers(0, 4)) != 0,
        "held": draw(st.integers(-1, 64)),
        "requested": {"cpu": draw(st.integers(0, 70_000)), "memory": draw(st.integers(0, 2**37)),
                      GPU: draw(st.integers(0, 4))},
        "allocatable": {"cpu": draw(st.sampled_from([0, 1000, 16_000, 64_000])),
                        "memory": draw(st.sampled_from([0, 2**30, 2**36])), GPU: draw(st.integers(0, 8))},
    }  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(
    st.lists(row(), min_size=1, max_size=8),
    STRATEGIES,
    st.sampled_from([0, 500, 1000, 3000, 4000, 48_000]),
    st.sampled_from([0, 2**20, 2**33]),
    st.sampled_from([0, 1]),
    st.booleans(),
)
def test_score_rows_equals_the_per_node_oracle(
    rows: list[dict[str, Any]], strategy: ScoringStrategy, cpu: int, memory: int, gpu: int, skip: bool
) -> None:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory), (GPU, gpu)) if v}
    state = PodState(skip=skip or not requests, requests=requests)
    names = ("cpu", "memory", GPU)
    got = score_rows(
        strategy,
        state,
        {r: np.array([x["requested"][r] for x in rows], np.int64) for r in names},
        {r: np.array([x["allocatable"][r] for x in rows], np.int64) for r in names},
        ScoreRows(
            np.array([x["ratio"] for x in rows], np.float64),
            np.array([x["bind"] for x in rows], np.bool_),
            np.array([x["refused"] for x in rows], np.bool_),
            np.array([x["valid"] for x in rows], np.bool_),
            np.array([x["held"] for x in rows], np.int64),
        ),
    )
    want = [
        score_facts(strategy, state, x["requested"], x["allocatable"], ratio=x["ratio"], bind=x["bind"],
                    refused=x["refused"], valid=x["valid"], held=None if x["held"] < 0 else x["held"])
        for x in rows
    ]  # fmt: skip
    assert got.tolist() == want


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 2**45), min_size=1, max_size=20),
    st.lists(st.one_of(st.sampled_from(RATIOS), st.floats(1.0, 64.0)), min_size=20, max_size=20),
)
def test_amplify_rows_is_the_float64_ceiling(origins: list[int], ratios: list[float]) -> None:
    ratio = np.array(ratios[: len(origins)], np.float64)
    got = amplify_rows(np.array(origins, np.int64), ratio).tolist()
    assert got == [
        o if not r > 1 else math.ceil(float(o) * r) for o, r in zip(origins, ratio.tolist(), strict=True)
    ]


def test_amplify_rows_saturates_instead_of_wrapping() -> None:
    got = amplify_rows(np.array([2**62, 10], np.int64), np.array([4.0, 1e300]))
    assert got.tolist() == [2**62, 2**62]


# --- the plugin against the oracles on random clusters --------------------------------------------------
LABELS = st.sampled_from([{}, {"node.koordinator.sh/cpu-bind-policy": "FullPCPUsOnly"},
                          {"node.koordinator.sh/cpu-bind-policy": "SpreadByPCPUs"}])  # fmt: skip
ANNOTATIONS = st.sampled_from(
    [{}, {RATIO: "bad"}, {RATIO: '{"memory": 2}'}, {RATIO: "null"}, {RATIO: '{"cpu": null}'}]
    + [{RATIO: f'{{"cpu": {r}}}'} for r in ("1", "1.5", "2.25", "1.3333333333333333", "3.7", "0.5")]
)
PODS = st.sampled_from([
    pod("q", qos="LS", cpu="3"), pod("q", qos="LS", cpu="1.5"), pod("q", qos="LSE", cpu="4"),
    pod("q", qos="LSE", cpu="2", memory="8Gi", annotations={SPEC: '{"requiredCPUBindPolicy":"FullPCPUs"}'}),
    pod("q", qos="LSR", cpu="2", annotations={SPEC: '{"requiredCPUBindPolicy":"SpreadByPCPUs"}'}),
    pod("q", qos="LSR", cpu="6", memory="2Gi"), pod("q", qos="BE", cpu=None, memory="1Gi"),
    pod("q", qos="LS", cpu=None, memory=None), pod("q", qos="LSE", cpu="0.5"),
])  # fmt: skip
NRTS = st.sampled_from(["none", "valid", "kubelet", "empty"])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(LABELS, ANNOTATIONS, NRTS, st.integers(0, 16), st.sampled_from([None, "1", "2.5", "12"])),
        min_size=1,
        max_size=6,
    ),
    PODS,
    st.sampled_from([None, {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 2},
                                                                   {"name": "memory", "weight": 1}]},
                     {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 7}]}]),
)  # fmt: skip
def test_score_all_equals_the_per_node_oracles(
    shape: list[tuple[dict[str, str], dict[str, str], str, int, str | None]],
    the_pod: Pod,
    scoring: dict[str, Any] | None,
) -> None:
    p = NodeNUMAResource.from_args({"scoringStrategy": scoring})
    nodes: list[dict[str, Any]] = []
    pods: list[Pod] = []
    for i, (labels, node_annotations, has_nrt, held, cpu) in enumerate(shape):
        name = f"n{i}"
        nodes.append(node(name, labels, node_annotations))
        if has_nrt == "valid":
            p.on_topology(name, nrt(name))
        elif has_nrt == "kubelet":
            p.on_topology(
                name, nrt(name, kubelet={"policy": "static", "options": {"full-pcpus-only": "true"}})
            )
        elif has_nrt == "empty":
            p.on_topology(name, {"metadata": {"name": name}})
        if held:  # CPUs held, and a cpu request that need not match them
            pods.append(pod(f"h{i}", cpu=cpu, node_name=name, annotations=status_annotation(f"0-{held - 1}")))
        elif cpu is not None:
            pods.append(pod(f"r{i}", qos="LS", cpu=cpu, node_name=name))
    for q in pods:
        p.on_pod_add(q)
    snap = Snapshot.build(nodes, pods)
    state = CycleState(0)
    p.pre_filter(state, the_pod, snap)
    scores = p.score_all(state, the_pod, snap, np.arange(snap.n))
    st_ = p.pod_state(state, the_pod)
    for i in range(snap.n):
        info = snap.infos[i]
        assert int(scores[i]) == score_node(
            st_, p.facts(snap, i), p.scoring, info.requested, info.allocatable
        )
        assert int(scores[i]) == oracle_score(p, the_pod, snap, i)


# --- worked by hand -------------------------------------------------------------------------------------
def _scores(p: NodeNUMAResource, the_pod: Pod, nodes: list[dict[str, Any]], pods: list[Pod]) -> list[int]:
    snap = Snapshot.build(nodes, pods)
    state = CycleState(0)
    p.pre_filter(state, the_pod, snap)
    return [int(s) for s in p.score_all(state, the_pod, snap, np.arange(snap.n))]


def test_most_allocated_with_fewer_cpus_requested_than_held() -> None:
    most = {
        "type": "MostAllocated",
        "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
    }
    p = NodeNUMAResource.from_args({"scoringStrategy": most})
    p.on_topology("n1", nrt("n1"))
    held = pod("h", qos="LS", cpu="2", node_name="n1", annotations=status_annotation("0-3"))
    p.on_pod_add(held)
    nodes = [node("n1", annotations={RATIO: '{"cpu": 1.5}'})]
    # requested cpu 2000 - 4000 + ceil(4000 × 1.5) = 4000; an LS pod adds 3000: 7000 of 16000 →
    # 700000 // 16000 = 43; memory 0 of 64Gi → 0; (43 + 0) // 2 = 21
    assert _scores(p, pod("l", qos="LS", cpu="3"), nodes, [held]) == [21]
    # an LSE pod binds: its 4000 counts ceil(4000 × 1.5) = 6000 → 10000 → 1000000 // 16000 = 62; → 31
    assert _scores(p, pod("e", qos="LSE", cpu="4"), nodes, [held]) == [31]


def test_a_ratio_out_of_float64_range_does_not_decode() -> None:
    """Go's decoder refuses 1e999 (Python's reads infinity): the annotation is bad, whichever resource."""
    p = NodeNUMAResource.from_args({})
    nodes = [node("n0"), node("n1", annotations={RATIO: '{"cpu": 1e999}'}),
             node("n2", annotations={RATIO: '{"memory": 1e999}'})]  # fmt: skip
    ls = pod("l", qos="LS", cpu="4")
    # n0: cpu (16000 - 4000) × 100 // 16000 = 75, memory 100 → 87
    assert _scores(p, ls, nodes, []) == [87, 0, 0]
    snap = Snapshot.build(nodes, [])
    state = CycleState(0)
    p.pre_filter(state, ls, snap)
    res = p.filter_all(state, ls, snap)
    assert [res.status_of(i).reasons for i in (1, 2)] == [("node(s) invalid CPU amplification ratio",)] * 2
