"""Rows whose Filter/Score inputs did not change keep their arrays and kept results (``LoadRows._set``:
only ``update_time`` and the freshness flags are stored for a NodeMetric rewrite that moved nothing
else): under random sequences of NodeMetric rewrites (the same status again, a new ``updateTime`` only,
a new status), pod assigns/unassigns/moves/deletes, node joins and leaves, the view's rows and arrays
equal a view rebuilt from scratch and Filter/Score (kept results included) equal the per-node oracle."""

from __future__ import annotations

import copy
import random
from typing import Any, cast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apis.nodemetric import NodeMetric
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.loadaware import LoadAwareScheduling
from scheduler.plugins.loadaware.columns import Row, same_inputs
from tests.unit.scheduler._rowchange import move, new_node
from tests.unit.scheduler.loadaware.test_property import (
    NOW,
    args_st,
    check_equal,
    metric_st,
    node_st,
    pod_st,
    ts,
)
from tests.unit.scheduler.loadaware.test_resize import check_view

KINDS = ["same", "restamp", "unstamp", "metric", "metric-delete", "reserve", "unreserve", "add", "delete",
         "move", "join", "leave"]  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(args_st(), st.integers(1, 4), st.data())
def test_kept_rows_equal_a_rebuild(args: dict[str, Any], n: int, data: st.DataObject) -> None:
    plugin = LoadAwareScheduling(args, clock=lambda: NOW)
    names = [f"n{i}" for i in range(n)]
    snapshot = Snapshot.build([data.draw(node_st(x)) for x in names])
    pod_names = [f"p{i}" for i in range(data.draw(st.integers(0, 4)))]
    metrics: dict[str, dict[str, Any]] = {}
    for name in names:
        metrics[name] = data.draw(metric_st(name, pod_names))
        plugin.on_node_metric(name, NodeMetric.from_dict(metrics[name]))
    bound: dict[str, Any] = {}  # pod dicts (the plugin reads them as Pod)
    for p in pod_names:
        bound[p] = data.draw(pod_st(p, data.draw(st.sampled_from(names))))
        plugin.on_pod_add(bound[p])
    incoming = data.draw(pod_st("incoming", None))
    check_equal(plugin, snapshot, incoming)
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    state = CycleState(NOW)
    reserved: list[tuple[Any, str]] = []
    for step in range(data.draw(st.integers(1, 8))):
        kind = data.draw(st.sampled_from(KINDS))
        name = data.draw(st.sampled_from(snapshot.names)) if snapshot.n else "none"
        if kind in ("same", "restamp", "unstamp") and name in metrics:
            nm = copy.deepcopy(metrics[name])
            if kind == "restamp":  # a new updateTime only: the rules' inputs but expiry unchanged
                nm["status"]["updateTime"] = ts(data.draw(st.integers(-250, 0)))
            elif kind == "unstamp":
                nm["status"].pop("updateTime", None)
            metrics[name] = nm
            plugin.on_node_metric(name, NodeMetric.from_dict(nm))
        elif kind == "metric":
            metrics[name] = data.draw(metric_st(name, pod_names))
            plugin.on_node_metric(name, NodeMetric.from_dict(metrics[name]))
        elif kind == "metric-delete":
            metrics.pop(name, None)
            plugin.on_node_metric(name, None)
        elif kind == "reserve":
            pod: Any = data.draw(pod_st(f"r{step}", None))
            plugin.reserve(state, pod, name)
            reserved.append((pod, name))
        elif kind == "unreserve" and reserved:
            pod, at = reserved.pop(0)
            plugin.unreserve(state, pod, at)
        elif kind == "add":
            pod = cast(Any, data.draw(pod_st(f"a{step}", name)))
            bound[f"a{step}"] = pod
            plugin.on_pod_add(pod)
        elif kind == "delete" and bound:
            plugin.on_pod_delete(bound.pop(data.draw(st.sampled_from(sorted(bound)))))
        elif kind == "move" and bound:
            key = data.draw(st.sampled_from(sorted(bound)))
            old = bound[key]
            new: Any = {**old, "spec": {**old["spec"], "nodeName": name}}
            plugin.on_pod_update(old, new)
            bound[key] = new
        elif kind in ("join", "leave"):
            added = [new_node(data.draw(node_st(f"m{step}")), (), step + 1)] if kind == "join" else []
            move(snapshot, added, rng, 1 if kind == "leave" and snapshot.n > 1 else 0)
        check_equal(plugin, snapshot, incoming)
        check_view(plugin, snapshot)


def _row(usage: int, update_time: float) -> Row:
    v = (usage,)
    return Row((100,), ((50,), (50,)), (False, False), (v, v), v, v, True, True, update_time)


def test_same_inputs_ignores_update_time_only() -> None:
    assert same_inputs(_row(10, 1.0), _row(10, 2.0))
    assert not same_inputs(_row(10, 1.0), _row(11, 1.0))
