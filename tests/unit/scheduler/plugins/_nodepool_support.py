"""Shared by the NodePool and ScarceDevice tests: pods that ask for label values in each way, and the
checks that a production plugin (either mode) equals its oracle (tests/oracles/nodepool.py) on every
row, with and without its PreFilter/PreScore."""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterAllPlugin, FilterPlugin, ScoreAllPlugin, ScorePlugin
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from tests.oracles.nodepool import oracle_for

from ._support import feasible_scores, make_pod

Obj = dict[str, Any]


def in_term(key: str, *values: str, also: Obj | None = None) -> Obj:
    """A required node selector term with `key In values` (and the expression `also`, if given)."""
    exprs: list[Obj] = [{"key": key, "operator": "In", "values": list(values)}]
    if also is not None:
        exprs.append(also)
    return {"matchExpressions": exprs}


def required(*terms: Obj) -> Obj:
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }


def pod_with(
    *,
    selector: dict[str, Any] | None = None,
    terms: list[Obj] | None = None,
    labels: dict[str, str] | None = None,
    requests: dict[str, str] | None = None,
) -> Obj:
    """A pod that may name values through its nodeSelector, required terms or its own labels."""
    spec: Obj = {}
    if selector is not None:
        spec["nodeSelector"] = selector
    if terms is not None:
        spec["affinity"] = required(*terms)
    pod = make_pod("p", requests=[requests or {"cpu": "100m"}], **spec)
    if labels is not None:
        pod["metadata"]["labels"] = labels
    return pod


def filter_statuses(plugin: FilterAllPlugin, pod: Obj, snap: Snapshot) -> list[Status]:
    """filter_all equals the oracle's filter on every row, with PreFilter run and without; returns
    the statuses."""
    oracle = oracle_for(plugin)
    assert isinstance(oracle, FilterPlugin)
    want = [oracle.filter(CycleState(0.0), pod, snap, i) for i in range(snap.n)]
    state = CycleState(0.0)
    pre = getattr(plugin, "pre_filter")  # noqa: B009 (every plugin here has one)
    assert pre(state, pod, snap).is_success()
    for st_ in (state, CycleState(0.0)):
        res = plugin.filter_all(st_, pod, snap)
        assert res.which.shape == (snap.n,)
        assert [res.status_of(i) for i in range(snap.n)] == want
    return want


def scores(plugin: ScoreAllPlugin, pod: Obj, snap: Snapshot, rows: list[int] | None = None) -> list[int]:
    """score_all over `rows` (default all) equals the oracle's score of each, with PreScore run and
    without; returns the scores."""
    oracle = oracle_for(plugin)
    assert isinstance(oracle, ScorePlugin)
    rows = list(range(snap.n)) if rows is None else rows
    want = []
    for i in rows:
        s, st_ = oracle.score(CycleState(0.0), pod, snap, i)
        assert st_.is_success()
        want.append(s)
    state = CycleState(0.0)
    pre = getattr(plugin, "pre_score")  # noqa: B009
    assert pre(state, pod, snap, np.asarray(rows, np.int64)).is_success()
    assert feasible_scores(plugin, pod, snap, rows, state).tolist() == want
    assert feasible_scores(plugin, pod, snap, rows).tolist() == want
    return want
