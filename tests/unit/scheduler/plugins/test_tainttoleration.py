"""TaintToleration: NoSchedule/NoExecute taints must be tolerated; the first untolerated taint names
the rejection; the plugin equals its oracle (tests/oracles/plugins.py), also after rows change or are
added."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.plugins.tainttoleration import Signatures, TaintToleration

from ._support import (
    add_nodes,
    assert_matches_oracle,
    draw_rows,
    filter_one,
    make_node,
    make_pod,
    node_lists,
    refresh_nodes,
    taint,
    taints,
    tolerations,
)


def reject(key: str, value: str) -> Status:
    reason = f"node(s) had taint {{{key}: {value}}}, that the pod didn't tolerate"
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (reason,), "TaintToleration")


OK = Status.success()


@pytest.mark.parametrize(
    ("node_taints", "tols", "want"),
    [
        ([], [], OK),
        ([taint("k", "v", "NoSchedule")], [], reject("k", "v")),
        ([taint("k", "v", "NoExecute")], [], reject("k", "v")),
        ([taint("k", "v", "PreferNoSchedule")], [], OK),  # not a filter concern
        ([taint("k", "", "NoSchedule")], [], reject("k", "")),
        ([taint("k", "v", "NoSchedule")], [{"key": "k", "operator": "Equal", "value": "v"}], OK),
        ([taint("k", "v", "NoSchedule")], [{"key": "k", "value": "v"}], OK),  # empty operator = Equal
        (
            [taint("k", "v", "NoSchedule")],
            [{"key": "k", "operator": "Equal", "value": "w"}],
            reject("k", "v"),
        ),
        ([taint("k", "v", "NoSchedule")], [{"key": "k", "operator": "Exists"}], OK),
        ([taint("k", "v", "NoSchedule")], [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}], OK),
        (
            [taint("k", "v", "NoSchedule")],
            [{"key": "k", "operator": "Exists", "effect": "NoExecute"}],
            reject("k", "v"),
        ),
        ([taint("k", "v", "NoExecute")], [{"operator": "Exists"}], OK),  # empty key + Exists: everything
        ([taint("k", "v", "NoSchedule")], [{"operator": "Exists", "effect": "NoExecute"}], reject("k", "v")),
        ([taint("k", "v", "NoSchedule")], [{"key": "j", "operator": "Exists"}], reject("k", "v")),
        ([taint("k", "v", "NoSchedule")], [{"key": "k", "operator": "Lt", "value": "v"}], reject("k", "v")),
        # the first untolerated taint (in node order) is named
        (
            [taint("a", "1", "NoSchedule"), taint("b", "2", "NoExecute"), taint("c", "3", "NoSchedule")],
            [{"key": "a", "operator": "Exists"}],
            reject("b", "2"),
        ),
        (
            [
                taint("p", "0", "PreferNoSchedule"),
                taint("b", "2", "NoExecute"),
                taint("c", "3", "NoSchedule"),
            ],
            [{"key": "b", "operator": "Exists"}],
            reject("c", "3"),
        ),
        (
            [taint("a", "1", "NoSchedule"), taint("b", "2", "NoExecute")],
            [{"key": "a", "operator": "Exists"}, {"key": "b", "value": "2", "effect": "NoExecute"}],
            OK,
        ),
    ],
)
def test_filter(node_taints: list[dict[str, str]], tols: list[dict[str, str]], want: Status) -> None:
    pod = make_pod(tolerations=tols)
    assert filter_one(TaintToleration(), pod, make_node("n", taints=node_taints)) == want


def test_rows_share_statuses_by_taint() -> None:
    plugin = TaintToleration()
    nodes = [
        make_node("a", taints=[taint("k", "v", "NoSchedule")]),
        make_node("b"),
        make_node("c", taints=[taint("x", "", "NoSchedule"), taint("k", "v", "NoSchedule")]),
        make_node("d", taints=[taint("k", "v", "NoSchedule")]),
    ]
    snap = Snapshot.build(nodes)
    pod = make_pod(tolerations=[{"key": "x", "operator": "Exists"}])
    assert assert_matches_oracle(plugin, pod, snap) == [
        reject("k", "v"),
        OK,
        reject("k", "v"),
        reject("k", "v"),
    ]
    res = plugin.filter_all(CycleState(0), pod, snap)
    assert len(res.statuses) == 1


def test_cache_follows_row_changes() -> None:
    plugin = TaintToleration()
    snap = Snapshot.build([make_node("a"), make_node("b", taints=[taint("k", "v", "NoSchedule")])])
    pod = make_pod()
    assert assert_matches_oracle(plugin, pod, snap) == [OK, reject("k", "v")]
    refresh_nodes(snap, {0: make_node("a", taints=[taint("j", "w", "NoExecute")]), 1: make_node("b")}, 3)
    assert assert_matches_oracle(plugin, pod, snap) == [reject("j", "w"), OK]


@settings(max_examples=200, deadline=None)
@given(node_lists(), tolerations, st.data())
def test_plugin_equals_oracle(nodes: list[dict[str, Any]], tols: Any, data: st.DataObject) -> None:
    plugin = TaintToleration()
    snap = Snapshot.build(nodes)
    pod = make_pod(tolerations=tols)
    assert_matches_oracle(plugin, pod, snap)
    if nodes:
        rows = draw_rows(data, len(nodes))
        refresh_nodes(snap, {i: make_node(snap.names[i], taints=data.draw(taints)) for i in rows}, 9)
        assert_matches_oracle(plugin, pod, snap)
        assert_matches_oracle(plugin, make_pod(tolerations=data.draw(tolerations)), snap)
    add_nodes(snap, [make_node("m", taints=data.draw(taints))], 10)
    assert_matches_oracle(plugin, pod, snap)


def test_signatures_no_row_uses_are_dropped() -> None:
    plugin = TaintToleration()
    snap = Snapshot.build([make_node("a"), make_node("b")])
    pod = make_pod(tolerations=[{"key": "k0", "operator": "Exists"}])
    for k in range(80):  # 80 distinct taint lists come and go on row a
        refresh_nodes(snap, {0: make_node("a", taints=[taint(f"k{k}", "v", "NoSchedule")])}, k + 1)
        want = OK if k == 0 else reject(f"k{k}", "v")
        assert assert_matches_oracle(plugin, pod, snap) == [want, OK]
    view = snap.view(("TaintToleration", "signatures"), Signatures)
    assert len(view.sigs) <= 64 + snap.n // 8
    assert set(view.ids.tolist()) <= set(range(len(view.sigs)))
