"""NodePool and ScarceDevice, both modes, equal their oracles (tests/oracles/nodepool.py) on generated
clusters and pods: labels present, absent, empty or null; pods asking through nodeSelector, required
terms (In and other operators, non-string values) and their own labels; and again after some nodes
change labels and others join and leave (the label column view follows)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.interfaces import FilterAllPlugin, ScoreAllPlugin
from scheduler.framework.snapshot import NodeInfo, Snapshot
from scheduler.plugins.nodepool import NodePool
from scheduler.plugins.scarcedevice import ScarceDevice

from ._nodepool_support import filter_statuses, scores
from ._support import draw_rows, make_node, make_pod, refresh_nodes

Obj = dict[str, Any]
KEYS = ["node.koordinator.sh/pool", "node.koordinator.sh/gpu-model", "zone"]
VALUES = ["", "a", "b", "c"]

node_labels = st.dictionaries(
    st.sampled_from(KEYS), st.one_of(st.sampled_from(VALUES), st.none()), max_size=3
)
expressions = st.fixed_dictionaries(
    {
        "key": st.sampled_from(KEYS),
        "operator": st.sampled_from(["In", "In", "NotIn", "Exists"]),
        "values": st.lists(st.one_of(st.sampled_from(VALUES), st.just(1)), max_size=3),
    }
)
terms = st.lists(st.fixed_dictionaries({"matchExpressions": st.lists(expressions, max_size=2)}), max_size=2)


@st.composite
def pods(draw: st.DrawFn) -> Obj:
    spec: Obj = {}
    selector = draw(
        st.dictionaries(st.sampled_from(KEYS), st.one_of(st.sampled_from(VALUES), st.none()), max_size=2)
    )
    if selector:
        spec["nodeSelector"] = selector
    required = draw(terms)
    if required:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": required}
            }
        }
    pod = make_pod("p", requests=[{"cpu": "1"}], **spec)
    pod["metadata"]["labels"] = draw(
        st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2)
    )
    return pod


@st.composite
def plugins(draw: st.DrawFn) -> Any:
    args: Obj = {"label": draw(st.sampled_from(KEYS)), "mode": draw(st.sampled_from(["Hard", "Soft"]))}
    if draw(st.booleans()):
        return NodePool.from_args(args)
    args["models"] = draw(st.lists(st.sampled_from(VALUES), max_size=2))
    return ScarceDevice.from_args(args)


def check(plugin: Any, pod: Obj, snap: Snapshot, rows: list[int]) -> None:
    if isinstance(plugin, FilterAllPlugin):
        filter_statuses(plugin, pod, snap)
    else:
        assert isinstance(plugin, ScoreAllPlugin)
        scores(plugin, pod, snap)
        scores(plugin, pod, snap, rows)


@settings(max_examples=60, deadline=None)
@given(st.lists(node_labels, max_size=8), plugins(), st.lists(pods(), min_size=1, max_size=3), st.data())
def test_plugins_equal_their_oracles(
    labels: list[Obj], plugin: Any, pod_list: list[Obj], data: st.DataObject
) -> None:
    snap = Snapshot.build([make_node(f"n{i}", labels=lb) for i, lb in enumerate(labels)])
    for pod in pod_list:
        check(plugin, pod, snap, draw_rows(data, snap.n))
    # some rows get new labels, then nodes join and leave
    changed = draw_rows(data, snap.n)
    refresh_nodes(snap, {i: make_node(snap.names[i], labels=data.draw(node_labels)) for i in changed}, 1)
    gone = [snap.names[i] for i in draw_rows(data, snap.n)]
    joined = [
        NodeInfo.of(make_node(f"j{k}", labels=data.draw(node_labels)))
        for k in range(data.draw(st.integers(0, 3)))
    ]
    snap.apply_nodes(joined, gone)
    for pod in pod_list:
        check(plugin, pod, snap, draw_rows(data, snap.n))
