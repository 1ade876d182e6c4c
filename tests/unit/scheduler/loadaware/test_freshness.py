"""The expiry masks kept across cycles (scheduler.plugins.loadaware.freshness): after any sequence of
row rewrites and clocks (forward, equal, backward, across the expiration, a non-double expiration), the
kept masks equal the rule evaluated afresh; and the plugin's Filter and Score equal the per-node oracle
at every clock while metrics, pods and reservations change between cycles. The arrays Filter and Score
hand to the framework are read-only (they may be the view's kept results)."""

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
from scheduler.plugins.loadaware.freshness import Freshness, expired_rows

from .test_property import NOW, check_equal, metric_st, pod_st, ts, world_st

times = st.one_of(
    st.sampled_from([math.nan, 0.0, 50.0, 100.0, 179.5, 180.0, 250.0]),
    st.floats(-50.0, 400.0),
    st.sampled_from([0.1, 2.0**53]),
)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.data())
def test_kept_masks_equal_a_fresh_evaluation(n: int, data: st.DataObject) -> None:
    update_time = np.array(data.draw(st.lists(times, min_size=n, max_size=n)), np.float64)
    flags = np.array(data.draw(st.lists(st.lists(st.booleans(), min_size=n, max_size=n), min_size=3,
                                        max_size=3)), np.bool_)  # fmt: skip
    no_update_time = np.isnan(update_time)
    active, has_node_metric = [flags[0], flags[1]], flags[2]
    kept = Freshness()
    now = data.draw(st.floats(0.0, 200.0))
    for _ in range(data.draw(st.integers(1, 20))):
        for i in data.draw(st.lists(st.integers(0, n - 1), max_size=3)):  # rows rewritten in place
            update_time[i] = data.draw(times)
            no_update_time[i] = math.isnan(update_time[i])
            flags[:, i] = data.draw(st.lists(st.booleans(), min_size=3, max_size=3))
            kept.changed((i,))
        step = data.draw(st.sampled_from([0.0, 0.5, 30.0, 60.0, 100.0, 150.0, -1.0]))
        now = data.draw(st.just(now + step) | st.floats(-100.0, 2.0**54)) if step >= 0 else now + step
        seconds = data.draw(st.sampled_from([180, 180, 180, 1, 2**53 + 1]))
        got = kept.at(update_time, no_update_time, active, has_node_metric, seconds, now)
        expired = expired_rows(update_time, no_update_time, seconds, now)
        want = [expired, active[0] & expired, active[1] & expired, ~has_node_metric | expired]
        assert [x.tolist() for x in (got.expired, *got.gone, got.stale)] == [x.tolist() for x in want]
        assert got.count_gone == [int(np.count_nonzero(want[1])), int(np.count_nonzero(want[2]))]
        assert got.count_stale == int(np.count_nonzero(want[3]))


def test_the_rule_compares_a_non_double_expiration_exactly() -> None:
    seconds = 2**53 + 1  # float(seconds) == 2**53: an age of 2**53 is not expired
    got = expired_rows(np.array([0.0, -2.0]), np.zeros(2, np.bool_), seconds, 2.0**53)
    assert got.tolist() == [False, True]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world_st(), st.lists(st.integers(-20, 300), min_size=1, max_size=6), st.data())
def test_filter_and_score_equal_the_oracle_as_the_clock_moves(
    world: dict[str, Any], offsets: list[int], data: st.DataObject
) -> None:
    plugin = LoadAwareScheduling(world["args"], clock=lambda: NOW)
    snapshot = Snapshot.build(world["nodes"])
    for name, nm in world["metrics"].items():
        plugin.on_node_metric(name, NodeMetric.from_dict(nm))
    for pod in world["pods"]:
        plugin.on_pod_add(pod)
    pod_names = [p["metadata"]["name"] for p in world["pods"]]
    for k, off in enumerate(offsets):
        now = NOW + off + data.draw(st.sampled_from([0.0, 0.25, -0.5]))
        check_equal(plugin, snapshot, world["incoming"], now)
        name = data.draw(st.sampled_from(snapshot.names))
        change = data.draw(st.sampled_from(["metric", "reserve", "none"]))
        if change == "metric":
            plugin.on_node_metric(name, NodeMetric.from_dict(data.draw(metric_st(name, pod_names))))
        elif change == "reserve":
            plugin.reserve(CycleState(now), data.draw(pod_st(f"r{k}", None)), name)
        check_equal(plugin, snapshot, world["incoming"], now)


def test_filter_and_score_hand_over_read_only_arrays() -> None:
    plugin = LoadAwareScheduling(None, clock=lambda: NOW)
    nodes = [{"metadata": {"name": f"n{i}"}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}}}
             for i in range(3)]  # fmt: skip
    for i, off in enumerate((0, -10, -500)):  # n2's metric expired
        nm = {
            "metadata": {"name": f"n{i}"},
            "status": {
                "updateTime": ts(off),
                "nodeMetric": {"nodeUsage": {"resources": {"cpu": "1", "memory": "1Gi"}}},
            },
        }
        plugin.on_node_metric(f"n{i}", NodeMetric.from_dict(nm))
    snapshot = Snapshot.build(nodes)
    pod = {"metadata": {"namespace": "ns", "name": "p"}, "spec": {"containers": [{"name": "c"}]}}
    for _ in range(2):  # the second cycle reads the kept results
        state = CycleState(NOW)
        plugin.pre_filter(state, pod, snapshot)
        result = plugin.filter_all(state, pod, snapshot)
        scores = plugin.score_all(state, pod, snapshot, np.arange(3, dtype=np.int64))
        assert not result.which.flags.writeable and not scores.flags.writeable
        assert result.which.dtype == np.int32 and scores.dtype == np.int64
        assert [result.status_of(i).is_success() for i in range(3)] == [True, True, False]
        assert scores[2] == 0 and scores[0] > 0
