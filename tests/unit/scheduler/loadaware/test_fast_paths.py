"""The exact reformulations behind the fast paths: smallest failing sums and expiry instants against the
original float expressions, the numpy rebuild against the per-row form, rows and pods outside the exact
range of the arrays, and the estimate memo against a fresh estimate."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apis.nodemetric import NodeMetric
from apis.qos import priority_class_with_default
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.loadaware import LoadAwareScheduling
from scheduler.plugins.loadaware.estimator import round_half_away
from scheduler.plugins.loadaware.exact import expiry_instant, min_exceeding_sum

from .test_property import NOW, check_equal, pod_st, world_st

capacities = st.one_of(
    st.integers(1, 10**6), st.integers(1, 2**63 - 1), st.sampled_from([1, 3, 7, 2**53 + 1])
)
thresholds = st.one_of(st.integers(1, 100), st.integers(-(2**63), 2**63 - 1).filter(lambda t: t != 0))


def fails(total: int, capacity: int, threshold: int) -> bool:
    return round_half_away(float(total) / float(capacity) * 100) > threshold


@given(capacities, thresholds)
def test_min_exceeding_sum_is_the_exact_boundary(capacity: int, threshold: int) -> None:
    h = min_exceeding_sum(threshold, capacity)
    assert fails(h, capacity, threshold)
    assert not fails(h - 1, capacity, threshold)


@given(st.floats(-1e11, 1e11, allow_nan=False), st.integers(1, 10**6), st.floats(-1e12, 1e12))
def test_expiry_instant_is_the_exact_boundary(update_time: float, seconds: int, now: float) -> None:
    t = expiry_instant(update_time, seconds)
    assert t - update_time >= seconds
    below = math.nextafter(t, -math.inf)
    assert not below - update_time >= seconds
    assert (now - update_time >= seconds) == (now >= t)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world_st())
def test_bulk_rebuild_equals_per_row_form(world: dict[str, Any]) -> None:
    plugin = LoadAwareScheduling(world["args"], clock=lambda: NOW)
    for name, nm in world["metrics"].items():
        plugin.on_node_metric(name, NodeMetric.from_dict(nm))
    for pod in world["pods"]:
        plugin.on_pod_add(pod)
    snapshot = Snapshot.build(world["nodes"])
    table = plugin.table
    table.sync(snapshot)
    heads, floats, irregular = table.heads.copy(), table.floats.copy(), set(table.irregular)
    for i in range(snapshot.n):
        table._refresh(snapshot, i)
    assert np.array_equal(heads, table.heads)
    assert np.array_equal(floats, table.floats, equal_nan=True)
    assert irregular == table.irregular


def _node(name: str, alloc: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"allocatable": alloc}}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["-16", "16", str(2**47), "9223372036854775807", "0"]),
    st.sampled_from(["-5Gi", "64Gi", str(2**50), "0"]),
    st.sampled_from(["-3", "4", str(2**47 // 1000)]),
    pod_st("incoming", None),
    st.sampled_from([{}, {"dominantResourceWeight": 1}, {"usageThresholds": {"cpu": 0, "memory": 0}}]),
)
def test_irregular_rows_and_pods_match_the_reference(
    cpu: str, memory: str, usage_cpu: str, pod: dict[str, Any], args: dict[str, Any]
) -> None:
    nodes = [_node("a", {"cpu": cpu, "memory": memory}), _node("b", {"cpu": "16", "memory": "64Gi"})]
    plugin = LoadAwareScheduling(args, clock=lambda: NOW)
    for name in ("a", "b"):
        nm = {
            "metadata": {"name": name},
            "status": {
                "updateTime": "2026-01-01T00:00:00Z",
                "nodeMetric": {"nodeUsage": {"resources": {"cpu": usage_cpu, "memory": "1Gi"}}},
            },
        }
        plugin.on_node_metric(name, NodeMetric.from_dict(nm))
    snapshot = Snapshot.build(nodes)
    check_equal(plugin, snapshot, pod)
    huge = {**pod, "spec": {"containers": [{"name": "c", "resources": {"requests": {"memory": "100Ti"}}}]}}
    check_equal(plugin, snapshot, huge)


@settings(max_examples=100, deadline=None)
@given(st.lists(pod_st("p", None), min_size=1, max_size=8), st.booleans())
def test_estimate_memo_equals_a_fresh_estimate(pods: list[dict[str, Any]], customize: bool) -> None:
    plugin = LoadAwareScheduling({"allowCustomizeEstimation": customize})
    for pod in pods * 2:
        fresh = (plugin.estimator.estimate_or_empty(pod), priority_class_with_default(pod))
        assert plugin.estimator.facts(pod) == fresh
