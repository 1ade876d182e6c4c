"""The vectorised rules against the per-node oracle at their exact boundaries: Go's math.Round, the
smallest failing usage of Filter (int64 rows and Python-int rows alike), Score's integer division and
capacity-0 / over-capacity cases, expiry; the snapshot view's incremental rows against a rebuild; rows
and pods outside int64's exact range."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apis.nodemetric import NodeMetric
from apis.qos import priority_class_with_default
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.loadaware import LoadAwareScheduling, LoadAwareSchedulingArgs, estimator, rules
from scheduler.plugins.loadaware.columns import CODE_DTYPE, Block, LoadRows, Row, exact_estimate, make_row
from tests.oracles.loadaware import least_used

from .test_property import NOW, check_equal, pod_st, world_st

ARGS = LoadAwareSchedulingArgs.from_dict(None)
capacities = st.one_of(
    st.integers(1, 10**6), st.integers(1, 2**63 - 1), st.sampled_from([1, 3, 7, 2**53 + 1])
)
thresholds = st.one_of(st.integers(1, 100), st.integers(-(2**63), 2**63 - 1).filter(lambda t: t != 0))


def fails(total: int, capacity: int, threshold: int) -> bool:
    return estimator.round_half_away(float(total) / float(capacity) * 100) > threshold


def row(capacity: int, threshold: int, existing: int, update_time: float = NOW) -> Row:
    t, e = (threshold,), (existing,)
    return make_row((capacity,), (t, t), (False, False), (e, e), e, e, True, True, update_time)


def codes(x: Row, est: int) -> list[int]:
    """Filter's code for one row through each block that can hold it."""
    out = [int(rules.filter_codes(Block([x], 1, object), (est,), False)[0])]
    if x.exact:
        out.append(int(rules.filter_codes(Block([x], 1, np.int64), (est,), False)[0]))
    return out


@given(st.one_of(st.floats(allow_nan=True), st.sampled_from([0.5, -0.5, 2.5, 0.49999999999999994, 1e300])))
def test_round_half_away_is_go_math_round(x: float) -> None:
    got = float(rules.round_half_away(np.array([x]))[0])
    want = estimator.round_half_away(x)
    assert (math.isnan(got) and math.isnan(want)) or got == want


@given(capacities, thresholds, st.integers(0, 10**6))
def test_filter_at_the_smallest_failing_usage(capacity: int, threshold: int, est: int) -> None:
    lo, hi = -(2**63), 2**63 - 1  # the smallest failing total in int64, by bisection on the oracle
    if not fails(hi, capacity, threshold):
        return
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fails(mid, capacity, threshold) else (mid + 1, hi)
    for total in (lo - 1, lo, lo + 1):
        expected = 1 if fails(total, capacity, threshold) else -1
        got = codes(row(capacity, threshold, total - est), est)
        assert got == [expected] * len(got), (total, got)


@given(st.integers(0, 2**63 - 1) | st.integers(0, 1000), st.integers(-(2**20), 2**63) | st.integers(0, 1000))
def test_score_is_the_integer_least_used(capacity: int, used: int) -> None:
    x = row(capacity, 0, used)
    blocks = [Block([x], 1, object)] + ([Block([x], 1, np.int64)] if x.exact else [])
    for b in blocks:
        assert int(rules.scores(b, ARGS, [1], (0,), False)[0]) == least_used(used, capacity)


@given(
    st.floats(-1e11, 1e11, allow_nan=False) | st.just(math.nan), st.integers(1, 10**6), st.floats(-1e12, 1e12)
)
def test_expiry(update_time: float, seconds: int, now: float) -> None:
    b = Block([row(1, 1, 0, update_time)], 1, np.int64)
    want = math.isnan(update_time) or now - update_time >= seconds
    assert bool(b.expired(seconds, now)[0]) == want


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world_st())
def test_incremental_rows_equal_a_rebuild(world: dict[str, Any]) -> None:
    plugin = LoadAwareScheduling(world["args"], clock=lambda: NOW)
    snapshot = Snapshot.build(world["nodes"])
    view = plugin.rows(snapshot)
    for name, nm in world["metrics"].items():
        plugin.on_node_metric(name, NodeMetric.from_dict(nm))
    for pod in world["pods"]:
        plugin.on_pod_add(pod)
    view = plugin.rows(snapshot)  # refreshed by name
    fresh = LoadRows(plugin.args, plugin.resources, plugin.metrics, plugin.assign)
    fresh.rebuild(snapshot)
    assert view.rows == fresh.rows and view.big == fresh.big
    for attr in ("ints", "bools", "flags"):
        assert np.array_equal(getattr(view.block, attr), getattr(fresh.block, attr)), attr
    assert np.array_equal(view.block.update_time, fresh.block.update_time, equal_nan=True)


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
def test_big_rows_and_pods_match_the_oracle(
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
    beyond = {**pod, "spec": {"containers": [{"name": "c", "resources": {"requests": {"memory": "100Ei"}}}]}}
    check_equal(plugin, snapshot, beyond)


@settings(max_examples=100, deadline=None)
@given(st.lists(pod_st("p", None), min_size=1, max_size=8), st.booleans())
def test_estimate_memo_equals_a_fresh_estimate(pods: list[dict[str, Any]], customize: bool) -> None:
    plugin = LoadAwareScheduling({"allowCustomizeEstimation": customize})
    for pod in pods * 2:
        fresh = (plugin.estimator.estimate_or_empty(pod), priority_class_with_default(pod))
        assert plugin.estimator.facts(pod) == fresh


@given(capacities, thresholds, st.integers(0, 2**53), st.integers(0, 2**53))
def test_exact_rows_give_results_the_kept_dtype_holds(
    capacity: int, threshold: int, used: int, est: int
) -> None:
    """The int64 block's results are kept per estimate in CODE_DTYPE: over exact rows and an exact
    estimate every Filter code and score fits it (non-negative capacity and usage bound the score)."""
    x = row(capacity, threshold, used)
    if not x.exact or not exact_estimate((est,)):
        return
    b = Block([x], 1, np.int64)
    code = int(rules.filter_codes(b, (est,), False)[0])
    score = int(rules.scores(b, ARGS, [1], (est,), False)[0])
    info = np.iinfo(CODE_DTYPE)
    assert -1 <= code <= 3 and 0 <= score <= 100
    assert info.min <= code <= info.max and info.min <= score <= info.max
