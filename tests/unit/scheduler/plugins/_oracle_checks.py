"""Checks that a production plugin equals its oracle from tests/oracles/basic.py or
tests/oracles/noderesources_scores.py (the plugins of docs/rules/scheduler-basic.md), on every row, as
_support's checks do for tests/oracles/plugins.py."""

from __future__ import annotations

from typing import Any

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterAllPlugin, FilterPlugin, Plugin, ScoreAllPlugin, ScorePlugin
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from tests.oracles import basic, noderesources_scores

from ._support import feasible_scores, oracle_scores, run_pre_filter

Obj = dict[str, Any]


def oracle(plugin: Plugin) -> Plugin:
    found = basic.oracle_for(plugin) or noderesources_scores.oracle_for(plugin)
    assert found is not None, f"no oracle for {plugin.name}"
    return found


def check_filter(plugin: FilterAllPlugin, pod: Obj, snap: Snapshot) -> list[Status]:
    """filter_all (with and without PreFilter) equals the oracle's filter on every row."""
    o = oracle(plugin)
    assert isinstance(o, FilterPlugin)
    state = CycleState(0.0)
    run_pre_filter(plugin, state, pod, snap)
    res = plugin.filter_all(state, pod, snap)
    assert res.which.shape == (snap.n,)
    want = [o.filter(CycleState(0.0), pod, snap, i) for i in range(snap.n)]
    assert [res.status_of(i) for i in range(snap.n)] == want
    assert all(s.is_rejected() or s.code == Code.ERROR for s in res.statuses)
    fresh = plugin.filter_all(CycleState(0.0), pod, snap)
    assert [fresh.status_of(i) for i in range(snap.n)] == want
    return want


def check_scores(
    plugin: ScoreAllPlugin, pod: Obj, snap: Snapshot, rows: list[int] | None = None
) -> list[int]:
    """score_all over `rows` (default: all) equals the oracle's score of each; returns the scores."""
    o = oracle(plugin)
    assert isinstance(o, ScorePlugin)
    rows = list(range(snap.n)) if rows is None else rows
    state = CycleState(0.0)
    run_pre_filter(plugin, state, pod, snap)
    got = feasible_scores(plugin, pod, snap, rows, state)
    want = oracle_scores(o, pod, snap, rows)
    assert got.tolist() == want
    return want
