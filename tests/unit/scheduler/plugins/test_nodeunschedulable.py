"""NodeUnschedulable: cordoned nodes reject pods that do not tolerate the unschedulable taint; the
plugin equals its oracle (tests/oracles/plugins.py), also after rows change or are added."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.plugins.nodeunschedulable import ERR_REASON_UNSCHEDULABLE, NodeUnschedulable

from ._support import (
    add_nodes,
    assert_matches_oracle,
    draw_rows,
    filter_one,
    make_node,
    make_pod,
    node_lists,
    refresh_nodes,
    tolerations,
)

REJECT = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("node(s) were unschedulable",), "NodeUnschedulable")
KEY = "node.kubernetes.io/unschedulable"


@pytest.mark.parametrize(
    ("unschedulable", "tols", "want"),
    [
        (None, [], Status.success()),
        (False, [], Status.success()),
        (True, [], REJECT),
        (True, [{"key": KEY, "operator": "Exists", "effect": "NoSchedule"}], Status.success()),
        (True, [{"key": KEY, "operator": "Exists"}], Status.success()),
        (True, [{"operator": "Exists"}], Status.success()),  # empty key + Exists tolerates all
        (True, [{"key": KEY}], Status.success()),  # Equal (default) with the taint's empty value
        (True, [{"key": KEY, "operator": "Equal", "value": ""}], Status.success()),
        (True, [{"key": KEY, "operator": "Equal", "value": "x"}], REJECT),
        (True, [{"key": KEY, "operator": "Exists", "effect": "NoExecute"}], REJECT),
        (True, [{"key": "other", "operator": "Exists"}], REJECT),
        (True, [{"key": KEY, "operator": "Bogus"}], REJECT),
        (
            True,
            [{"key": "other", "operator": "Exists"}, {"operator": "Exists", "effect": "NoSchedule"}],
            Status.success(),
        ),
    ],
)
def test_filter(unschedulable: bool | None, tols: list[dict[str, Any]], want: Status) -> None:
    pod = make_pod(tolerations=tols)
    assert filter_one(NodeUnschedulable(), pod, make_node("n", unschedulable=unschedulable)) == want


def test_reason_and_name() -> None:
    assert ERR_REASON_UNSCHEDULABLE == "node(s) were unschedulable"
    assert NodeUnschedulable().name == "NodeUnschedulable"


def test_cache_follows_row_changes() -> None:
    plugin = NodeUnschedulable()
    snap = Snapshot.build([make_node("a"), make_node("b", unschedulable=True)])
    pod = make_pod()
    assert assert_matches_oracle(plugin, pod, snap) == [Status.success(), REJECT]
    refresh_nodes(snap, {0: make_node("a", unschedulable=True), 1: make_node("b")}, 5)
    assert assert_matches_oracle(plugin, pod, snap) == [REJECT, Status.success()]
    other = Snapshot.build([make_node("a"), make_node("b", unschedulable=True)])  # same layout number
    assert assert_matches_oracle(plugin, pod, other) == [Status.success(), REJECT]


@settings(max_examples=150, deadline=None)
@given(node_lists(), tolerations, st.data())
def test_plugin_equals_oracle(nodes: list[dict[str, Any]], tols: Any, data: st.DataObject) -> None:
    plugin = NodeUnschedulable()
    snap = Snapshot.build(nodes)
    pod = make_pod(tolerations=tols)
    assert_matches_oracle(plugin, pod, snap)
    if nodes:
        rows = draw_rows(data, len(nodes))
        flips = {i: make_node(snap.names[i], unschedulable=data.draw(st.booleans())) for i in rows}
        refresh_nodes(snap, flips, 7)
        assert_matches_oracle(plugin, pod, snap)
    add_nodes(snap, [make_node("m", unschedulable=data.draw(st.booleans()))], 8)
    assert_matches_oracle(plugin, pod, snap)
