"""NodeResourcesFit: Filter reasons (Too many pods, Insufficient <resource> in order, extended
resources, zero requests, unchecked names) and the LeastAllocated score with non-zero defaults, in Go's
int64 arithmetic; the plugin equals its oracle (tests/oracles/plugins.py), also after rows change or are
added."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apis.gonum import go_div
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.nonzero import nonzero_requests
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.plugins.noderesources import NodeResourcesFit
from scheduler.plugins.resourcemath import go_div_all, is_checked_resource

from ._support import (
    RESOURCE_NAMES,
    add_nodes,
    add_pods,
    assert_matches_oracle,
    assert_scores_match_oracle,
    bound_pod,
    draw_rows,
    feasible_scores,
    filter_one,
    make_node,
    make_pod,
    request_lists,
    resource_clusters,
)

OK = Status.success()
GI = 1024**3
MI = 1024**2


def unfit(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE, reasons, "NodeResourcesFit")


def node(name: str = "n", extra: dict[str, str] | None = None, **alloc: str) -> dict[str, Any]:
    """4 cpu, 8Gi, 110 pods, changed by `alloc` (underscores read as dashes; "-" drops) and `extra`."""
    base = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    base.update({k.replace("_", "-"): v for k, v in alloc.items()})
    base.update(extra or {})
    return make_node(name, allocatable={k: v for k, v in base.items() if v != "-"})


BATCH_CPU = "kubernetes.io/batch-cpu"
BATCH_MEM = "kubernetes.io/batch-memory"


@pytest.mark.parametrize(
    ("the_node", "existing", "requests", "want"),
    [
        (node(), [], [{"cpu": "1", "memory": "1Gi"}], OK),
        (node(), [], [None], OK),  # no requests at all
        (node(), [], [{"cpu": "4", "memory": "8Gi"}], OK),  # exact fit
        (node(), [], [{"cpu": "4001m"}], unfit("Insufficient cpu")),
        (node(), [], [{"memory": "9Gi"}], unfit("Insufficient memory")),
        (node(), [], [{"memory": "9Gi", "cpu": "5"}], unfit("Insufficient cpu", "Insufficient memory")),
        (node(), [], [{"cpu": "3"}, {"cpu": "1500m"}], unfit("Insufficient cpu")),  # containers summed
        (node(), [{"cpu": "3"}], [{"cpu": "1"}], OK),
        (node(), [{"cpu": "3"}], [{"cpu": "1001m"}], unfit("Insufficient cpu")),
        # kube-scheduler 1.20: cpu, memory and ephemeral-storage are checked for any pod that requests
        # something, so a node already over-requested in cpu rejects a pod that asks for memory only
        (node(), [{"cpu": "6"}], [{"memory": "1Gi"}], unfit("Insufficient cpu")),
        (node(), [{"cpu": "6"}], [{"cpu": "0", "memory": "1Gi"}], unfit("Insufficient cpu")),
        (node(), [{"cpu": "6"}], [None], OK),  # ... but a pod that requests nothing is not checked
        (node(), [{"memory": "9Gi"}], [{"example.com/gpu": "0"}], unfit("Insufficient memory")),
        (node(pods="1"), [None], [None], unfit("Too many pods")),
        (node(pods="1"), [None], [{"cpu": "5"}], unfit("Too many pods", "Insufficient cpu")),
        (node(pods="2"), [None], [None], OK),
        (node(pods="-"), [], [None], unfit("Too many pods")),  # no pods allocatable: none allowed
        (
            node(ephemeral_storage="10Gi"),
            [],
            [{"ephemeral-storage": "11Gi"}],
            unfit("Insufficient ephemeral-storage"),
        ),
        (node(), [], [{"ephemeral-storage": "1"}], unfit("Insufficient ephemeral-storage")),
        (node(extra={BATCH_CPU: "1000"}), [], [{BATCH_CPU: "1000"}], OK),
        (node(extra={BATCH_CPU: "1000"}), [], [{BATCH_CPU: "1001"}], unfit(f"Insufficient {BATCH_CPU}")),
        (
            node(extra={BATCH_CPU: "1000"}),
            [{BATCH_CPU: "600"}],
            [{BATCH_CPU: "600"}],
            unfit(f"Insufficient {BATCH_CPU}"),
        ),
        (node(), [], [{BATCH_MEM: "1"}], unfit(f"Insufficient {BATCH_MEM}")),  # node lacks it: allocatable 0
        (node(), [], [{"example.com/gpu": "1"}], unfit("Insufficient example.com/gpu")),
        (node(), [], [{"example.com/gpu": "0"}], OK),  # zero requests are not checked
        (node(), [], [{"hugepages-2Mi": "2Mi"}], unfit("Insufficient hugepages-2Mi")),
        (node(), [], [{"foo": "1", "pods": "5"}], OK),  # not resources Kubernetes checks
        (
            node(pods="0"),
            [],
            [{"example.com/gpu": "1", BATCH_MEM: "1", "memory": "9Gi", "ephemeral-storage": "1", "cpu": "5"}],
            unfit(
                "Too many pods",
                "Insufficient cpu",
                "Insufficient memory",
                "Insufficient ephemeral-storage",
                "Insufficient example.com/gpu",
                f"Insufficient {BATCH_MEM}",
            ),
        ),
    ],
)
def test_filter(
    the_node: dict[str, Any],
    existing: list[dict[str, str] | None],
    requests: list[dict[str, str] | None],
    want: Status,
) -> None:
    pods = [make_pod(f"e{i}", node="n", requests=[r]) for i, r in enumerate(existing)]
    assert filter_one(NodeResourcesFit(), make_pod(requests=requests), the_node, pods) == want


def test_filter_uses_effective_requests() -> None:
    # init containers are maxed in, overhead added
    pod = make_pod(requests=[{"cpu": "1"}], init_requests=[{"cpu": "3500m"}], overhead={"cpu": "600m"})
    assert filter_one(NodeResourcesFit(), pod, node()) == unfit("Insufficient cpu")
    pod = make_pod(requests=[{"cpu": "1"}], init_requests=[{"cpu": "3400m"}], overhead={"cpu": "600m"})
    assert filter_one(NodeResourcesFit(), pod, node()) == OK


def test_filter_resource_no_node_has_rejects_every_node() -> None:
    snap = Snapshot.build([node("a"), node("b")])
    pod = make_pod(requests=[{"vendor.io/fpga": "1"}])
    assert "vendor.io/fpga" not in snap.col
    assert assert_matches_oracle(NodeResourcesFit(), pod, snap) == [unfit("Insufficient vendor.io/fpga")] * 2


def test_malformed_request_is_an_error() -> None:
    plugin = NodeResourcesFit()
    snap = Snapshot.build([node("a"), node("b")])
    pod = make_pod(requests=[{"cpu": "lots"}])
    st_ = plugin.pre_filter(CycleState(0), pod, snap)
    assert st_.code == Code.ERROR
    res = plugin.filter_all(CycleState(0), pod, snap)
    assert [res.status_of(i).code for i in range(2)] == [Code.ERROR, Code.ERROR]
    assert assert_matches_oracle(plugin, pod, snap) == [res.status_of(0)] * 2


@pytest.mark.parametrize(
    ("name", "checked"),
    [
        ("cpu", True),
        ("memory", True),
        ("ephemeral-storage", True),
        ("pods", False),
        ("foo", False),
        ("hugepages-1Gi", True),
        ("attachable-volumes-aws-ebs", True),
        (BATCH_CPU, True),
        ("example.com/gpu", True),
        ("a/b/c", False),
        ("requests.x/y", False),
        ("Bad_Domain/x", False),
    ],
)
def test_checked_resources(name: str, checked: bool) -> None:
    assert is_checked_resource(name) is checked


# --- score ----------------------------------------------------------------------------------------


def score_one(
    the_node: dict[str, Any], existing: list[list[dict[str, str] | None]], pod: dict[str, Any]
) -> int:
    pods = [make_pod(f"e{i}", node="n", requests=r) for i, r in enumerate(existing)]
    snap = Snapshot.build([the_node], pods)
    return assert_scores_match_oracle(NodeResourcesFit(), pod, snap, [0])[0]


@pytest.mark.parametrize(
    ("the_node", "existing", "pod", "want"),
    [
        # cpu (4000-1100)*100/4000 = 72; memory (8192-1224)Mi*100/8192Mi = 85; (72+85)/2 = 78
        (node(), [[None]], make_pod(requests=[{"cpu": "1", "memory": "1Gi"}]), 78),
        # defaults for the incoming pod: 100m -> 97, 200Mi -> 97
        (node(), [], make_pod(requests=[None]), 97),
        (node(), [], make_pod(requests=[{"cpu": "0", "memory": "0"}]), 100),  # explicit zero stays zero
        (node(), [[{"cpu": "0", "memory": "0"}]], make_pod(requests=[{"cpu": "0", "memory": "0"}]), 100),
        (node(), [[{"cpu": "2", "memory": "4Gi"}]], make_pod(requests=[{"cpu": "2", "memory": "4Gi"}]), 0),
        (node(cpu="0"), [], make_pod(requests=[{"memory": "0"}]), 50),  # allocatable 0 scores 0
        (
            node(cpu="1"),
            [[{"cpu": "2", "memory": "0"}]],
            make_pod(requests=[{"cpu": "0", "memory": "0"}]),
            50,
        ),
        # the node's pods count with their defaults too: memory 200Mi -> 97, cpu over -> 0
        (node(cpu="1"), [[{"cpu": "2"}]], make_pod(requests=[{"cpu": "0", "memory": "0"}]), 48),
        # init container max with defaults: cpu max(100, 2000) -> 50; memory 200Mi -> 97; 73
        (node(), [], make_pod(requests=[None], init_requests=[{"cpu": "2"}]), 73),
        # overhead in milli-cpu: 1250m -> 68; memory 1Gi -> 87; 77
        (node(), [], make_pod(requests=[{"cpu": "1", "memory": "1Gi"}], overhead={"cpu": "250m"}), 77),
        # two containers, one without requests: cpu 500+100 -> 85; memory 200Mi+200Mi -> 95; 90
        (node(), [], make_pod(requests=[{"cpu": "500m"}, None]), 90),
    ],
)
def test_score(
    the_node: dict[str, Any], existing: list[list[dict[str, str] | None]], pod: dict[str, Any], want: int
) -> None:
    assert score_one(the_node, existing, pod) == want


def test_nonzero_requests() -> None:
    assert nonzero_requests(make_pod(requests=[None, {"cpu": "1"}])) == (1100, 400 * MI)
    assert nonzero_requests(make_pod(requests=[{"cpu": "0", "memory": "1Gi"}])) == (0, GI)
    assert nonzero_requests(make_pod()) == (0, 0)  # no containers at all
    sidecar = make_pod(requests=[{"cpu": "1", "memory": "1Gi"}])
    sidecar["spec"]["initContainers"] = [{"name": "s", "restartPolicy": "Always"}]
    assert nonzero_requests(sidecar) == (1100, GI + 200 * MI)


def test_go_div_truncates() -> None:
    assert [go_div(7, 2), go_div(-7, 2), go_div(7, -2), go_div(-7, -2)] == [3, -3, -3, 3]


def test_score_cache_follows_pod_changes() -> None:
    plugin = NodeResourcesFit()
    snap = Snapshot.build([node("a"), node("b")])
    pod = make_pod(requests=[{"cpu": "1", "memory": "1Gi"}])
    rows = np.arange(2, dtype=np.int64)
    first = plugin.score_all(CycleState(0), pod, snap, rows).tolist()
    assert first[0] == first[1]
    add_pods(snap, [make_pod("x", node="a", requests=[{"cpu": "2", "memory": "2Gi"}])], 3)
    after = plugin.score_all(CycleState(0), pod, snap, rows).tolist()
    assert after == assert_scores_match_oracle(plugin, pod, snap, [0, 1])
    assert after[0] < after[1] == first[1]
    assert feasible_scores(plugin, pod, snap, [1]).tolist() == [after[1]]


def test_kept_scores_follow_row_changes_for_every_kept_pod_and_evict_the_oldest() -> None:
    plugin = NodeResourcesFit()
    snap = Snapshot.build([node("a"), node("b", cpu="8"), node("c", memory="2Gi")])
    pods = [make_pod(f"p{k}", requests=[{"cpu": f"{100 + 10 * k}m", "memory": "1Gi"}]) for k in range(70)]
    for k, pod in enumerate(pods):  # more distinct pods than scores are kept for (64 at 3 rows)
        assert_scores_match_oracle(plugin, pod, snap, [0, 1, 2])
        if k % 7 == 0:
            existing = make_pod(
                f"x{k}", node=snap.names[k % 3], requests=[{"cpu": "150m", "memory": "100Mi"}]
            )
            add_pods(snap, [existing], k + 1)
    for pod in pods:  # every pod again: kept ones were re-scored on each change, evicted ones recomputed
        assert_scores_match_oracle(plugin, pod, snap, [0, 1, 2])
        assert_scores_match_oracle(plugin, pod, snap, [1])


def test_go_div_all_truncates_and_wraps_like_go() -> None:
    a = np.array([7, -7, 7, -7, -(2**63), -(2**63), 0, -1], np.int64)
    b = np.array([2, 2, -2, -2, -1, 2**61, 5, 5], np.int64)
    assert go_div_all(a, b).tolist() == [3, -3, -3, 3, -(2**63), -4, 0, 0]
    assert go_div_all(np.array([-3, 3], np.int64), 2).tolist() == [-1, 1]


# --- property -------------------------------------------------------------------------------------

incoming = st.builds(
    lambda reqs, init: make_pod(requests=reqs, init_requests=init),
    st.lists(request_lists, max_size=3),
    st.lists(request_lists, max_size=2),
)


@settings(max_examples=250, deadline=None)
@given(resource_clusters(max_nodes=7, max_pods=10), incoming, st.data())
def test_plugin_equals_oracle(
    cluster: tuple[list[dict[str, Any]], list[dict[str, Any]]], pod: dict[str, Any], data: st.DataObject
) -> None:
    nodes, pods = cluster
    plugin = NodeResourcesFit()
    snap = Snapshot.build(nodes, pods)
    assert_matches_oracle(plugin, pod, snap)
    assert_scores_match_oracle(plugin, pod, snap, draw_rows(data, len(nodes)))
    if nodes:
        more = [bound_pod(data.draw, f"m{k}", len(nodes)) for k in range(data.draw(st.integers(1, 4)))]
        add_pods(snap, more, 13)
        assert_matches_oracle(plugin, pod, snap)
        assert_scores_match_oracle(plugin, pod, snap, list(range(len(nodes))))
    alloc = data.draw(
        st.dictionaries(st.sampled_from(RESOURCE_NAMES), st.sampled_from(["0", "2", "16", "8Gi"]), max_size=4)
    )
    add_nodes(snap, [make_node("m", allocatable=alloc)], 14)
    assert_matches_oracle(plugin, pod, snap)
    assert_scores_match_oracle(plugin, pod, snap, list(range(snap.n)))


def test_many_insufficient_resources_in_one_status() -> None:
    # 70 reasons: failure patterns wider than a machine word still group rows correctly
    names = [f"example.com/r{k:02d}" for k in range(70)]
    half = {n: "1" for n in names[:35]}
    snap = Snapshot.build([node("a", extra=half), node("b"), node("c", extra=half)])
    pod = make_pod(requests=[dict.fromkeys(names, "1")])
    got = assert_matches_oracle(NodeResourcesFit(), pod, snap)
    assert got[0] == got[2] == unfit(*(f"Insufficient {n}" for n in names[35:]))
    assert got[1] == unfit(*(f"Insufficient {n}" for n in names))


def test_rows_refreshed_with_a_generation_that_goes_back_are_re_read() -> None:
    # the snapshot re-derives every row it re-copies, whatever its generation
    plugin = NodeResourcesFit()
    snap = Snapshot.build([node("a"), node("b")])
    pod = make_pod(requests=[{"cpu": "1", "memory": "1Gi"}])
    rows = np.arange(2, dtype=np.int64)
    plugin.score_all(CycleState(0), pod, snap, rows)
    add_pods(snap, [make_pod("x", node="a", requests=[{"cpu": "3500m", "memory": "2Gi"}])], 9)
    plugin.score_all(CycleState(0), pod, snap, rows)
    add_pods(snap, [make_pod("y", node="a", requests=[{"cpu": "100m", "memory": "1Gi"}])], 0)
    assert_matches_oracle(plugin, pod, snap)
    assert_scores_match_oracle(plugin, pod, snap, [0, 1])


# --- Go int64 arithmetic --------------------------------------------------------------------------


def test_score_wraps_like_go_int64() -> None:
    # (2^61 - 0) * 100 wraps to -2^63 in Go's int64, and -2^63 / 2^61 = -4: cpu scores -4, memory
    # 100 (nothing requested), the node (-4 + 100) / 2 = 48
    the_node = node(cpu=f"{2**61}m")
    assert score_one(the_node, [], make_pod(requests=[{"cpu": "0", "memory": "0"}])) == 48


HUGE = ["0", "1", "-3", "100", f"{2**61}m", str(2**62), str(2**63 - 1), str(-(2**62)), "9223372036854775807m"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.dictionaries(st.sampled_from(["cpu", "memory", "pods"]), st.sampled_from(HUGE)), max_size=4),
    st.lists(
        st.one_of(
            st.none(), st.fixed_dictionaries({"cpu": st.sampled_from(HUGE), "memory": st.sampled_from(HUGE)})
        )
    ),
    st.fixed_dictionaries({"cpu": st.sampled_from(HUGE), "memory": st.sampled_from(HUGE)}),
)
def test_huge_and_negative_values_match_oracle(
    allocs: list[dict[str, str]], existing: list[dict[str, str] | None], request: dict[str, str]
) -> None:
    # at most one existing pod per node and one container per pod keep every sum an int64, as the
    # snapshot requires; the differences and products of Filter and Score overflow as Go's do
    nodes = [make_node(f"n{i}", allocatable=a) for i, a in enumerate(allocs)]
    pods = [make_pod(f"e{i}", node=f"n{i}", requests=[r]) for i, r in enumerate(existing[: len(nodes)])]
    snap = Snapshot.build(nodes, pods)
    plugin, pod = NodeResourcesFit(), make_pod(requests=[request])
    assert_matches_oracle(plugin, pod, snap)
    assert_scores_match_oracle(plugin, pod, snap, list(range(snap.n)))


# --- args: ignoredResources / ignoredResourceGroups (docs/rules/scheduler-basic.md) ---------------


@pytest.mark.parametrize(
    ("args", "requests", "want"),
    [
        ({}, {"example.com/gpu": "1", "cpu": "5"}, unfit("Insufficient cpu", "Insufficient example.com/gpu")),
        (
            {"ignoredResources": ["example.com/gpu"]},
            {"example.com/gpu": "1", "cpu": "5"},
            unfit("Insufficient cpu"),
        ),
        (
            {"ignoredResources": ["example.com/gpu"]},
            {"example.com/gpu": "1", "example.com/fpga": "1"},
            unfit("Insufficient example.com/fpga"),
        ),
        ({"ignoredResourceGroups": ["example.com"]}, {"example.com/gpu": "1", "example.com/fpga": "1"}, OK),
        (
            {"ignoredResourceGroups": ["example"]},
            {"example.com/gpu": "1"},
            unfit("Insufficient example.com/gpu"),
        ),
        # only extended resources can be ignored: kubernetes.io/ names, hugepages and cpu never are
        (
            {"ignoredResources": [BATCH_CPU, "cpu"], "ignoredResourceGroups": ["kubernetes.io"]},
            {BATCH_CPU: "1", "cpu": "5"},
            unfit("Insufficient cpu", f"Insufficient {BATCH_CPU}"),
        ),
        (
            {"ignoredResources": ["hugepages-2Mi"]},
            {"hugepages-2Mi": "2Mi"},
            unfit("Insufficient hugepages-2Mi"),
        ),
    ],
)
def test_filter_ignored_resources(args: dict[str, Any], requests: dict[str, str], want: Status) -> None:
    from ._oracle_checks import check_filter

    plugin = NodeResourcesFit.from_args(args)
    snap = Snapshot.build([node()])
    assert check_filter(plugin, make_pod(requests=[requests]), snap) == [want]


def test_from_args_without_args_keeps_the_default_behaviour() -> None:
    snap = Snapshot.build([node("a"), node("b", cpu="8")], [make_pod("x", node="a", requests=[{"cpu": "1"}])])
    pod = make_pod(requests=[{"cpu": "1", "memory": "1Gi"}])
    plugin = NodeResourcesFit.from_args({})
    assert assert_matches_oracle(plugin, pod, snap) == assert_matches_oracle(NodeResourcesFit(), pod, snap)
    # a: cpu 2000 of 4000 -> 50, memory 1Gi + 200Mi (the pod without memory) -> 85; b: 87 and 87
    assert assert_scores_match_oracle(plugin, pod, snap, [0, 1]) == [67, 87]
