"""The results kept between pods (``percall``, the expiry lower bounds of ``table``): through event
sequences, several incoming pods and clocks, the vectorised Filter/Score equal the per-node reference
and a table evaluated from scratch."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apis.nodemetric import NodeMetric
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.loadaware import LoadAwareScheduling
from scheduler.plugins.loadaware.percall import SLOTS

from .test_property import NOW, pod_st, world_st

clocks = st.sampled_from([NOW, NOW - 400, NOW + 400, NOW + 10**6, math.nan])


def check(plugin: LoadAwareScheduling, snapshot: Snapshot, pod: dict[str, Any], now: float) -> None:
    state = CycleState(now)
    plugin.pre_filter(state, pod, snapshot)
    result = plugin.filter_all(state, pod, snapshot)
    scores = plugin.score_all(state, pod, snapshot, np.arange(snapshot.n, dtype=np.int64))
    for i in range(snapshot.n):
        single = plugin.filter(state, pod, snapshot, i)
        vec = result.status_of(i)
        assert (vec.code, vec.reasons) == (single.code, single.reasons), snapshot.names[i]
        assert int(scores[i]) == plugin.score(state, pod, snapshot, i)[0], snapshot.names[i]
    table = plugin.table
    kept = (table.changes, table._memos, table._soonest)
    table._forget()  # from scratch: no kept result, no expiry bound
    again = plugin.score_all(CycleState(now), pod, snapshot, np.arange(snapshot.n, dtype=np.int64))
    table.changes, table._memos, table._soonest = kept
    assert np.array_equal(scores, again)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world_st(), st.lists(pod_st("incoming", None), min_size=1, max_size=4), st.data())
def test_kept_results_equal_fresh_ones(
    world: dict[str, Any], incoming: list[dict[str, Any]], data: st.DataObject
) -> None:
    plugin = LoadAwareScheduling(world["args"], clock=lambda: NOW)
    snapshot = Snapshot.build(world["nodes"])
    for name, nm in world["metrics"].items():
        plugin.on_node_metric(name, NodeMetric.from_dict(nm))
    for pod in world["pods"]:
        plugin.on_pod_add(pod)
    for pod in incoming:
        check(plugin, snapshot, pod, data.draw(clocks))
    state = CycleState(NOW)
    for kind, node, obj in world["events"]:
        if kind == "reserve":
            plugin.reserve(state, obj, node)
        elif kind == "metric":
            plugin.on_node_metric(node, NodeMetric.from_dict(obj))
        elif kind == "metric-delete":
            plugin.on_node_metric(node, None)
        for pod in data.draw(st.lists(st.sampled_from(incoming), max_size=3)):
            check(plugin, snapshot, pod, data.draw(clocks))


def test_more_estimates_than_slots() -> None:
    nodes = [
        {"metadata": {"name": f"n{i}"}, "status": {"allocatable": {"cpu": "8", "memory": "8Gi"}}}
        for i in range(3)
    ]
    plugin = LoadAwareScheduling(clock=lambda: NOW)
    for node in nodes:
        nm = {
            "metadata": {"name": node["metadata"]["name"]},
            "status": {
                "updateTime": "2026-01-01T00:00:00Z",
                "nodeMetric": {"nodeUsage": {"resources": {"cpu": "1", "memory": "1Gi"}}},
            },
        }
        plugin.on_node_metric(node["metadata"]["name"], NodeMetric.from_dict(nm))
    snapshot = Snapshot.build(nodes)
    for k in range(SLOTS + 20):
        pod = {
            "metadata": {"namespace": "ns", "name": f"p{k}", "uid": f"u{k}"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": f"{k * 37}m"}}}]},
        }
        check(plugin, snapshot, pod, NOW)
        plugin.reserve(CycleState(NOW), pod, f"n{k % 3}")
