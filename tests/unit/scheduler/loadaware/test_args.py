"""Args defaults and validation (docs/configuration.md#loadawarescheduling-args,
docs/rules/scheduler.md#invalid-plugin-args): invalid args name the field and value and make the plugin
unconstructible."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.plugins.loadaware import ArgsError, LoadAwareScheduling, LoadAwareSchedulingArgs


def test_defaults() -> None:
    a = LoadAwareSchedulingArgs.from_dict({})
    assert a.filter_expired_node_metrics is True
    assert a.node_metric_expiration_seconds == 180
    assert a.enable_schedule_when_node_metrics_expired is False
    assert a.resource_weights == {"cpu": 1, "memory": 1}
    assert a.usage_thresholds == {"cpu": 65, "memory": 95}
    assert a.estimated_scaling_factors == {"cpu": 85, "memory": 70}
    assert a.estimator == "defaultEstimator"
    assert a.resources == ("cpu", "memory")


def test_weights_not_defaulted_with_dominant_weight() -> None:
    assert LoadAwareSchedulingArgs.from_dict({"dominantResourceWeight": 1}).resource_weights == {}


def test_factors_filled_and_vector() -> None:
    a = LoadAwareSchedulingArgs.from_dict(
        {"estimatedScalingFactors": {"cpu": 90, "nvidia.com/gpu": 100}, "supportedResources": ["a/b"]}
    )
    assert a.estimated_scaling_factors == {"cpu": 90, "nvidia.com/gpu": 100, "memory": 70}
    assert a.resources == ("a/b", "cpu", "memory", "nvidia.com/gpu")


@pytest.mark.parametrize(
    ("raw", "field", "value"),
    [
        ({"nodeMetricExpirationSeconds": 0}, "nodeMetricExpirationSeconds", "0"),
        ({"resourceWeights": {"cpu": 0}}, "resourceWeights[cpu]", "0"),
        ({"resourceWeights": {"cpu": 101}}, "resourceWeights[cpu]", "101"),
        ({"dominantResourceWeight": 101}, "dominantResourceWeight", "101"),
        ({"usageThresholds": {"cpu": 120}}, "usageThresholds[cpu]", "120"),
        ({"usageThresholds": {"cpu": -1}}, "usageThresholds[cpu]", "-1"),
        ({"prodUsageThresholds": {"memory": 101}}, "prodUsageThresholds[memory]", "101"),
        ({"estimatedScalingFactors": {"cpu": 0}}, "estimatedScalingFactors[cpu]", "0"),
        ({"resourceWeights": {"nvidia.com/gpu": 1}}, "estimatedScalingFactors[nvidia.com/gpu]", "None"),
        ({"aggregated": {"usageThresholds": {"cpu": 200}}}, "aggregated.usageThresholds[cpu]", "200"),
        ({"aggregated": {"usageAggregationType": "p42"}}, "aggregated.usageAggregationType", "'p42'"),
        (
            {"aggregated": {"usageAggregatedDuration": "5 minutes"}},
            "aggregated.usageAggregatedDuration",
            "5 min",
        ),
        ({"usageThresholds": {"cpu": 65.0}}, "usageThresholds[cpu]", "65.0"),
        ({"usageThresholds": {"cpu": "65"}}, "usageThresholds[cpu]", "'65'"),
        ({"filterExpiredNodeMetrics": "yes"}, "filterExpiredNodeMetrics", "'yes'"),
        ({"estimator": "other"}, "estimator", "'other'"),
        ({"usageThreshold": {}}, "usageThreshold", "{}"),
    ],
)
def test_invalid_args_name_field_and_value(raw: dict[str, Any], field: str, value: str) -> None:
    with pytest.raises(ArgsError) as exc:
        LoadAwareScheduling(raw)
    message = str(exc.value)
    assert f"field {field}=" in message
    assert value in message


def test_valid_bounds() -> None:
    a = LoadAwareSchedulingArgs.from_dict(
        {"usageThresholds": {"cpu": 0, "memory": 100}, "resourceWeights": {"cpu": 100, "memory": 1}}
    )
    assert a.usage_thresholds == {"cpu": 0, "memory": 100}


def test_plugin_interfaces() -> None:
    from scheduler.framework.interfaces import (
        EnqueueExtensions,
        FilterAllPlugin,
        FilterPlugin,
        PreFilterPlugin,
        ReservePlugin,
        ScoreAllPlugin,
        ScorePlugin,
    )

    p = LoadAwareScheduling()
    assert p.name == "LoadAwareScheduling"
    for proto in (PreFilterPlugin, FilterAllPlugin, ScoreAllPlugin, ReservePlugin, EnqueueExtensions):
        assert isinstance(p, proto)
    assert not isinstance(p, FilterPlugin | ScorePlugin)  # one form per extension point
    events = {(e.resource, e.action) for e in p.events_to_register()}
    assert events == {
        ("Pod", "Delete"),
        ("NodeMetric", "Add"),
        ("NodeMetric", "Update"),
        ("NodeMetric", "Delete"),
    }
