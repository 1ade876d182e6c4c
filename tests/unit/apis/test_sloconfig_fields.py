"""slo-controller-config validation per field: an invalid field takes its last good value (or its
default), the valid fields of the same key apply, and "" in an enum field means unset / default."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from apis import constants as c
from apis.gojson import validate
from apis.nodeslo_defaults import default_cpu_burst_strategy, default_resource_threshold_strategy
from apis.sloconfig import (
    SLOControllerConfig,
    node_colocation_strategy,
    node_metric_collect_policy,
    node_slo_spec,
    parse_slo_controller_config,
)
from apis.sloconfig_merge import ConfigKeyError, default_colocation_strategy

COLOCATION = c.COLOCATION_CONFIG_KEY
THRESHOLD = c.RESOURCE_THRESHOLD_CONFIG_KEY
BURST = c.CPU_BURST_CONFIG_KEY


def load(
    previous: SLOControllerConfig | None = None, **keys: Any
) -> tuple[SLOControllerConfig, list[ConfigKeyError]]:
    data = {k.replace("_", "-"): v if isinstance(v, str) else json.dumps(v) for k, v in keys.items()}
    return parse_slo_controller_config(data, previous)


@pytest.mark.parametrize("field", ["midReclaimMode", "memoryCalculatePolicy", "cpuCalculatePolicy"])
def test_empty_enum_string_is_unset_not_an_error(field: str) -> None:
    cfg, errors = load(colocation_config={"enable": True, field: "", "cpuReclaimThresholdPercent": 50})
    assert errors == []
    assert cfg.colocation_available and not cfg.colocation_error
    strategy = cfg.colocation.strategy
    assert strategy.enable is True and strategy.cpu_reclaim_threshold_percent == 50
    assert validate(strategy) == []


def test_empty_memory_collect_policy_gives_the_default_collect_policy() -> None:
    cfg, errors = load(colocation_config={"enable": True, "metricMemoryCollectPolicy": ""})
    assert errors == []
    policy = node_metric_collect_policy(cfg.colocation.strategy).to_dict()
    assert policy["nodeMemoryCollectPolicy"] == "usageWithoutPageCache"


def test_every_enum_field_of_every_key_accepts_empty() -> None:
    cfg, errors = load(
        colocation_config={"enable": True, "midReclaimMode": "", "memoryCalculatePolicy": ""},
        resource_threshold_config={"clusterStrategy": {"enable": True, "cpuSuppressPolicy": ""}},
        resource_qos_config={"clusterStrategy": {"policies": {"cpuPolicy": "", "netQOSPolicy": ""}}},
        cpu_burst_config={"clusterStrategy": {"policy": ""}},
    )
    assert errors == []
    spec = node_slo_spec(cfg, {}, {})
    assert spec.resource_used_threshold_with_be == dataclasses.replace(
        default_resource_threshold_strategy(), enable=True
    )
    assert spec.cpu_burst_strategy == default_cpu_burst_strategy()


def test_invalid_field_takes_last_good_value_and_valid_fields_apply() -> None:
    first, errors = load(colocation_config={"enable": True, "cpuReclaimThresholdPercent": 70})
    assert errors == []
    second, errors = load(
        first,
        colocation_config={
            "enable": True,
            "cpuReclaimThresholdPercent": -1,
            "memoryReclaimThresholdPercent": 80,
        },
    )
    assert [(e.key, e.field, e.value, e.rejected) for e in errors] == [
        (COLOCATION, "cpuReclaimThresholdPercent", -1, False)
    ]
    assert "field falls back to the last good value: 70" in str(errors[0])
    strategy = second.colocation.strategy
    assert (strategy.cpu_reclaim_threshold_percent, strategy.memory_reclaim_threshold_percent) == (70, 80)
    assert second.colocation_available and not second.colocation_error


def test_invalid_field_without_last_good_takes_the_default() -> None:
    cfg, errors = load(
        colocation_config={"enable": True, "degradeTimeMinutes": 0, "cpuReclaimThresholdPercent": 40}
    )
    assert [(e.field, e.rejected) for e in errors] == [("degradeTimeMinutes", False)]
    assert "field falls back to the default: 15" in str(errors[0])
    default = default_colocation_strategy()
    assert cfg.colocation.strategy == dataclasses.replace(
        default, enable=True, cpu_reclaim_threshold_percent=40
    )


def test_inverted_pair_takes_both_last_good_values() -> None:
    first, _ = load(
        resource_threshold_config={
            "clusterStrategy": {
                "enable": True,
                "memoryEvictThresholdPercent": 80,
                "memoryEvictLowerPercent": 70,
            }
        }
    )
    second, errors = load(
        first,
        resource_threshold_config={
            "clusterStrategy": {
                "enable": True,
                "cpuSuppressThresholdPercent": 55,
                "memoryEvictThresholdPercent": 60,
                "memoryEvictLowerPercent": 75,
            }
        },
    )
    assert [(e.field, e.value, e.rejected) for e in errors] == [
        ("clusterStrategy.memoryEvictThresholdPercent", 60, False)
    ]
    assert "must be greater than memoryEvictLowerPercent=75" in str(errors[0])
    threshold = second.resource_threshold.cluster_strategy
    assert threshold.cpu_suppress_threshold_percent == 55
    assert (threshold.memory_evict_threshold_percent, threshold.memory_evict_lower_percent) == (80, 70)


def test_last_good_value_survives_unrelated_updates() -> None:
    first, _ = load(cpu_burst_config={"clusterStrategy": {"policy": "auto", "cpuBurstPercent": 500}})
    second, _ = load(first, cpu_burst_config={"clusterStrategy": {"policy": "auto", "cpuBurstPercent": 0}})
    third, errors = load(
        second, cpu_burst_config={"clusterStrategy": {"policy": "cpuBurstOnly", "cpuBurstPercent": 0}}
    )
    assert [e.field for e in errors] == ["clusterStrategy.cpuBurstPercent"]
    burst = third.cpu_burst.cluster_strategy
    assert (burst.policy, burst.cpu_burst_percent) == ("cpuBurstOnly", 500)


def test_node_entry_invalid_field_takes_cluster_value_others_apply() -> None:
    cfg, errors = load(
        cpu_burst_config={
            "clusterStrategy": {"policy": "auto", "sharePoolThresholdPercent": 40},
            "nodeStrategies": [
                {
                    "name": "pool-a",
                    "nodeSelector": {"matchLabels": {"pool": "a"}},
                    "sharePoolThresholdPercent": 140,
                    "cpuBurstPercent": 300,
                }
            ],
        }
    )
    assert [(e.field, e.value, e.rejected) for e in errors] == [
        ("nodeStrategies[0].sharePoolThresholdPercent", 140, False)
    ]
    assert "field falls back to the cluster strategy: 40" in str(errors[0])
    burst = node_slo_spec(cfg, {"pool": "a"}, {}).cpu_burst_strategy
    assert burst is not None
    assert (burst.policy, burst.share_pool_threshold_percent, burst.cpu_burst_percent) == ("auto", 40, 300)
    other = node_slo_spec(cfg, {"pool": "b"}, {}).cpu_burst_strategy
    assert other is not None and other.cpu_burst_percent == 1000


def test_colocation_node_entry_with_empty_enum_inherits_nothing_wrong() -> None:
    cfg, errors = load(
        colocation_config={
            "enable": True,
            "memoryCalculatePolicy": "request",
            "nodeConfigs": [{"nodeSelector": {"matchLabels": {"pool": "a"}}, "memoryCalculatePolicy": ""}],
        }
    )
    assert errors == []
    # As upstream: a pointer string "" overwrites the cluster value and then behaves as the default.
    assert node_colocation_strategy(cfg, {"pool": "a"}, {}).memory_calculate_policy == ""
    assert node_colocation_strategy(cfg, {"pool": "b"}, {}).memory_calculate_policy == "request"


def test_a_type_error_still_rejects_the_whole_key() -> None:
    first, _ = load(colocation_config={"enable": True, "cpuReclaimThresholdPercent": 70})
    second, errors = load(first, colocation_config={"enable": True, "cpuReclaimThresholdPercent": "lots"})
    assert [(e.field, e.rejected) for e in errors] == [("cpuReclaimThresholdPercent", True)]
    assert second.colocation == first.colocation and second.colocation_error
