"""The resource-allocation scores of kube-scheduler v1.20 (NodeResourcesLeastAllocated,
NodeResourcesMostAllocated, RequestedToCapacityRatio, NodeResourcesBalancedAllocation) and
NodeResourcesFit's scoringStrategy: worked values of each rule, args defaults and validation messages,
and a property test against the oracles (tests/oracles/noderesources_scores.py), also after rows
change or are added."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.balancedallocation import NodeResourcesBalancedAllocation
from scheduler.plugins.noderesources import NodeResourcesFit
from scheduler.plugins.noderesources_allocated import (
    NodeResourcesLeastAllocated,
    NodeResourcesMostAllocated,
    RequestedToCapacityRatio,
)
from scheduler.plugins.noderesources_args import Strategy
from scheduler.plugins.noderesources_scoring import broken_linear, go_round

from ._oracle_checks import check_filter, check_scores
from ._support import (
    RESOURCE_NAMES,
    add_nodes,
    add_pods,
    bound_pod,
    draw_rows,
    make_node,
    make_pod,
    request_lists,
    resource_clusters,
)

GPU = "example.com/gpu"
LINEAR = {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}


def node(name: str = "n", **alloc: str) -> dict[str, Any]:
    """4 cpu, 8Gi, 110 pods, changed by `alloc` (pass other names as ``**{name: value}``)."""
    return make_node(name, allocatable={"cpu": "4", "memory": "8Gi", "pods": "110", **alloc})


def score(
    plugin: Any, pod: dict[str, Any], the_node: dict[str, Any], existing: list[dict[str, str]] | None = None
) -> int:
    pods = [make_pod(f"e{i}", node="n", requests=[r]) for i, r in enumerate(existing or [])]
    return check_scores(plugin, pod, Snapshot.build([the_node], pods))[0]


def req(**r: str) -> dict[str, Any]:
    """A one-container pod requesting `r` (other names as ``**{name: value}``)."""
    return make_pod(requests=[r])


# --- LeastAllocated / MostAllocated -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "pod", "want"),
    [
        ({}, req(cpu="2", memory="1Gi"), 68),  # cpu 2000*100/4000 = 50, memory 7*100/8 = 87; 137/2
        (
            {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 3}]},
            req(cpu="2", memory="1Gi"),
            77,
        ),
        # a repeated name keeps its last weight (kube's map): cpu 3, memory 1 -> (150 + 87) / 4
        (
            {
                "resources": [
                    {"name": "cpu", "weight": 1},
                    {"name": "memory", "weight": 1},
                    {"name": "cpu", "weight": 3},
                ]
            },
            req(cpu="2", memory="1Gi"),
            59,
        ),
        # an extended resource: requested by the node's pods plus the pod's (2 of 4) -> 50
        ({"resources": [{"name": GPU, "weight": 2}]}, req(cpu="0", memory="0", **{GPU: "1"}), 50),
        # a resource the node lacks scores 0 and still counts its weight: (50 + 87 + 0) / 3
        (
            {
                "resources": [
                    {"name": "cpu", "weight": 1},
                    {"name": "memory", "weight": 1},
                    {"name": "vendor.io/x", "weight": 1},
                ]
            },
            req(cpu="2", memory="1Gi"),
            45,
        ),
        # "pods" is neither cpu, memory, ephemeral-storage nor scalar: 0 of 0 -> 0, weight counted
        (
            {"resources": [{"name": "cpu", "weight": 1}, {"name": "pods", "weight": 1}]},
            req(cpu="2", memory="1Gi"),
            25,
        ),
    ],
)
def test_least_allocated(args: dict[str, Any], pod: dict[str, Any], want: int) -> None:
    the_node = node(**{GPU: "4"})
    assert (
        score(
            NodeResourcesLeastAllocated.from_args(args),
            pod,
            the_node,
            [{GPU: "1", "cpu": "0", "memory": "0"}],
        )
        == want
    )


@pytest.mark.parametrize(
    ("args", "pod", "want"),
    [
        ({}, req(cpu="2", memory="1Gi"), 31),  # cpu 50, memory 100*1/8 = 12
        (
            {"resources": [{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}]},
            req(cpu="2", memory="1Gi"),
            40,
        ),
        ({}, req(cpu="5", memory="1Gi"), 6),  # cpu over allocatable scores 0: (0 + 12) / 2
    ],
)
def test_most_allocated(args: dict[str, Any], pod: dict[str, Any], want: int) -> None:
    assert score(NodeResourcesMostAllocated.from_args(args), pod, node()) == want


def test_most_allocated_non_zero_defaults() -> None:
    # cpu 100m of 4000m: 100*100/4000 = 2; memory 200Mi of 8Gi: 200*100/8192 = 2; (2 + 2) / 2
    assert score(NodeResourcesMostAllocated(), make_pod(requests=[None]), node()) == 2


# --- RequestedToCapacityRatio -------------------------------------------------------------------------
def test_requested_to_capacity_ratio_linear_shape_rounds_half_away_from_zero() -> None:
    # cpu: 100 - 2000*100/4000 = 50 -> 50; memory: 100 - 7*100/8 = 13 -> 13; round(63 / 2) = 32
    plugin = RequestedToCapacityRatio.from_args(LINEAR)
    assert score(plugin, req(cpu="2", memory="1Gi"), node()) == 32


def test_requested_to_capacity_ratio_utilization_is_100_minus_the_truncated_free_share() -> None:
    # gpu 1 of 3: 100 - (2*100/3 = 66) = 34, not 1*100/3 = 33
    plugin = RequestedToCapacityRatio.from_args({**LINEAR, "resources": [{"name": GPU, "weight": 1}]})
    assert score(plugin, req(cpu="0", memory="0", **{GPU: "1"}), node(**{GPU: "3"})) == 34


def test_requested_to_capacity_ratio_skips_resources_scoring_zero() -> None:
    # decreasing shape: score = 100 - utilization; cpu over capacity -> f(100) = 0 is left out of the
    # mean, memory 1Gi of 8Gi -> 100 - 13 = 87
    shape = {"shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]}
    plugin = RequestedToCapacityRatio.from_args(shape)
    assert score(plugin, req(cpu="5", memory="1Gi"), node()) == 87
    assert score(plugin, req(cpu="5", memory="9Gi"), node()) == 0  # no weight left


def test_requested_to_capacity_ratio_weights_and_steps() -> None:
    shape = [
        {"utilization": 20, "score": 2},
        {"utilization": 50, "score": 8},
        {"utilization": 80, "score": 10},
    ]
    plugin = RequestedToCapacityRatio.from_args(
        {"shape": shape, "resources": [{"name": "cpu", "weight": 3}, {"name": "memory", "weight": 1}]}
    )
    # cpu 1 of 4: p = 100 - 75 = 25 -> 20 + (80-20)*(25-20)/(50-20) = 30; memory 1Gi of 8Gi: p = 13
    # -> the first point's score, 20; round((90 + 20) / 4 = 27.5) = 28
    assert score(plugin, req(cpu="1", memory="1Gi"), node()) == 28


def test_broken_linear_truncates_toward_zero() -> None:
    shape = ((0, 100), (30, 0))
    p = np.array([-5, 0, 1, 29, 30, 31, 100], np.int64)
    # (0 - 100) * 1 / 30 = -3.33 -> -3: 97, not 96
    assert broken_linear(shape, p).tolist() == [100, 100, 97, 4, 0, 0, 0]


def test_go_round() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999999999999994, 2.4999999999999996, 3.0])
    assert go_round(x).tolist() == [1.0, 2.0, 3.0, -1.0, -3.0, 0.0, 2.0, 3.0]


# --- BalancedAllocation -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("existing", "pod", "the_node", "want"),
    [
        ([{"cpu": "1", "memory": "3Gi"}], req(cpu="1", memory="1Gi"), node(), 100),  # 0.5 and 0.5
        ([], req(cpu="3", memory="2Gi"), node(), 50),  # 0.75 and 0.25
        ([], req(cpu="1", memory="0"), node(cpu="3"), 66),  # (1 - 1/3) * 100 = 66.67 -> 66
        ([], req(cpu="4", memory="0"), node(), 0),  # a fraction of 1
        ([{"cpu": "3"}], req(cpu="2", memory="0"), node(), 0),  # above 1
        ([], req(cpu="1", memory="0"), node(memory="0"), 0),  # no memory: fraction 1
        # non-zero defaults: cpu 200m of 4000 = 0.05, memory 400Mi of 8Gi = 0.0488 -> 99.88 -> 99
        ([{}], make_pod(requests=[None]), node(), 99),
    ],
)
def test_balanced_allocation(
    existing: list[dict[str, str]], pod: dict[str, Any], the_node: dict[str, Any], want: int
) -> None:
    assert score(NodeResourcesBalancedAllocation(), pod, the_node, existing) == want


# --- args ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("make", "args", "message"),
    [
        (
            NodeResourcesLeastAllocated.from_args,
            {"resources": [{"name": "cpu", "weight": 0}]},
            "resources[0].weight=0: resource Weight of cpu should be a positive value, got 0",
        ),
        (
            NodeResourcesMostAllocated.from_args,
            {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 101}]},
            "resources[1].weight=101: resource Weight of memory should be less than 100, got 101",
        ),
        (
            NodeResourcesLeastAllocated.from_args,
            {"resources": [{"name": "cpu", "weight": "1"}]},
            "resources[0].weight='1': must be an integer",
        ),
        (
            NodeResourcesLeastAllocated.from_args,
            {"resources": {"cpu": 1}},
            "resources={'cpu': 1}: must be a list",
        ),
        (RequestedToCapacityRatio.from_args, {}, "shape=[]: at least one point must be specified"),
        (
            RequestedToCapacityRatio.from_args,
            {"shape": [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]},
            "shape[1].utilization=50: utilization values must be sorted. "
            "Utilization[0]==50 >= Utilization[1]==50",
        ),
        (
            RequestedToCapacityRatio.from_args,
            {"shape": [{"utilization": -1, "score": 1}]},
            "shape[0].utilization=-1: utilization values must not be less than 0. Utilization[0]==-1",
        ),
        (
            RequestedToCapacityRatio.from_args,
            {"shape": [{"utilization": 101, "score": 1}]},
            "shape[0].utilization=101: utilization values must not be greater than 100. Utilization[0]==101",
        ),
        (
            RequestedToCapacityRatio.from_args,
            {"shape": [{"utilization": 1, "score": -1}]},
            "shape[0].score=-1: score values must not be less than 0. Score[0]==-1",
        ),
        (
            RequestedToCapacityRatio.from_args,
            {"shape": [{"utilization": 1, "score": 11}]},
            "shape[0].score=11: score values must not be greater than 10. Score[0]==11",
        ),
        (
            RequestedToCapacityRatio.from_args,
            {**LINEAR, "resources": [{"name": "cpu", "weight": 0}]},
            "resources[0].weight=0: resource cpu weight 0 must not be less than 1",
        ),
        (
            RequestedToCapacityRatio.from_args,
            {"shape": [{"utilization": 2**31, "score": 1}]},
            "shape[0].utilization=2147483648: does not fit the field's integer type",
        ),
        (
            NodeResourcesFit.from_args,
            {"ignoredResources": ["bad name"]},
            "ignoredResources[0]='bad name': must be a valid label name",
        ),
        (
            NodeResourcesFit.from_args,
            {"ignoredResourceGroups": ["example.com/x"]},
            "ignoredResourceGroups[0]='example.com/x': resource group name can't contain '/'",
        ),
        (
            NodeResourcesFit.from_args,
            {"scoringStrategy": {"type": "Most"}},
            'scoringStrategy.type="Most": Unsupported value: "Most": '
            'supported values: "LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"',
        ),
        (
            NodeResourcesFit.from_args,
            {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 101}]}},
            "scoringStrategy.resources[0].weight=101: resource weight of cpu not in valid range (0, 100]",
        ),
        (
            NodeResourcesFit.from_args,
            {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
            "scoringStrategy.requestedToCapacityRatio=null: Required value",
        ),
        (
            NodeResourcesFit.from_args,
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {"shape": []},
                }
            },
            "scoringStrategy.shape: Required value: at least one point must be specified",
        ),
        (
            NodeResourcesFit.from_args,
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {
                        "shape": [{"utilization": 10, "score": 1}, {"utilization": 5, "score": 1}]
                    },
                }
            },
            "scoringStrategy.shape[1].utilization=5: utilization values must be sorted in increasing order",
        ),
        (
            NodeResourcesFit.from_args,
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {"shape": [{"utilization": 10, "score": 11}]},
                }
            },
            "scoringStrategy.shape[0].score=11: not in valid range [0, 10]",
        ),
    ],
)
def test_args_validation(make: Any, args: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as e:
        make(args)
    assert str(e.value).startswith(message)


def test_args_defaults_and_spellings() -> None:
    assert NodeResourcesLeastAllocated.from_args({}).strategy == Strategy(
        "LeastAllocated", (("cpu", 1), ("memory", 1))
    )
    assert NodeResourcesMostAllocated.from_args({"resources": []}).strategy.resources == (
        ("cpu", 1),
        ("memory", 1),
    )
    # Go's JSON keys are case-insensitive: the internal spellings decode too
    rtcr = RequestedToCapacityRatio.from_args(
        {
            "Shape": [{"Utilization": 0, "Score": 1}, {"utilization": 90, "score": 9}],
            "Resources": [{"Name": GPU, "Weight": 5}],
        }
    )
    assert rtcr.strategy == Strategy("RequestedToCapacityRatio", ((GPU, 5),), ((0, 10), (90, 90)))
    fit = NodeResourcesFit.from_args({})
    assert fit.args.strategy == Strategy("LeastAllocated") and not fit.args.ignored_resources
    # later versions: weight 0 defaults to 1, resources default to cpu and memory
    fit = NodeResourcesFit.from_args(
        {
            "scoringStrategy": {
                "type": "MostAllocated",
                "resources": [{"name": "cpu"}, {"name": GPU, "weight": 4}],
            }
        }
    )
    assert fit.args.strategy == Strategy("MostAllocated", (("cpu", 1), (GPU, 4)))
    fit = NodeResourcesFit.from_args(
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 10}]},
            }
        }
    )
    assert fit.args.strategy == Strategy("RequestedToCapacityRatio", (("cpu", 1), ("memory", 1)), ((0, 100),))


def test_fit_scoring_strategy_is_the_separate_plugins_rule() -> None:
    snap = Snapshot.build(
        [node("a"), node("b", cpu="8"), node("c", memory="2Gi")],
        [make_pod("x", node="a", requests=[{"cpu": "1"}])],
    )
    pod = req(cpu="1", memory="1Gi")
    rows = np.arange(3, dtype=np.int64)
    for kind, separate in [
        ("LeastAllocated", NodeResourcesLeastAllocated.from_args({})),
        ("MostAllocated", NodeResourcesMostAllocated.from_args({})),
        ("RequestedToCapacityRatio", RequestedToCapacityRatio.from_args(LINEAR)),
    ]:
        fit = NodeResourcesFit.from_args(
            {"scoringStrategy": {"type": kind, "requestedToCapacityRatio": LINEAR}}
        )
        got = fit.score_all(CycleState(0), pod, snap, rows).tolist()
        assert (
            got == separate.score_all(CycleState(0), pod, snap, rows).tolist() == check_scores(fit, pod, snap)
        )
    default = NodeResourcesFit().score_all(CycleState(0), pod, snap, rows).tolist()
    assert default == NodeResourcesLeastAllocated().score_all(CycleState(0), pod, snap, rows).tolist()


# --- property -------------------------------------------------------------------------------------
resource_specs = st.lists(
    st.fixed_dictionaries({"name": st.sampled_from(RESOURCE_NAMES), "weight": st.integers(1, 100)}),
    max_size=4,
)
shapes = st.lists(
    st.tuples(st.integers(0, 100), st.integers(0, 10)), min_size=1, max_size=4, unique_by=lambda p: p[0]
).map(lambda ps: [{"utilization": u, "score": s} for u, s in sorted(ps)])


@st.composite
def plugins(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["least", "most", "ratio", "balanced", "fit"]))
    if kind == "least":
        return NodeResourcesLeastAllocated.from_args({"resources": draw(resource_specs)})
    if kind == "most":
        return NodeResourcesMostAllocated.from_args({"resources": draw(resource_specs)})
    if kind == "ratio":
        return RequestedToCapacityRatio.from_args({"shape": draw(shapes), "resources": draw(resource_specs)})
    if kind == "balanced":
        return NodeResourcesBalancedAllocation()
    strategy = draw(st.sampled_from(["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]))
    return NodeResourcesFit.from_args(
        {
            "ignoredResources": draw(
                st.lists(st.sampled_from([GPU, "kubernetes.io/batch-cpu", "other.io/x"]), max_size=2)
            ),
            "ignoredResourceGroups": draw(
                st.lists(st.sampled_from(["example.com", "kubernetes.io"]), max_size=1)
            ),
            "scoringStrategy": {
                "type": strategy,
                "resources": draw(resource_specs),
                "requestedToCapacityRatio": {"shape": draw(shapes)},
            },
        }
    )


@settings(max_examples=300, deadline=None)
@given(plugins(), resource_clusters(max_nodes=6, max_pods=8), st.lists(request_lists, max_size=3), st.data())
def test_plugins_equal_oracles(
    plugin: Any,
    cluster: tuple[list[dict[str, Any]], list[dict[str, Any]]],
    reqs: list[Any],
    data: st.DataObject,
) -> None:
    nodes, pods = cluster
    snap = Snapshot.build(nodes, pods)
    pod = make_pod(
        requests=reqs, overhead=data.draw(st.sampled_from([None, {"cpu": "250m"}, {GPU: "1"}])) or {}
    )
    if isinstance(plugin, NodeResourcesFit):
        check_filter(plugin, pod, snap)
    check_scores(plugin, pod, snap)
    if nodes:
        more = [bound_pod(data.draw, f"m{k}", len(nodes)) for k in range(data.draw(st.integers(1, 3)))]
        add_pods(snap, more, 7)
        check_scores(plugin, pod, snap, draw_rows(data, len(nodes)))
    add_nodes(snap, [make_node("m", allocatable={"cpu": "2", GPU: "3"})], 8)
    check_scores(plugin, pod, snap)


def test_go_int64_all_is_amd64s_conversion() -> None:
    from scheduler.plugins.noderesources_scoring import go_int64_all

    x = np.array([1.9, -1.9, 2.0**63, -(2.0**63), np.nan, np.inf, -np.inf, 2.0**62])
    assert go_int64_all(x).tolist() == [1, -1, -(2**63), -(2**63), -(2**63), -(2**63), -(2**63), 2**62]
    assert go_int64_all(np.array([99.9, 0.0])).tolist() == [99, 0]


HUGE = ["0", "1", "-3", "100", f"{2**61}m", str(2**62), str(2**63 - 1), str(-(2**62))]


@settings(max_examples=150, deadline=None)
@given(
    plugins(),
    st.lists(st.dictionaries(st.sampled_from(["cpu", "memory", GPU]), st.sampled_from(HUGE)), max_size=4),
    st.lists(
        st.fixed_dictionaries({"cpu": st.sampled_from(HUGE), "memory": st.sampled_from(HUGE)}), max_size=4
    ),
    st.fixed_dictionaries(
        {"cpu": st.sampled_from(HUGE), "memory": st.sampled_from(HUGE), GPU: st.sampled_from(HUGE)}
    ),
)
def test_huge_and_negative_values_match_oracles(
    plugin: Any, allocs: list[dict[str, str]], existing: list[dict[str, str]], request: dict[str, str]
) -> None:
    # one existing single-container pod per node keeps every sum an int64, as the snapshot requires;
    # differences, products and float conversions overflow as Go's do
    nodes = [make_node(f"n{i}", allocatable=a) for i, a in enumerate(allocs)]
    pods = [make_pod(f"e{i}", node=f"n{i}", requests=[r]) for i, r in enumerate(existing[: len(nodes)])]
    check_scores(plugin, make_pod(requests=[request]), Snapshot.build(nodes, pods))
