"""NodeResourcesFit: Filter reasons (Too many pods, Insufficient <resource> in order, extended
resources, zero requests, unchecked names) and the LeastAllocated score with non-zero defaults; the
all-nodes forms equal the per-node forms, also after rows change."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apis.gonum import go_div
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.plugins.noderesources import NodeResourcesFit
from scheduler.plugins.resourcemath import is_checked_resource, nonzero_requests

from ._support import add_pods, assert_forms_agree, filter_one, make_node, make_pod

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
        # an overcommitted resource the pod does not request is not checked
        (node(), [{"cpu": "6"}], [{"memory": "1Gi"}], OK),
        (node(), [{"cpu": "6"}], [{"cpu": "0", "memory": "1Gi"}], OK),
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
    assert assert_forms_agree(NodeResourcesFit(), pod, snap) == [unfit("Insufficient vendor.io/fpga")] * 2


def test_malformed_request_is_an_error() -> None:
    plugin = NodeResourcesFit()
    snap = Snapshot.build([node("a"), node("b")])
    pod = make_pod(requests=[{"cpu": "lots"}])
    st_ = plugin.pre_filter(CycleState(0), pod, snap)
    assert st_.code == Code.ERROR
    res = plugin.filter_all(CycleState(0), pod, snap)
    assert [res.status_of(i).code for i in range(2)] == [Code.ERROR, Code.ERROR]
    assert plugin.filter(CycleState(0), pod, snap, 0).code == Code.ERROR


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
    plugin = NodeResourcesFit()
    state = CycleState(0)
    score, st_ = plugin.score(state, pod, snap, 0)
    assert st_.is_success()
    all_scores = plugin.score_all(CycleState(0), pod, snap, np.array([0], np.int64))
    assert all_scores.tolist() == [score]
    return score


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
    assert after == [plugin.score(CycleState(0), pod, snap, i)[0] for i in range(2)]
    assert after[0] < after[1] == first[1]
    assert plugin.score_all(CycleState(0), pod, snap, np.array([1], np.int64)).tolist() == [after[1]]


# --- property -------------------------------------------------------------------------------------

RES = ["cpu", "memory", "pods", "ephemeral-storage", BATCH_CPU, "example.com/gpu", "foo"]
quantities = st.sampled_from(["0", "1", "2", "3", "500m", "1500m", "1Gi", "3Gi", "100", "4000"])
request_lists = st.one_of(st.none(), st.dictionaries(st.sampled_from(RES), quantities, max_size=4))


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    n = draw(st.integers(0, 7))
    nodes = []
    for i in range(n):
        alloc = draw(
            st.dictionaries(
                st.sampled_from(RES), st.sampled_from(["0", "1", "2", "4", "8Gi", "16", "4000"]), max_size=6
            )
        )
        nodes.append(make_node(f"n{i}", allocatable=alloc))
    pods = []
    if n:
        for k in range(draw(st.integers(0, 10))):
            reqs = draw(st.lists(request_lists, max_size=2))
            pods.append(make_pod(f"e{k}", node=f"n{draw(st.integers(0, n - 1))}", requests=reqs))
    return nodes, pods


incoming = st.builds(
    lambda reqs, init: make_pod(requests=reqs, init_requests=init),
    st.lists(request_lists, max_size=3),
    st.lists(request_lists, max_size=2),
)


def assert_scores_agree(
    plugin: NodeResourcesFit, pod: dict[str, Any], snap: Snapshot, rows: list[int]
) -> None:
    feasible = np.asarray(rows, np.int64)
    got = plugin.score_all(CycleState(0), pod, snap, feasible)
    assert got.shape == (len(rows),)
    assert got.tolist() == [plugin.score(CycleState(0), pod, snap, i)[0] for i in rows]


@settings(max_examples=250, deadline=None)
@given(clusters(), incoming, st.data())
def test_all_nodes_forms_equal_per_node_forms(
    cluster: tuple[list[dict[str, Any]], list[dict[str, Any]]], pod: dict[str, Any], data: st.DataObject
) -> None:
    nodes, pods = cluster
    plugin = NodeResourcesFit()
    snap = Snapshot.build(nodes, pods)
    assert_forms_agree(plugin, pod, snap)
    rows = sorted(data.draw(st.sets(st.integers(0, max(len(nodes) - 1, 0)))) if nodes else [])
    assert_scores_agree(plugin, pod, snap, rows)
    if nodes:
        more = [
            make_pod(
                f"m{k}",
                node=f"n{data.draw(st.integers(0, len(nodes) - 1))}",
                requests=data.draw(st.lists(request_lists, max_size=2)),
            )
            for k in range(data.draw(st.integers(1, 4)))
        ]
        add_pods(snap, more, 13)
        assert_forms_agree(plugin, pod, snap)
        assert_scores_agree(plugin, pod, snap, list(range(len(nodes))))


def test_many_insufficient_resources_in_one_status() -> None:
    # more reasons than fit in a 62-bit failure code: the grouping falls back to row patterns
    names = [f"example.com/r{k:02d}" for k in range(70)]
    half = {n: "1" for n in names[:35]}
    snap = Snapshot.build([node("a", extra=half), node("b"), node("c", extra=half)])
    pod = make_pod(requests=[dict.fromkeys(names, "1")])
    got = assert_forms_agree(NodeResourcesFit(), pod, snap)
    assert got[0] == got[2] == unfit(*(f"Insufficient {n}" for n in names[35:]))
    assert got[1] == unfit(*(f"Insufficient {n}" for n in names))


def test_cached_scores_and_fit_follow_generations_that_go_back() -> None:
    # rows re-read with a smaller generation must not revive scores or free amounts cached before
    plugin = NodeResourcesFit()
    snap = Snapshot.build([node("a"), node("b")])
    pod = make_pod(requests=[{"cpu": "1", "memory": "1Gi"}])
    rows = np.arange(2, dtype=np.int64)
    plugin.score_all(CycleState(0), pod, snap, rows)
    add_pods(snap, [make_pod("x", node="a", requests=[{"cpu": "3500m", "memory": "2Gi"}])], 9)
    plugin.score_all(CycleState(0), pod, snap, rows)
    add_pods(snap, [make_pod("y", node="a", requests=[{"cpu": "100m", "memory": "1Gi"}])], 0)
    assert_forms_agree(plugin, pod, snap)
    assert_scores_agree(plugin, pod, snap, [0, 1])
