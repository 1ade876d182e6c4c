"""TaintToleration Score (kube-scheduler v1.20.2): per node the PreferNoSchedule taints the pod's
tolerations with effect PreferNoSchedule or empty do not tolerate, counted, then
``DefaultNormalizeScore(MaxNodeScore, true)`` with Go's truncating division; the plugin equals its
oracle (tests/oracles/plugins.py), also after rows change or are added."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.tainttoleration import TaintToleration

from ._support import (
    add_nodes,
    assert_scores_match_oracle,
    draw_rows,
    make_node,
    make_pod,
    node_lists,
    normalized_scores,
    refresh_nodes,
    taint,
    taints,
    tolerations,
)


@pytest.mark.parametrize(
    ("node_taints", "tols", "count"),
    [
        ([], [], 0),
        ([taint("k", "v")], [], 1),
        ([taint("k", "v", "NoSchedule")], [], 0),  # only PreferNoSchedule taints count
        ([taint("k", "v", "NoExecute"), taint("j")], [], 1),
        ([taint("a"), taint("b"), taint("c")], [], 3),
        ([taint("k", "v")], [{"key": "k", "operator": "Exists"}], 0),  # empty effect: every effect
        ([taint("k", "v")], [{"key": "k", "operator": "Exists", "effect": "PreferNoSchedule"}], 0),
        ([taint("k", "v")], [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}], 1),
        ([taint("k", "v")], [{"key": "k", "value": "v"}], 0),
        ([taint("k", "v")], [{"key": "k", "operator": "Equal", "value": "w"}], 1),
        ([taint("k", "v"), taint("j", "v")], [{"operator": "Exists"}], 0),
        ([taint("k", "v"), taint("j", "v")], [{"key": "j", "operator": "Exists"}], 1),
        ([taint("k", "v")], [{"key": "k", "operator": "Bogus", "value": "v"}], 1),
        ([taint("k", "v"), taint("k", "v")], [], 2),  # each taint of the list counts
    ],
)
def test_count(node_taints: list[dict[str, str]], tols: list[dict[str, str]], count: int) -> None:
    snap = Snapshot.build([make_node("n", taints=node_taints)])
    assert assert_scores_match_oracle(TaintToleration(), make_pod(tolerations=tols), snap, [0]) == [count]


@pytest.mark.parametrize(
    ("counts", "want"),
    [
        ([0, 0, 0], [100, 100, 100]),  # no intolerable taint anywhere: all 100
        ([0, 1], [100, 0]),
        ([0, 1, 2], [100, 50, 0]),
        ([1, 2, 3], [67, 34, 0]),  # 100 - 100*1/3 = 100 - 33; 100 - 100*2/3 = 100 - 66
        ([0, 2, 7], [100, 72, 0]),  # 100*2/7 = 28
    ],
)
def test_normalized_reverse(counts: list[int], want: list[int]) -> None:
    nodes = [make_node(f"n{i}", taints=[taint(f"k{j}") for j in range(c)]) for i, c in enumerate(counts)]
    assert normalized_scores(TaintToleration(), make_pod(), Snapshot.build(nodes)) == want


def test_pre_score_state_is_used() -> None:
    plugin = TaintToleration()
    snap = Snapshot.build([make_node("a", taints=[taint("k")]), make_node("b")])
    state = CycleState(0.0)
    tolerant = make_pod(tolerations=[{"key": "k", "operator": "Exists"}])
    assert plugin.pre_score(state, tolerant, snap, np.arange(2, dtype=np.int64)).is_success()
    # the cycle's tolerations win over the pod passed in later
    assert plugin.score_all(state, make_pod(), snap, np.arange(2, dtype=np.int64)).tolist() == [0, 0]


def test_prefer_no_schedule_taint_is_avoided() -> None:
    nodes = [make_node("a", taints=[taint("spot", "true")]), make_node("b")]
    snap = Snapshot.build(nodes)
    assert Framework([TaintToleration()]).schedule(CycleState(0.0), make_pod(), snap).node == "b"
    tolerant = make_pod(tolerations=[{"key": "spot", "operator": "Exists"}])
    # tolerated: a tie, and the first node in name order wins without an rng
    assert Framework([TaintToleration()]).schedule(CycleState(0.0), tolerant, snap).node == "a"


def test_cache_follows_row_changes() -> None:
    plugin = TaintToleration()
    snap = Snapshot.build([make_node("a", taints=[taint("k")]), make_node("b")])
    assert normalized_scores(plugin, make_pod(), snap) == [0, 100]
    refresh_nodes(snap, {0: make_node("a"), 1: make_node("b", taints=[taint("j"), taint("k")])}, 3)
    assert normalized_scores(plugin, make_pod(), snap) == [100, 0]
    add_nodes(snap, [make_node("c", taints=[taint("k")])], 4)
    assert normalized_scores(plugin, make_pod(), snap) == [100, 0, 50]


@settings(max_examples=200, deadline=None)
@given(node_lists(), tolerations, st.data())
def test_plugin_equals_oracle(nodes: list[dict[str, Any]], tols: Any, data: st.DataObject) -> None:
    plugin = TaintToleration()
    snap = Snapshot.build(nodes)
    pod = make_pod(tolerations=tols)
    assert_scores_match_oracle(plugin, pod, snap, draw_rows(data, len(nodes)))
    normalized_scores(plugin, pod, snap)
    if nodes:
        changed = draw_rows(data, len(nodes))
        refresh_nodes(snap, {i: make_node(snap.names[i], taints=data.draw(taints)) for i in changed}, 9)
        normalized_scores(plugin, pod, snap)
        normalized_scores(plugin, make_pod(tolerations=data.draw(tolerations)), snap)
    add_nodes(snap, [make_node("m", taints=data.draw(taints))], 10)
    normalized_scores(plugin, pod, snap)
