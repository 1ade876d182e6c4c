"""Rounding and Reserve/Unreserve: Go math.Round half away from zero on scalars."""

from __future__ import annotations

from apis.nodemetric import NodeMetric
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.loadaware import LoadAwareScheduling
from scheduler.plugins.loadaware.estimator import round_half_away


def test_round_half_away() -> None:
    assert round_half_away(64.5) == 65
    assert round_half_away(65.5) == 66
    assert round_half_away(-2.5) == -3
    assert round_half_away(0.49999999999999994) == 0
    assert round_half_away(2.4999) == 2


def test_reserve_unreserve() -> None:
    nodes = [{"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "16", "memory": "64Gi"}}}]
    snapshot = Snapshot.build(nodes)
    plugin = LoadAwareScheduling(clock=lambda: 1000.0)
    nm = {
        "metadata": {"name": "n1"},
        "status": {
            "updateTime": "1970-01-01T00:16:40Z",
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": "4"}}},
        },
    }
    plugin.on_node_metric("n1", NodeMetric.from_dict(nm))
    pod = {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]},
    }
    other = {**pod, "metadata": {"name": "q", "namespace": "ns"}}
    state = CycleState(1000.0)
    plugin.pre_filter(state, pod, snapshot)
    assert plugin.filter_all(state, pod, snapshot).passed.all()  # 4000+3400=7400 -> 46 <= 65
    plugin.reserve(state, other, "n1")  # assigned now (1000 > 1000-60): estimated 3400 added
    state = CycleState(1000.0)
    plugin.pre_filter(state, pod, snapshot)
    result = plugin.filter_all(state, pod, snapshot)  # 10800/16000 = 67.5 -> 68 > 65
    assert result.status_of(0).reasons == ("node(s) cpu usage exceed threshold",)
    plugin.unreserve(state, other, "n1")
    state = CycleState(1000.0)
    plugin.pre_filter(state, pod, snapshot)
    assert plugin.filter_all(state, pod, snapshot).passed.all()
