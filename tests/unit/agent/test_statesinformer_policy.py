"""policy_after_update: the refresh rule of docs/rules/koordlet.md#reporter (refresh only when
metadata.generation changed AND the spec differs; the local copy is the defaults overlaid with the object's
spec)."""

from __future__ import annotations

from typing import Any

import pytest

from agent.statesinformer.informer import policy_after_update
from apis.duration import Duration
from apis.nodemetric import AggregatePolicy, MemoryCollectPolicy, NodeMetricCollectPolicy, NodeMetricError

CURRENT = NodeMetricCollectPolicy(
    aggregate_duration_seconds=111,
    report_interval_seconds=222,
    node_aggregate_policy=AggregatePolicy([Duration.parse("7m")]),
    node_memory_collect_policy=MemoryCollectPolicy.USAGE_WITH_PAGE_CACHE,
)


def nm(generation: int | None, policy: dict[str, Any] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "node-1"}
    if generation is not None:
        meta["generation"] = generation
    obj: dict[str, Any] = {"metadata": meta}
    if policy is not None:
        obj["spec"] = {"metricCollectPolicy": policy}
    return obj


def test_refresh_when_generation_and_spec_change() -> None:
    old = nm(1, {"reportIntervalSeconds": 60})
    new = nm(2, {"reportIntervalSeconds": 90, "aggregateDurationSeconds": 120})
    got = policy_after_update(CURRENT, old, new)
    assert got is not None
    assert got.report_interval_seconds == 90
    assert got.aggregate_duration_seconds == 120
    # missing fields take the defaults
    assert got.node_aggregate_policy == AggregatePolicy(
        [Duration.parse("5m"), Duration.parse("10m"), Duration.parse("30m")]
    )
    assert got.node_memory_collect_policy is MemoryCollectPolicy.USAGE_WITHOUT_PAGE_CACHE


def test_same_generation_keeps_current_even_if_spec_differs() -> None:
    old = nm(3, {"reportIntervalSeconds": 60})
    new = nm(3, {"reportIntervalSeconds": 90})
    assert policy_after_update(CURRENT, old, new) is CURRENT


def test_same_spec_keeps_current_even_if_generation_changed() -> None:
    old = nm(3, {"reportIntervalSeconds": 60})
    new = nm(4, {"reportIntervalSeconds": 60})
    assert policy_after_update(CURRENT, old, new) is CURRENT


def test_status_only_update_keeps_current() -> None:
    old = nm(5, {"reportIntervalSeconds": 60})
    new = {**nm(5, {"reportIntervalSeconds": 60}), "status": {"updateTime": "2024-05-01T12:00:00Z"}}
    assert policy_after_update(CURRENT, old, new) is CURRENT


def test_no_current_policy_takes_new_spec() -> None:
    old = nm(1, {"reportIntervalSeconds": 60})
    new = nm(1, {"reportIntervalSeconds": 45})
    got = policy_after_update(None, old, new)
    assert got is not None
    assert got.report_interval_seconds == 45
    assert got.aggregate_duration_seconds == 300


def test_spec_removed_gives_all_defaults() -> None:
    old = nm(1, {"reportIntervalSeconds": 90})
    new = nm(2, None)
    got = policy_after_update(CURRENT, old, new)
    assert got == NodeMetricCollectPolicy(
        aggregate_duration_seconds=300,
        report_interval_seconds=60,
        node_aggregate_policy=AggregatePolicy(
            [Duration.parse("5m"), Duration.parse("10m"), Duration.parse("30m")]
        ),
        node_memory_collect_policy=MemoryCollectPolicy.USAGE_WITHOUT_PAGE_CACHE,
    )


def test_new_durations_and_memory_policy_taken() -> None:
    old = nm(1, {})
    new = nm(
        2,
        {
            "nodeAggregatePolicy": {"durations": ["1m", "2h"]},
            "nodeMemoryCollectPolicy": "usageWithHotPageCache",
        },
    )
    got = policy_after_update(CURRENT, old, new)
    assert got is not None
    assert got.node_aggregate_policy == AggregatePolicy([Duration.parse("1m"), Duration.parse("2h")])
    assert got.node_memory_collect_policy is MemoryCollectPolicy.USAGE_WITH_HOT_PAGE_CACHE
    assert got.report_interval_seconds == 60


def test_empty_durations_keep_default_windows() -> None:
    got = policy_after_update(CURRENT, nm(1, {}), nm(2, {"nodeAggregatePolicy": {"durations": []}}))
    assert got is not None
    assert got.node_aggregate_policy == AggregatePolicy(
        [Duration.parse("5m"), Duration.parse("10m"), Duration.parse("30m")]
    )


def test_bad_new_spec_raises() -> None:
    with pytest.raises(NodeMetricError, match="aggregateDurationSeconds"):
        policy_after_update(CURRENT, nm(1, {}), nm(2, {"aggregateDurationSeconds": "soon"}))


def test_inputs_not_mutated() -> None:
    old = nm(1, {"reportIntervalSeconds": 60})
    new = nm(2, {"reportIntervalSeconds": 90})
    before = (repr(old), repr(new), repr(CURRENT))
    policy_after_update(CURRENT, old, new)
    assert (repr(old), repr(new), repr(CURRENT)) == before
