"""Helpers for the spreading plugins' tests (no tests here): object builders in the style of
kube-scheduler's test wrappers, and runs of Filter and Score+NormalizeScore checked against the oracle."""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.podtopologyspread import PodTopologySpread
from scheduler.plugins.selectorspread import SelectorSpread
from tests.oracles.topologyspread import spread_oracle_for

Obj = dict[str, Any]
HOST = "kubernetes.io/hostname"


def node(name: str, labels: dict[str, str] | None = None, **short: str) -> Obj:
    """A node with `labels` and short-keyed ones (`zone="z1"`)."""
    lbls = {**(labels or {}), **short}
    return {"metadata": {"name": name, "labels": lbls}, "status": {"allocatable": {"cpu": "4"}}}


def hnode(name: str, labels: dict[str, str] | None = None, **short: str) -> Obj:
    """A node labelled with its hostname (and the labels given)."""
    n = node(name, labels, **short)
    n["metadata"]["labels"][HOST] = name
    return n


def pod(
    name: str = "p",
    node_name: str | None = None,
    ns: str = "ns",
    labels: dict[str, str] | None = None,
    **spec: Any,
) -> Obj:
    s: Obj = {"containers": [], **spec}
    if node_name is not None:
        s["nodeName"] = node_name
    return {"metadata": {"name": name, "namespace": ns, "labels": labels or {}}, "spec": s}


def spread(max_skew: int, key: str, action: str, selector: Obj | None) -> Obj:
    c: Obj = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": action}
    if selector is not None:
        c["labelSelector"] = selector
    return c


def exists(key: str) -> Obj:
    return {"matchExpressions": [{"key": key, "operator": "Exists"}]}


def filter_statuses(plugin: PodTopologySpread, p: Obj, snap: Snapshot) -> dict[str, Status]:
    """Every node's Filter status (checked against the oracle), by node name."""
    state = CycleState(0.0)
    assert plugin.pre_filter(state, p, snap).is_success()  # type: ignore[arg-type]
    res = plugin.filter_all(state, p, snap)  # type: ignore[arg-type]
    got = {snap.names[i]: res.status_of(i) for i in range(snap.n)}
    oracle = spread_oracle_for(plugin)
    ostate = CycleState(0.0)
    assert oracle.pre_filter(ostate, p, snap).is_success()  # type: ignore[union-attr]
    assert got == {snap.names[i]: oracle.filter(ostate, p, snap, i) for i in range(snap.n)}  # type: ignore[union-attr]
    return got


def final_scores(
    plugin: PodTopologySpread | SelectorSpread, p: Obj, snap: Snapshot, feasible: list[str]
) -> dict[str, int]:
    """Score + NormalizeScore of the feasible nodes (checked against the oracle), by node name."""
    rows = np.asarray(sorted(snap.index[n] for n in feasible), np.int64)
    out = []
    for impl in (plugin, spread_oracle_for(plugin)):
        state = CycleState(0.0)
        assert impl.pre_score(state, p, snap, rows).is_success()  # type: ignore[union-attr]
        if hasattr(impl, "score_all"):
            s = np.asarray(impl.score_all(state, p, snap, rows))
            s = (s if len(s) == len(rows) else s.take(rows)).copy()
        else:
            s = np.asarray([impl.score(state, p, snap, i)[0] for i in rows.tolist()], np.int64)  # type: ignore[union-attr]
        assert impl.normalize_scores(state, p, s).is_success()  # type: ignore[union-attr]
        out.append({snap.names[i]: int(v) for i, v in zip(rows.tolist(), s.tolist(), strict=True)})
    assert out[0] == out[1]
    return out[0]
