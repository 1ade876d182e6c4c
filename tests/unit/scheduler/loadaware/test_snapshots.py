"""LoadAwareScheduling over several snapshots at once (preemption and nominated pods evaluate one node
as a one-row snapshot): each snapshot keeps its own view, refreshed by the nodes changed since its last
read and never rebuilt because another snapshot was read; results cached in the cycle state belong to
the snapshot they were computed on."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np

from apis.nodemetric import NodeMetric
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.loadaware import LoadAwareScheduling
from scheduler.plugins.loadaware.columns import LoadRows

NOW = 1000.0
POD: Any = {
    "metadata": {"name": "p", "namespace": "ns"},
    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]},
}


def _nodes(n: int) -> list[dict[str, Any]]:
    return [
        {"metadata": {"name": f"n{i}"}, "status": {"allocatable": {"cpu": "16", "memory": "64Gi"}}}
        for i in range(n)
    ]


def _metric(name: str, cpu: str) -> NodeMetric:
    return NodeMetric.from_dict(
        {
            "metadata": {"name": name},
            "status": {
                "updateTime": "1970-01-01T00:16:40Z",
                "nodeMetric": {"nodeUsage": {"resources": {"cpu": cpu}}},
            },
        }
    )


def _same_as_rebuilt(plugin: LoadAwareScheduling, view: LoadRows, snapshot: Snapshot) -> bool:
    fresh = LoadRows(plugin.args, plugin.resources, plugin.metrics, plugin.assign)
    fresh.rebuild(snapshot)
    return view.rows == fresh.rows and bool(np.array_equal(view.block.ints, fresh.block.ints))


def test_a_one_row_snapshot_does_not_make_the_cluster_view_rebuild() -> None:
    plugin = LoadAwareScheduling(clock=lambda: NOW)
    for i in range(5):
        plugin.on_node_metric(f"n{i}", _metric(f"n{i}", "2"))
    cluster = Snapshot.build(_nodes(5))
    view = plugin.rows(cluster)
    rebuilds: list[int] = []
    original = view.rebuild

    def counting(snapshot: Snapshot) -> None:
        rebuilds.append(snapshot.n)
        original(snapshot)

    view.rebuild = counting  # type: ignore[method-assign]
    plugin.on_node_metric("n3", _metric("n3", "12"))  # a change before the one-row evaluation
    one = Snapshot([cluster.infos[3]], cluster.resources)
    single = plugin.rows(one)
    assert single is not view and _same_as_rebuilt(plugin, single, one)  # sees n3's new usage
    plugin.on_node_metric("n1", _metric("n1", "11"))  # a change after it
    assert plugin.rows(cluster) is view
    assert rebuilds == []  # refreshed by name: n3 and n1
    assert _same_as_rebuilt(plugin, view, cluster)
    state = CycleState(NOW)
    plugin.pre_filter(state, POD, cluster)
    # the pod's 4 cpu are estimated at 3.4: n1 (11+3.4)/16 and n3 (12+3.4)/16 exceed 65 %, 2+3.4 does not
    rejected = [i for i in range(5) if plugin.filter_all(state, POD, cluster).which[i] >= 0]
    assert rejected == [1, 3]


def test_cached_results_belong_to_their_snapshot() -> None:
    plugin = LoadAwareScheduling(clock=lambda: NOW)
    for i in range(4):
        plugin.on_node_metric(f"n{i}", _metric(f"n{i}", "12" if i == 2 else "1"))
    cluster = Snapshot.build(_nodes(4))
    state = CycleState(NOW)
    plugin.pre_filter(state, POD, cluster)
    assert plugin.filter_all(state, POD, cluster).which.tolist()[2] >= 0
    assert len(plugin.score_all(state, POD, cluster, np.arange(4))) == 4
    for i in (0, 2):  # the same cycle state on a one-row snapshot: its own results
        one = Snapshot([cluster.infos[i]], cluster.resources)
        which = plugin.filter_all(state, POD, one).which
        assert len(which) == 1 and (which[0] >= 0) == (i == 2)
        assert len(plugin.score_all(state, POD, one, np.arange(1))) == 1
    which = plugin.filter_all(state, POD, cluster).which
    assert len(which) == 4 and (which >= 0).tolist() == [False, False, True, False]


def test_views_of_dropped_snapshots_are_let_go() -> None:
    plugin = LoadAwareScheduling(clock=lambda: NOW)
    cluster = Snapshot.build(_nodes(3))
    plugin.rows(cluster)
    for i in range(3):
        plugin.rows(Snapshot([cluster.infos[i]], cluster.resources))
    gc.collect()
    assert len(plugin._views) == 1
