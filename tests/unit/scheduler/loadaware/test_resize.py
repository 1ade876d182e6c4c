"""LoadAwareScheduling's row view follows nodes removed and added in place (`LoadRows.resize`, then
`refresh` of the new rows): after random row changes mixed with metric, pod and node-object events,
Filter and Score equal the per-node oracle on every row (the kept per-estimate results included), and
the view's rows, block arrays and big rows equal those of a view rebuilt on the same rows."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apis.nodemetric import NodeMetric
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.loadaware import LoadAwareScheduling
from scheduler.plugins.loadaware.columns import LoadRows
from tests.unit.scheduler._rowchange import move, new_node
from tests.unit.scheduler.loadaware.test_property import (
    NOW,
    args_st,
    check_equal,
    metric_st,
    node_st,
    pod_st,
)


def check_view(plugin: LoadAwareScheduling, snapshot: Snapshot) -> None:
    kept = plugin.rows(snapshot)
    fresh = LoadRows(plugin.args, plugin.resources, plugin.metrics, plugin.assign)
    fresh.rebuild(snapshot)
    assert kept.names == fresh.names == snapshot.names
    assert kept.big == fresh.big
    assert [x.exact for x in kept.rows] == [x.exact for x in fresh.rows]
    for a, b in ((kept.block, fresh.block),):
        assert a.n == b.n == snapshot.n
        assert np.array_equal(a.ints, b.ints) and np.array_equal(a.bools, b.bools)
        assert np.array_equal(a.flags, b.flags)
        assert np.array_equal(a.update_time, b.update_time, equal_nan=True)
        assert np.array_equal(a.capacity, b.capacity) and np.array_equal(a.active[1], b.active[1])
    if snapshot.n:
        bk, bf = kept.big_block(all_rows=True), fresh.big_block(all_rows=True)
        assert bk.ints.tolist() == bf.ints.tolist()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(args_st(), st.integers(1, 5), st.data())
def test_load_rows_follow_rows_moved_in_place(args: dict[str, Any], n: int, data: st.DataObject) -> None:
    plugin = LoadAwareScheduling(args, clock=lambda: NOW)
    names = [f"n{i}" for i in range(n)]
    snapshot = Snapshot.build([data.draw(node_st(x)) for x in names])
    pod_names = [f"p{i}" for i in range(data.draw(st.integers(0, 4)))]
    for name in names:
        if data.draw(st.integers(0, 4)) > 0:
            plugin.on_node_metric(name, NodeMetric.from_dict(data.draw(metric_st(name, pod_names))))
    for p in pod_names:
        plugin.on_pod_add(data.draw(pod_st(p, data.draw(st.sampled_from(names)))))
    incoming = data.draw(pod_st("incoming", None))
    check_equal(plugin, snapshot, incoming)  # the view and the incoming pod's results are kept
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    for step in range(data.draw(st.integers(1, 4))):
        if snapshot.n and data.draw(st.booleans()):  # a node's metric changes (refresh_names path)
            name = data.draw(st.sampled_from(snapshot.names))
            plugin.on_node_metric(name, NodeMetric.from_dict(data.draw(metric_st(name, pod_names))))
        added = []
        for j in range(data.draw(st.integers(0, 2))):
            name = f"m{step}-{j}"
            if data.draw(st.booleans()):  # its metric and pods may come before the node itself
                plugin.on_node_metric(name, NodeMetric.from_dict(data.draw(metric_st(name, pod_names))))
            if data.draw(st.booleans()):
                plugin.on_pod_add(data.draw(pod_st(f"{name}-p", name)))
            added.append(new_node(data.draw(node_st(name)), (), step + 1))
        move(snapshot, added, rng, data.draw(st.integers(0, 2)))
        check_equal(plugin, snapshot, incoming)
        check_view(plugin, snapshot)
