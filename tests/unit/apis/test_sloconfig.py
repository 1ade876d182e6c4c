"""slo-controller-config: parsing, merge semantics, keep-last-good, per-node results (apis/sloconfig*)."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apis import constants as c
from apis.duration import Duration, DurationError, format_go_duration, parse_go_duration
from apis.gojson import SPEC_KEY, FieldSpec, StructKind, validate
from apis.gojson_base import Kind
from apis.gojson_collections import ListKind, MapKind
from apis.gojson_kinds import (
    AnyKind,
    BoolKind,
    DurationKind,
    ExtensionsKind,
    FloatKind,
    IntKind,
    IntOrStrKind,
    QuantityKind,
    SelectorKind,
    StrKind,
)
from apis.nodeslo import BlockCfg, IOCfg, SystemStrategy
from apis.nodeslo_defaults import (
    default_cpu_burst_strategy,
    default_resource_threshold_strategy,
)
from apis.quantity import Quantity
from apis.sloconfig import (
    ConfigKeyError,
    SLOControllerConfig,
    default_colocation_strategy,
    default_slo_controller_config,
    go_parse_float,
    node_colocation_enabled,
    node_colocation_strategy,
    node_metric_collect_policy,
    node_slo_spec,
    parse_slo_controller_config,
    ratio_label_percent,
)
from apis.sloconfig_types import (
    ColocationCfg,
    ColocationStrategy,
    CPUBurstCfg,
    CPUNormalizationCfg,
    HostApplicationCfg,
    ResourceAmplificationCfg,
    ResourceQOSCfg,
    ResourceThresholdCfg,
    SystemCfg,
)

COLOCATION = c.COLOCATION_CONFIG_KEY
THRESHOLD = c.RESOURCE_THRESHOLD_CONFIG_KEY
QOS = c.RESOURCE_QOS_CONFIG_KEY
BURST = c.CPU_BURST_CONFIG_KEY
SYSTEM = c.SYSTEM_CONFIG_KEY
HOST_APP = c.HOST_APPLICATION_CONFIG_KEY
NORMALIZATION = c.CPU_NORMALIZATION_CONFIG_KEY
AMPLIFICATION = c.RESOURCE_AMPLIFICATION_CONFIG_KEY
POOL_A = {"matchLabels": {"pool": "a"}}


def load(
    previous: SLOControllerConfig | None = None, **keys: Any
) -> tuple[SLOControllerConfig, list[ConfigKeyError]]:
    data = {k.replace("_", "-"): v if isinstance(v, str) else json.dumps(v) for k, v in keys.items()}
    return parse_slo_controller_config(data, previous)


def ok(**keys: Any) -> SLOControllerConfig:
    cfg, errors = load(**keys)
    assert errors == []
    return cfg


# --- Go durations ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "canonical", "seconds"),
    [
        ("5m", "5m0s", 300),
        ("5m0s", "5m0s", 300),
        ("1h30m", "1h30m0s", 5400),
        ("90s", "1m30s", 90),
        ("0", "0s", 0),
        ("0s", "0s", 0),
        ("2h", "2h0m0s", 7200),
        ("1.5s", "1.5s", 1.5),
        ("300ms", "300ms", 0.3),
        ("1us", "1\u00b5s", 1e-6),
        ("-1m", "-1m0s", -60),
        ("+10m", "10m0s", 600),
        ("1h0.5m", "1h0m30s", 3630),
    ],
)
def test_go_duration(text: str, canonical: str, seconds: float) -> None:
    d = Duration.parse(text)
    assert str(d) == canonical
    assert d.total_seconds() == pytest.approx(seconds)
    assert Duration.parse(str(d)) == d


@pytest.mark.parametrize(
    "text", ["", "5", "m", "5x", "1..m", ".s", "-", "5m 1s", "9223372036854775808ns", "3000000h"]
)
def test_go_duration_errors(text: str) -> None:
    with pytest.raises(DurationError):
        parse_go_duration(text)


def test_go_duration_format_edges() -> None:
    assert format_go_duration(1) == "1ns"
    assert format_go_duration(1_500) == "1.5\u00b5s"
    assert format_go_duration(-(2**63)) == "-2562047h47m16.854775808s"
    assert parse_go_duration("-9223372036854775808ns") == -(2**63)


# --- defaults ----------------------------------------------------------------------------------------------
def test_colocation_defaults_match_spec() -> None:
    assert default_colocation_strategy().to_dict() == {
        "enable": False,
        "metricAggregateDurationSeconds": 300,
        "metricReportIntervalSeconds": 60,
        "metricAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
        "metricMemoryCollectPolicy": "usageWithoutPageCache",
        "cpuReclaimThresholdPercent": 60,
        "cpuCalculatePolicy": "usage",
        "memoryReclaimThresholdPercent": 65,
        "memoryCalculatePolicy": "usage",
        "degradeTimeMinutes": 15,
        "updateTimeThresholdSeconds": 300,
        "resourceDiffThreshold": 0.1,
        "midCPUThresholdPercent": 100,
        "midMemoryThresholdPercent": 100,
        "midUnallocatedPercent": 0,
        "midStaticCPUReservedPercent": 0,
        "midStaticMemoryReservedPercent": 0,
    }
    s = default_colocation_strategy()
    assert s.mid_reclaim_mode is None and s.batch_cpu_threshold_percent is None
    assert s.batch_memory_threshold_percent is None and s.extensions is None


def test_empty_configmap_gives_every_default() -> None:
    cfg, errors = parse_slo_controller_config({}, None)
    assert errors == []
    assert cfg == default_slo_controller_config()
    assert cfg.colocation_available and not cfg.colocation_error
    assert cfg.resource_threshold.cluster_strategy == default_resource_threshold_strategy()
    assert cfg.resource_threshold.node_strategies is None
    assert cfg.cpu_burst.cluster_strategy == default_cpu_burst_strategy()
    assert cfg.system.cluster_strategy == SystemStrategy()
    assert cfg.resource_qos.cluster_strategy is not None
    assert cfg.resource_qos.cluster_strategy.to_dict() == {}
    assert cfg.host_application.to_dict() == {}
    assert cfg.cpu_normalization.to_dict() == {"enable": False}
    assert cfg.resource_amplification.to_dict() == {"enable": False}
    spec = node_slo_spec(cfg, {}, {})
    assert spec.to_dict() == {
        "resourceUsedThresholdWithBE": default_resource_threshold_strategy().to_dict(),
        "resourceQOSStrategy": {},
        "cpuBurstStrategy": default_cpu_burst_strategy().to_dict(),
        "systemStrategy": {"totalNetworkBandwidth": "0"},
        "extensions": {"Object": {}},
    }


def test_missing_configmap_is_default_with_colocation_error() -> None:
    cfg, errors = parse_slo_controller_config(None, None)
    assert errors == []
    assert cfg.colocation_error and cfg.colocation_available
    assert cfg.colocation.strategy == default_colocation_strategy()


def test_shipped_configmap() -> None:
    cfg = ok(
        colocation_config={"enable": True}, resource_threshold_config={"clusterStrategy": {"enable": True}}
    )
    assert cfg.colocation.strategy.enable is True
    threshold = cfg.resource_threshold.cluster_strategy
    assert (
        threshold is not None and threshold.enable is True and threshold.cpu_suppress_threshold_percent == 65
    )


# --- the fuller example of docs/configuration.md#the-slo-controller-config-configmap ------------------------
ILLUSTRATIVE = {
    COLOCATION: """{"enable": true, "cpuReclaimThresholdPercent": 70, "memoryCalculatePolicy": "request",
     "nodeConfigs": [{"name": "pool-a", "nodeSelector": {"matchLabels": {"pool": "a"}},
                      "memoryReclaimThresholdPercent": 80, "degradeTimeMinutes": 5}]}""",
    THRESHOLD: """{"clusterStrategy": {"enable": true, "cpuSuppressThresholdPercent": 60,
                        "memoryEvictThresholdPercent": 75},
     "nodeStrategies": [{"name": "pool-a", "nodeSelector": {"matchLabels": {"pool": "a"}},
                         "cpuSuppressPolicy": "cfsQuota"}]}""",
    BURST: '{"clusterStrategy": {"policy": "auto"}}',
    QOS: '{"clusterStrategy": {"beClass": {"resctrlQOS": {"enable": true}}}}',
}


def test_illustrative_configmap() -> None:
    cfg, errors = parse_slo_controller_config(ILLUSTRATIVE, None)
    assert errors == []
    base = default_colocation_strategy().to_dict()
    pool_a = node_colocation_strategy(cfg, {"pool": "a"}, {})
    assert pool_a.to_dict() == {
        **base,
        "enable": True,
        "cpuReclaimThresholdPercent": 70,
        "memoryReclaimThresholdPercent": 80,
        "memoryCalculatePolicy": "request",
        "degradeTimeMinutes": 5,
    }
    other = node_colocation_strategy(cfg, {"pool": "b"}, {})
    assert other.to_dict() == {
        **base,
        "enable": True,
        "cpuReclaimThresholdPercent": 70,
        "memoryCalculatePolicy": "request",
    }
    assert other == cfg.colocation.strategy

    threshold_a = node_slo_spec(cfg, {"pool": "a"}, {}).resource_used_threshold_with_be
    assert threshold_a is not None
    assert threshold_a.to_dict() == {
        "enable": True,
        "cpuSuppressThresholdPercent": 60,
        "cpuSuppressPolicy": "cfsQuota",
        "memoryEvictThresholdPercent": 75,
        "cpuEvictPolicy": "evictByRealLimit",
    }
    spec_b = node_slo_spec(cfg, {}, {})
    assert spec_b.resource_used_threshold_with_be is not None
    assert spec_b.resource_used_threshold_with_be.cpu_suppress_policy == "cpuset"
    assert spec_b.cpu_burst_strategy is not None
    assert spec_b.cpu_burst_strategy.to_dict() == {**default_cpu_burst_strategy().to_dict(), "policy": "auto"}
    assert spec_b.to_dict()["resourceQOSStrategy"] == {"beClass": {"resctrlQOS": {"enable": True}}}


# --- merge semantics -----------------------------------------------------------------------------------
def test_list_of_objects_merges_element_wise() -> None:
    cfg = ok(
        resource_qos_config={
            "clusterStrategy": {
                "cgroupRoot": {
                    "blkioQOS": {"blocks": [{"name": "a", "type": "device", "ioCfg": {"readIOPS": 1}}]}
                }
            },
            "nodeStrategies": [
                {
                    "nodeSelector": POOL_A,
                    "cgroupRoot": {"blkioQOS": {"blocks": [{"ioCfg": {"writeIOPS": 2}}]}},
                }
            ],
        }
    )
    qos = node_slo_spec(cfg, {"pool": "a"}, {}).resource_qos_strategy
    assert qos is not None and qos.cgroup_root is not None and qos.cgroup_root.blkio_qos is not None
    assert qos.cgroup_root.blkio_qos.blocks == [
        BlockCfg(name="a", type="device", io_cfg=IOCfg(read_iops=1, write_iops=2))
    ]


def test_list_takes_the_new_length() -> None:
    cfg = ok(
        resource_qos_config={
            "clusterStrategy": {"beClass": {"blkioQOS": {"blocks": [{"name": "a"}, {"name": "b"}]}}},
            "nodeStrategies": [
                {"nodeSelector": POOL_A, "beClass": {"blkioQOS": {"blocks": [{"type": "podvolume"}]}}},
                {
                    "nodeSelector": {"matchLabels": {"pool": "b"}},
                    "beClass": {"blkioQOS": {"blocks": [{}, {}, {"name": "c"}]}},
                },
            ],
        }
    )
    a = node_slo_spec(cfg, {"pool": "a"}, {}).to_dict()["resourceQOSStrategy"]["beClass"]["blkioQOS"][
        "blocks"
    ]
    assert a == [{"name": "a", "type": "podvolume", "ioCfg": {}}]
    b = node_slo_spec(cfg, {"pool": "b"}, {}).to_dict()["resourceQOSStrategy"]["beClass"]["blkioQOS"][
        "blocks"
    ]
    assert b == [{"name": "a", "ioCfg": {}}, {"name": "b", "ioCfg": {}}, {"name": "c", "ioCfg": {}}]


def test_empty_durations_keep_cluster_durations_and_new_ones_replace() -> None:
    cfg = ok(
        colocation_config={
            "metricAggregatePolicy": {"durations": ["1m", "2m"]},
            "nodeConfigs": [
                {"nodeSelector": POOL_A, "metricAggregatePolicy": {"durations": []}},
                {
                    "nodeSelector": {"matchLabels": {"pool": "b"}},
                    "metricAggregatePolicy": {"durations": ["7m"]},
                },
            ],
        }
    )
    assert cfg.colocation.strategy.to_dict()["metricAggregatePolicy"] == {"durations": ["1m0s", "2m0s"]}
    a = node_colocation_strategy(cfg, {"pool": "a"}, {}).to_dict()
    assert a["metricAggregatePolicy"] == {"durations": ["1m0s", "2m0s"]}
    b = node_colocation_strategy(cfg, {"pool": "b"}, {}).to_dict()
    assert b["metricAggregatePolicy"] == {"durations": ["7m0s"]}


def test_false_zero_and_empty_pointer_string_overwrite() -> None:
    cfg = ok(
        colocation_config={
            "enable": True,
            "nodeConfigs": [
                {
                    "nodeSelector": POOL_A,
                    "enable": False,
                    "cpuReclaimThresholdPercent": 0,
                    "cpuCalculatePolicy": "",
                }
            ],
        }
    )
    a = node_colocation_strategy(cfg, {"pool": "a"}, {})
    assert (a.enable, a.cpu_reclaim_threshold_percent, a.cpu_calculate_policy) == (False, 0, "")


def test_empty_value_string_does_not_overwrite() -> None:
    cfg = ok(
        resource_threshold_config={
            "clusterStrategy": {"cpuSuppressPolicy": "cfsQuota", "cpuEvictPolicy": "evictByAllocatable"},
            "nodeStrategies": [{"nodeSelector": POOL_A, "cpuSuppressPolicy": "", "cpuEvictPolicy": ""}],
        },
        cpu_burst_config={
            "clusterStrategy": {"policy": "auto"},
            "nodeStrategies": [{"nodeSelector": POOL_A, "policy": ""}],
        },
    )
    spec = node_slo_spec(cfg, {"pool": "a"}, {})
    assert spec.resource_used_threshold_with_be is not None and spec.cpu_burst_strategy is not None
    assert spec.resource_used_threshold_with_be.cpu_suppress_policy == "cfsQuota"
    assert spec.resource_used_threshold_with_be.cpu_evict_policy == "evictByAllocatable"
    assert spec.cpu_burst_strategy.policy == "auto"


def test_maps_gain_keys_and_replace_values_whole() -> None:
    cfg = ok(
        system_config={
            "clusterStrategy": {"schedFeatures": {"A": True, "B": True}},
            "nodeStrategies": [{"nodeSelector": POOL_A, "schedFeatures": {"B": False, "C": True}}],
        },
        cpu_normalization_config={
            "ratioModel": {"m1": {"baseRatio": 1.5, "turboEnabledRatio": 1.8}, "m2": {"baseRatio": 1.1}},
            "nodeConfigs": [{"nodeSelector": POOL_A, "ratioModel": {"m1": {"baseRatio": 2.0}}}],
        },
        resource_amplification_config={
            "resourceAmplificationRatio": {"cpu": 1.5, "memory": 1.2},
            "nodeConfigs": [{"nodeSelector": POOL_A, "resourceAmplificationRatio": {"cpu": 2.0}}],
        },
        colocation_config={
            "extensions": {"p1": {"x": 1, "y": 2}},
            "nodeConfigs": [{"nodeSelector": POOL_A, "extensions": {"p1": {"z": 3}, "p2": True}}],
        },
    )
    system = node_slo_spec(cfg, {"pool": "a"}, {}).system_strategy
    assert system is not None and system.sched_features == {"A": True, "B": False, "C": True}
    node_norm = cfg.cpu_normalization.node_configs
    assert node_norm is not None
    assert node_norm[0].strategy.to_dict()["ratioModel"] == {
        "m1": {"baseRatio": 2.0},
        "m2": {"baseRatio": 1.1},
    }
    node_amp = cfg.resource_amplification.node_configs
    assert node_amp is not None
    assert node_amp[0].strategy.resource_amplification_ratio == {"cpu": 2.0, "memory": 1.2}
    assert node_colocation_strategy(cfg, {"pool": "a"}, {}).extensions == {"p1": {"z": 3}, "p2": True}


def test_total_network_bandwidth_quirk() -> None:
    cfg = ok(
        system_config={
            "clusterStrategy": {"totalNetworkBandwidth": "10G", "minFreeKbytesFactor": 100},
            "nodeStrategies": [
                {"nodeSelector": POOL_A, "watermarkScaleFactor": 150},
                {"nodeSelector": {"matchLabels": {"pool": "b"}}, "name": "no strategy fields"},
                {"nodeSelector": {"matchLabels": {"pool": "c"}}, "totalNetworkBandwidth": "1G"},
            ],
        }
    )
    a = node_slo_spec(cfg, {"pool": "a"}, {}).system_strategy
    assert a == SystemStrategy(min_free_kbytes_factor=100, watermark_scale_factor=150)  # bandwidth "0"!
    b = node_slo_spec(cfg, {"pool": "b"}, {}).system_strategy
    assert b is not None and b.total_network_bandwidth == Quantity.parse("10G")
    cc = node_slo_spec(cfg, {"pool": "c"}, {}).system_strategy
    assert cc == SystemStrategy(min_free_kbytes_factor=100, total_network_bandwidth=Quantity.parse("1G"))


def test_network_bandwidth_annotation() -> None:
    cfg = ok(system_config={"clusterStrategy": {"totalNetworkBandwidth": "10G"}})
    spec = node_slo_spec(cfg, {}, {c.ANNOTATION_NETWORK_BANDWIDTH: "25G"})
    assert spec.to_dict()["systemStrategy"] == {"totalNetworkBandwidth": "25G"}
    bad = node_slo_spec(cfg, {}, {c.ANNOTATION_NETWORK_BANDWIDTH: "fast"})
    assert bad.system_strategy is None
    assert "systemStrategy" not in bad.to_dict()


def test_first_matching_selector_wins_nil_matches_nothing_empty_matches_all() -> None:
    cfg = ok(
        resource_threshold_config={
            "nodeStrategies": [
                {"name": "nil selector", "cpuSuppressThresholdPercent": 10},
                {"name": "a", "nodeSelector": POOL_A, "cpuSuppressThresholdPercent": 20},
                {"name": "a again", "nodeSelector": POOL_A, "cpuSuppressThresholdPercent": 30},
                {"name": "all", "nodeSelector": {}, "cpuSuppressThresholdPercent": 40},
            ]
        }
    )

    def pct(labels: dict[str, str]) -> int | None:
        t = node_slo_spec(cfg, labels, {}).resource_used_threshold_with_be
        assert t is not None
        return t.cpu_suppress_threshold_percent

    assert pct({"pool": "a"}) == 20
    assert pct({"pool": "b"}) == 40
    assert pct({}) == 40


def test_host_applications_per_node() -> None:
    cfg = ok(
        host_application_config={
            "applications": [{"name": "nginx", "qos": "LS", "priority": "koord-prod"}],
            "nodeConfigs": [
                {"name": "a", "nodeSelector": POOL_A, "applications": [{"name": "redis", "qos": "BE"}]}
            ],
        }
    )
    assert node_slo_spec(cfg, {"pool": "a"}, {}).to_dict()["hostApplications"] == [
        {"name": "redis", "qos": "BE"}
    ]
    assert node_slo_spec(cfg, {}, {}).to_dict()["hostApplications"] == [
        {"name": "nginx", "priority": "koord-prod", "qos": "LS"}
    ]


def test_extensions_start_from_old_spec() -> None:
    spec = node_slo_spec(default_slo_controller_config(), {}, {}, old_extensions={"p": {"a": 1}})
    assert spec.to_dict()["extensions"] == {"Object": {"p": {"a": 1}}}


# --- node-level colocation overrides ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "percent"),
    [
        ("0.29", 28),
        ("0.57", 56),
        ("0.5", 50),
        ("1.2", 120),
        ("0", 0),
        ("-0.1", None),
        ("abc", None),
        ("", None),
        (" 0.5", None),
        ("NaN", None),
        ("Inf", None),
        ("1e-2", 1),
        ("0x1p-1", 50),
    ],
)
def test_ratio_label_percent(text: str, percent: int | None) -> None:
    assert ratio_label_percent(text) == percent


def test_go_parse_float() -> None:
    assert go_parse_float("1.5") == 1.5
    assert go_parse_float("-Infinity") is not None
    assert go_parse_float("1_0") is None


def test_ratio_labels_and_annotation_on_node() -> None:
    cfg = ok(colocation_config={"enable": True})
    labels = {
        c.LABEL_CPU_RECLAIM_RATIO: "0.29",
        c.LABEL_MEMORY_RECLAIM_RATIO: "0.57",
        c.LABEL_MID_STATIC_CPU_RESERVED_RATIO: "-1",
        c.LABEL_MID_STATIC_MEMORY_RESERVED_RATIO: "0.1",
    }
    annotations = {
        c.ANNOTATION_NODE_COLOCATION_STRATEGY: '{"cpuReclaimThresholdPercent": 10, "degradeTimeMinutes": 3}'
    }
    s = node_colocation_strategy(cfg, labels, annotations)
    assert s.cpu_reclaim_threshold_percent == 28  # the label wins over the annotation
    assert s.memory_reclaim_threshold_percent == 56
    assert s.mid_static_cpu_reserved_percent == 0  # negative ignored
    assert s.mid_static_memory_reserved_percent == 10
    assert s.degrade_time_minutes == 3
    bad = node_colocation_strategy(
        cfg, {}, {c.ANNOTATION_NODE_COLOCATION_STRATEGY: '{"degradeTimeMinutes": "3"}'}
    )
    assert bad == cfg.colocation.strategy


def test_node_cannot_enable_colocation_when_cluster_disabled() -> None:
    off = ok(colocation_config={"enable": False, "nodeConfigs": [{"nodeSelector": POOL_A, "enable": True}]})
    assert node_colocation_strategy(off, {"pool": "a"}, {}).enable is True
    assert not node_colocation_enabled(off, {"pool": "a"}, {})
    on = ok(colocation_config={"enable": True, "nodeConfigs": [{"nodeSelector": POOL_A, "enable": False}]})
    assert node_colocation_enabled(on, {"pool": "b"}, {})
    assert not node_colocation_enabled(on, {"pool": "a"}, {})
    annotated = {c.ANNOTATION_NODE_COLOCATION_STRATEGY: '{"enable": false}'}
    assert not node_colocation_enabled(on, {}, annotated)


def test_null_list_element_is_invalid() -> None:
    cfg, errors = load(
        resource_qos_config={
            "clusterStrategy": {"beClass": {"blkioQOS": {"blocks": [None]}}},
        }
    )
    assert [(e.field, e.value, e.rejected) for e in errors] == [
        ("clusterStrategy.beClass.blkioQOS.blocks[0]", None, False)
    ]
    assert "element dropped" in str(errors[0])
    without = ok(resource_qos_config={"clusterStrategy": {"beClass": {"blkioQOS": {}}}})
    assert cfg.resource_qos == without.resource_qos


# --- NodeMetric collect policy (docs/rules/manager.md#nodemetric-one-nodemetric-per-node) -------------------
def test_node_metric_collect_policy() -> None:
    default = {
        "aggregateDurationSeconds": 300,
        "reportIntervalSeconds": 60,
        "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
        "nodeMemoryCollectPolicy": "usageWithoutPageCache",
    }
    assert node_metric_collect_policy(None).to_dict() == default
    disabled = ok(colocation_config={"metricReportIntervalSeconds": 30})
    assert node_metric_collect_policy(disabled.colocation.strategy).to_dict() == default
    enabled = ok(
        colocation_config={
            "enable": True,
            "metricAggregateDurationSeconds": 120,
            "metricReportIntervalSeconds": 30,
            "metricAggregatePolicy": {"durations": ["1h30m", "90s"]},
            "metricMemoryCollectPolicy": "usageWithPageCache",
        }
    )
    assert node_metric_collect_policy(enabled.colocation.strategy).to_dict() == {
        "aggregateDurationSeconds": 120,
        "reportIntervalSeconds": 30,
        "nodeAggregatePolicy": {"durations": ["1h30m0s", "1m30s"]},
        "nodeMemoryCollectPolicy": "usageWithPageCache",
    }
    invalid = ColocationStrategy(enable=True, metric_report_interval_seconds=0)
    assert node_metric_collect_policy(invalid).to_dict() == default


# --- keep-last-good ---------------------------------------------------------------------------------------
def test_keep_last_good_per_key() -> None:
    first = ok(
        colocation_config={"enable": True, "cpuReclaimThresholdPercent": 50},
        resource_threshold_config={"clusterStrategy": {"enable": True}},
        cpu_burst_config={"clusterStrategy": {"policy": "auto"}},
        host_application_config={"applications": [{"name": "a"}]},
    )
    second, errors = load(
        first,
        colocation_config="{not json",
        resource_threshold_config={"clusterStrategy": {"cpuSuppressThresholdPercent": "65"}},
        cpu_burst_config={"clusterStrategy": {"policy": "cpuBurstOnly"}},
        host_application_config="[]",
    )
    assert {e.key for e in errors} == {COLOCATION, THRESHOLD, HOST_APP}
    assert all(e.rejected for e in errors)
    assert second.colocation == first.colocation and second.colocation_error and second.colocation_available
    assert second.resource_threshold == first.resource_threshold
    assert second.host_application == first.host_application
    assert (
        second.cpu_burst.cluster_strategy is not None
        and second.cpu_burst.cluster_strategy.policy == "cpuBurstOnly"
    )
    # a later valid update clears the error; an absent key goes back to its default (not kept)
    third, errors = load(second, colocation_config={"enable": False})
    assert errors == [] and not third.colocation_error
    assert third.resource_threshold.cluster_strategy == default_resource_threshold_strategy()
    assert third.cpu_burst.cluster_strategy == default_cpu_burst_strategy()


def test_first_load_failures() -> None:
    cfg, errors = load(None, colocation_config="[1]", resource_threshold_config="", system_config="null")
    assert {e.key for e in errors} == {COLOCATION, THRESHOLD}
    # the cache stays unavailable (docs/configuration.md#how-a-key-is-loaded)
    assert not cfg.colocation_available and cfg.colocation_error
    assert cfg.resource_threshold.cluster_strategy == default_resource_threshold_strategy()
    assert cfg.system.cluster_strategy == SystemStrategy()  # JSON null decodes to nothing: defaults
    still, _ = load(cfg, colocation_config={"metricReportIntervalSeconds": 1.5})
    assert not still.colocation_available
    good, errors = load(still, colocation_config="")
    assert errors == [] and good.colocation_available and not good.colocation_error


def test_empty_string_is_an_error_only_for_nodeslo_keys() -> None:
    cfg, errors = load(None, colocation_config="", cpu_burst_config="")
    assert [(e.key, e.field) for e in errors] == [(BURST, "")]
    assert cfg.colocation_available and not cfg.colocation_error


def test_unknown_keys_are_kept_raw() -> None:
    cfg, errors = parse_slo_controller_config({"my-plugin-config": "{not json}", THRESHOLD: "{}"}, None)
    assert errors == []
    assert cfg.extensions == {"my-plugin-config": "{not json}"}


# --- invalid fields -------------------------------------------------------------------------------------
INVALID = [
    (COLOCATION, {"metricAggregateDurationSeconds": 0}, "metricAggregateDurationSeconds", 0),
    (COLOCATION, {"metricReportIntervalSeconds": -5}, "metricReportIntervalSeconds", -5),
    (COLOCATION, {"cpuReclaimThresholdPercent": -1}, "cpuReclaimThresholdPercent", -1),
    (COLOCATION, {"cpuReclaimThresholdPercent": 65.0}, "cpuReclaimThresholdPercent", 65.0),
    (COLOCATION, {"cpuReclaimThresholdPercent": "65"}, "cpuReclaimThresholdPercent", "65"),
    (COLOCATION, {"memoryReclaimThresholdPercent": -1}, "memoryReclaimThresholdPercent", -1),
    (COLOCATION, {"memoryCalculatePolicy": "bogus"}, "memoryCalculatePolicy", "bogus"),
    (COLOCATION, {"degradeTimeMinutes": 0}, "degradeTimeMinutes", 0),
    (COLOCATION, {"updateTimeThresholdSeconds": 0}, "updateTimeThresholdSeconds", 0),
    (COLOCATION, {"resourceDiffThreshold": 0}, "resourceDiffThreshold", 0.0),
    (COLOCATION, {"resourceDiffThreshold": "0.1"}, "resourceDiffThreshold", "0.1"),
    (COLOCATION, {"midReclaimMode": "dynamic"}, "midReclaimMode", "dynamic"),
    (COLOCATION, {"midCPUThresholdPercent": 101}, "midCPUThresholdPercent", 101),
    (COLOCATION, {"midMemoryThresholdPercent": -1}, "midMemoryThresholdPercent", -1),
    (COLOCATION, {"midUnallocatedPercent": 101}, "midUnallocatedPercent", 101),
    (COLOCATION, {"midStaticCPUReservedPercent": -1}, "midStaticCPUReservedPercent", -1),
    (COLOCATION, {"midStaticMemoryReservedPercent": -1}, "midStaticMemoryReservedPercent", -1),
    (COLOCATION, {"batchCPUThresholdPercent": -1}, "batchCPUThresholdPercent", -1),
    (COLOCATION, {"batchMemoryThresholdPercent": -1}, "batchMemoryThresholdPercent", -1),
    (COLOCATION, {"enable": "true"}, "enable", "true"),
    (
        COLOCATION,
        {"metricAggregatePolicy": {"durations": ["5 min"]}},
        "metricAggregatePolicy.durations[0]",
        "5 min",
    ),
    (COLOCATION, {"metricAggregatePolicy": {"durations": "5m"}}, "metricAggregatePolicy.durations", "5m"),
    (COLOCATION, {"nodeConfigs": {}}, "nodeConfigs", {}),
    (
        COLOCATION,
        {"nodeConfigs": [{"nodeSelector": {"matchLabels": []}}]},
        "nodeConfigs[0].nodeSelector.matchLabels",
        [],
    ),
    (COLOCATION, {"nodeConfigs": [{"degradeTimeMinutes": 1.5}]}, "nodeConfigs[0].degradeTimeMinutes", 1.5),
    (COLOCATION, ["enable"], "", ["enable"]),
    (
        THRESHOLD,
        {"clusterStrategy": {"cpuSuppressThresholdPercent": 101}},
        "clusterStrategy.cpuSuppressThresholdPercent",
        101,
    ),
    (
        THRESHOLD,
        {"clusterStrategy": {"cpuSuppressPolicy": "bogus"}},
        "clusterStrategy.cpuSuppressPolicy",
        "bogus",
    ),
    (THRESHOLD, {"clusterStrategy": {"cpuEvictPolicy": "bogus"}}, "clusterStrategy.cpuEvictPolicy", "bogus"),
    (
        THRESHOLD,
        {"clusterStrategy": {"cpuEvictTimeWindowSeconds": 0}},
        "clusterStrategy.cpuEvictTimeWindowSeconds",
        0,
    ),
    (
        THRESHOLD,
        {"clusterStrategy": {"memoryEvictLowerPercent": 80}},
        "clusterStrategy.memoryEvictThresholdPercent",
        70,
    ),
    (
        THRESHOLD,
        {"clusterStrategy": {"allocatableEvictPriorityThreshold": 8000}},
        "clusterStrategy.allocatableEvictPriorityThreshold",
        8000,
    ),
    (
        THRESHOLD,
        {"clusterStrategy": {"evictEnabledPriorityThreshold": 2**31}},
        "clusterStrategy.evictEnabledPriorityThreshold",
        2**31,
    ),
    (
        THRESHOLD,
        {"clusterStrategy": {"enable": None, "memoryEvictThresholdPercent": 1e2}},
        "clusterStrategy.memoryEvictThresholdPercent",
        100.0,
    ),
    (THRESHOLD, {"nodeStrategies": [{"nodeSelector": 3}]}, "nodeStrategies[0].nodeSelector", 3),
    (
        QOS,
        {"clusterStrategy": {"policies": {"cpuPolicy": "bogus"}}},
        "clusterStrategy.policies.cpuPolicy",
        "bogus",
    ),
    (
        QOS,
        {"clusterStrategy": {"lsrClass": {"cpuQOS": {"groupIdentity": 3}}}},
        "clusterStrategy.lsrClass.cpuQOS.groupIdentity",
        3,
    ),
    (
        QOS,
        {"clusterStrategy": {"beClass": {"memoryQOS": {"wmarkMinAdj": 51}}}},
        "clusterStrategy.beClass.memoryQOS.wmarkMinAdj",
        51,
    ),
    (
        QOS,
        {"clusterStrategy": {"beClass": {"memoryQOS": {"wmarkScalePermill": 0}}}},
        "clusterStrategy.beClass.memoryQOS.wmarkScalePermill",
        0,
    ),
    (
        QOS,
        {"clusterStrategy": {"lsClass": {"resctrlQOS": {"mbaPercent": 101}}}},
        "clusterStrategy.lsClass.resctrlQOS.mbaPercent",
        101,
    ),
    (
        QOS,
        {"clusterStrategy": {"lsClass": {"networkQOS": {"ingressLimit": 101}}}},
        "clusterStrategy.lsClass.networkQOS.ingressLimit",
        101,
    ),
    (
        QOS,
        {"clusterStrategy": {"lsClass": {"networkQOS": {"egressLimit": "lots"}}}},
        "clusterStrategy.lsClass.networkQOS.egressLimit",
        "lots",
    ),
    (
        QOS,
        {"clusterStrategy": {"cgroupRoot": {"blkioQOS": {"blocks": [{"type": "disk"}]}}}},
        "clusterStrategy.cgroupRoot.blkioQOS.blocks[0].type",
        "disk",
    ),
    (
        QOS,
        {"clusterStrategy": {"cgroupRoot": {"blkioQOS": {"blocks": [{"ioCfg": {"ioWeightPercent": 0}}]}}}},
        "clusterStrategy.cgroupRoot.blkioQOS.blocks[0].ioCfg.ioWeightPercent",
        0,
    ),
    (BURST, {"clusterStrategy": {"policy": "always"}}, "clusterStrategy.policy", "always"),
    (BURST, {"clusterStrategy": {"cpuBurstPercent": 0}}, "clusterStrategy.cpuBurstPercent", 0),
    (BURST, {"clusterStrategy": {"cfsQuotaBurstPercent": 99}}, "clusterStrategy.cfsQuotaBurstPercent", 99),
    (
        BURST,
        {"clusterStrategy": {"cfsQuotaBurstPeriodSeconds": -2}},
        "clusterStrategy.cfsQuotaBurstPeriodSeconds",
        -2,
    ),
    (
        BURST,
        {"clusterStrategy": {"sharePoolThresholdPercent": 101}},
        "clusterStrategy.sharePoolThresholdPercent",
        101,
    ),
    (SYSTEM, {"clusterStrategy": {"minFreeKbytesFactor": 0}}, "clusterStrategy.minFreeKbytesFactor", 0),
    (SYSTEM, {"clusterStrategy": {"watermarkScaleFactor": 401}}, "clusterStrategy.watermarkScaleFactor", 401),
    (SYSTEM, {"clusterStrategy": {"memcgReapBackGround": 2}}, "clusterStrategy.memcgReapBackGround", 2),
    (
        SYSTEM,
        {"clusterStrategy": {"totalNetworkBandwidth": "1 G"}},
        "clusterStrategy.totalNetworkBandwidth",
        "1 G",
    ),
    (SYSTEM, {"clusterStrategy": {"schedFeatures": {"X": "on"}}}, "clusterStrategy.schedFeatures[X]", "on"),
    (HOST_APP, {"applications": [{"name": "a", "qos": "GOLD"}]}, "applications[0].qos", "GOLD"),
    (HOST_APP, {"applications": [{"priority": "koord-gold"}]}, "applications[0].priority", "koord-gold"),
    (
        HOST_APP,
        {"nodeConfigs": [{"applications": [{"cgroupPath": {"base": "Root"}}]}]},
        "nodeConfigs[0].applications[0].cgroupPath.base",
        "Root",
    ),
    (NORMALIZATION, {"defaultRatio": 0}, "defaultRatio", 0.0),
    (NORMALIZATION, {"ratioModel": {"m": {"baseRatio": -1}}}, "ratioModel[m].baseRatio", -1.0),
    (NORMALIZATION, {"enable": 1}, "enable", 1),
    (AMPLIFICATION, {"resourceAmplificationRatio": {"cpu": 0.5}}, "resourceAmplificationRatio", {"cpu": 0.5}),
    (AMPLIFICATION, {"resourceAmplificationRatio": {"cpu": "2"}}, "resourceAmplificationRatio[cpu]", "2"),
]


# A value of the wrong JSON type cannot be decoded (upstream's unmarshal failure): the whole key is
# rejected. Every other invalid value is a rule violation of one field, repaired field by field.
TYPE_ERRORS = {
    "colocation-config:cpuReclaimThresholdPercent:65.0",
    "colocation-config:cpuReclaimThresholdPercent:'65'",
    "colocation-config:resourceDiffThreshold:'0.1'",
    "colocation-config:enable:'true'",
    "colocation-config:metricAggregatePolicy.durations[0]:'5 min'",
    "colocation-config:metricAggregatePolicy.durations:'5m'",
    "colocation-config:nodeConfigs:{}",
    "colocation-config:nodeConfigs[0].nodeSelector.matchLabels:[]",
    "colocation-config:nodeConfigs[0].degradeTimeMinutes:1.5",
    "colocation-config:doc:['enable']",
    "resource-threshold-config:clusterStrategy.evictEnabledPriorityThreshold:2147483648",
    "resource-threshold-config:clusterStrategy.memoryEvictThresholdPercent:100.0",
    "resource-threshold-config:nodeStrategies[0].nodeSelector:3",
    "system-config:clusterStrategy.totalNetworkBandwidth:'1 G'",
    "system-config:clusterStrategy.schedFeatures[X]:'on'",
    "cpu-normalization-config:enable:1",
    "resource-amplification-config:resourceAmplificationRatio[cpu]:'2'",
}
INVALID_IDS = [f"{k}:{f or 'doc'}:{v!r}" for k, _, f, v in INVALID]


def _without(doc: Any, path: str) -> Any | None:
    """``doc`` with the value at JSON ``path`` removed; ``None`` when the path is not in ``doc``."""
    out = json.loads(json.dumps(doc))
    parts = [a or b for a, b in re.findall(r"([^.\[\]]+)|\[([^\]]+)\]", path)]
    node = out
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node.get(part)
        if node is None:
            return None
    if not isinstance(node, dict) or parts[-1] not in node:
        return None
    del node[parts[-1]]
    return out


def test_type_error_rows_exist() -> None:
    assert set(INVALID_IDS) >= TYPE_ERRORS


@pytest.mark.parametrize(("key", "doc", "field", "value"), INVALID, ids=INVALID_IDS)
def test_invalid_field_is_reported(key: str, doc: Any, field: str, value: Any) -> None:
    cfg, errors = parse_slo_controller_config({key: json.dumps(doc)}, None)
    assert [(e.key, e.field, e.value) for e in errors] == [(key, field, value)]
    error = errors[0]
    text = str(error)
    assert key in text and (field or "(document)") in text and repr(value)[:50] in text
    if f"{key}:{field or 'doc'}:{value!r}" in TYPE_ERRORS:
        assert error.rejected and "key rejected, previous value kept" in text
        expected = default_slo_controller_config()
        if key == COLOCATION:
            assert not cfg.colocation_available and cfg.colocation_error
            expected = SLOControllerConfig(colocation_available=False, colocation_error=True)
        assert cfg == expected
        return
    # First load: the invalid field takes its default, i.e. the config equals the one without it.
    assert not error.rejected and "field falls back to the default" in text
    assert cfg.colocation_available and not cfg.colocation_error
    without = _without(doc, field)
    if without is None:  # an inverted pair, reported on the field the doc did not set: both defaults
        assert cfg == default_slo_controller_config()
        return
    expected, clean = parse_slo_controller_config({key: json.dumps(without)}, None)
    assert clean == []
    assert cfg == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [("{", "invalid JSON"), ('{"enable": NaN}', "NaN"), ("{} x", "invalid JSON"), (" ", "invalid JSON")],
)
def test_syntax_errors(text: str, message: str) -> None:
    _, errors = parse_slo_controller_config({THRESHOLD: text}, None)
    assert (
        len(errors) == 1
        and errors[0].field == ""
        and errors[0].value == text
        and message in errors[0].message
    )


def test_invalid_node_entry_field_takes_the_cluster_value() -> None:
    cfg, errors = load(
        colocation_config={
            "cpuReclaimThresholdPercent": 70,
            "nodeConfigs": [
                {"nodeSelector": POOL_A, "cpuReclaimThresholdPercent": -1, "degradeTimeMinutes": 3},
                {"nodeSelector": {"matchLabels": {"pool": "b"}}, "memoryCalculatePolicy": "bogus"},
            ],
        },
        resource_threshold_config={
            "nodeStrategies": [{"nodeSelector": POOL_A, "cpuSuppressThresholdPercent": 200, "enable": True}]
        },
    )
    assert [(e.key, e.field, e.value, e.rejected) for e in errors] == [
        (COLOCATION, "nodeConfigs[0].cpuReclaimThresholdPercent", -1, False),
        (COLOCATION, "nodeConfigs[1].memoryCalculatePolicy", "bogus", False),
        (THRESHOLD, "nodeStrategies[0].cpuSuppressThresholdPercent", 200, False),
    ]
    assert "field falls back to the cluster strategy: 70" in str(errors[0])
    cluster = cfg.colocation.strategy
    # The valid fields of the entry still apply; the invalid one has the cluster's value.
    assert node_colocation_strategy(cfg, {"pool": "a"}, {}) == dataclasses.replace(
        cluster, degrade_time_minutes=3
    )
    assert node_colocation_strategy(cfg, {"pool": "b"}, {}) == cluster
    assert node_slo_spec(cfg, {"pool": "a"}, {}).resource_used_threshold_with_be == dataclasses.replace(
        default_resource_threshold_strategy(), enable=True
    )


def test_unparsable_selector_never_matches() -> None:
    cfg, errors = load(
        cpu_burst_config={
            "nodeStrategies": [
                {
                    "nodeSelector": {
                        "matchExpressions": [{"key": "pool", "operator": "Equals", "values": ["a"]}]
                    },
                    "policy": "auto",
                },
                {"nodeSelector": POOL_A, "policy": "cpuBurstOnly"},
            ]
        }
    )
    assert [(e.field, e.value, e.rejected) for e in errors] == [
        ("nodeStrategies[0].nodeSelector.matchExpressions[0].operator", "Equals", False)
    ]
    assert "never matches" in str(errors[0])
    burst = node_slo_spec(cfg, {"pool": "a"}, {}).cpu_burst_strategy
    assert burst is not None and burst.policy == "cpuBurstOnly"


# --- fuzzing -----------------------------------------------------------------------------------------
KEYS = [COLOCATION, THRESHOLD, QOS, BURST, SYSTEM, HOST_APP, NORMALIZATION, AMPLIFICATION, "other-key"]
FIELD_NAMES = st.sampled_from(
    [
        "enable",
        "clusterStrategy",
        "nodeStrategies",
        "nodeConfigs",
        "nodeSelector",
        "matchLabels",
        "matchExpressions",
        "key",
        "operator",
        "values",
        "cpuReclaimThresholdPercent",
        "metricAggregatePolicy",
        "durations",
        "beClass",
        "lsrClass",
        "cgroupRoot",
        "blkioQOS",
        "blocks",
        "ioCfg",
        "cpuQOS",
        "memoryQOS",
        "networkQOS",
        "ingressLimit",
        "policy",
        "schedFeatures",
        "totalNetworkBandwidth",
        "applications",
        "qos",
        "cgroupPath",
        "ratioModel",
        "resourceAmplificationRatio",
        "extensions",
        "Object",
        "x",
    ]
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from(["5m", "In", "Exists", "auto", "10G", "LS", "0"])
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(FIELD_NAMES | st.text(max_size=5), children, max_size=5)
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(
    data=st.dictionaries(
        st.sampled_from(KEYS), JSON_VALUES.map(json.dumps) | st.text(max_size=30), max_size=6
    )
)
def test_fuzz_never_raises(data: dict[str, str]) -> None:
    cfg, errors = parse_slo_controller_config(data, None)
    assert isinstance(cfg, SLOControllerConfig)
    assert all(isinstance(e, ConfigKeyError) and e.key in data for e in errors)
    str(errors)
    again, _ = parse_slo_controller_config(data, cfg)
    assert isinstance(again, SLOControllerConfig)
    labels = {"pool": "a", c.LABEL_CPU_RECLAIM_RATIO: "0.3"}
    node_colocation_strategy(cfg, labels, {c.ANNOTATION_NODE_COLOCATION_STRATEGY: data.get(COLOCATION, "")})
    spec = node_slo_spec(cfg, labels, {c.ANNOTATION_NETWORK_BANDWIDTH: "1G"})
    json.dumps(spec.to_dict())
    node_metric_collect_policy(cfg.colocation.strategy).to_dict()


def _value_for(spec: FieldSpec | None, kind: Kind) -> st.SearchStrategy[Any]:
    """Mostly well-typed (often out-of-range) JSON for a field, sometimes arbitrary JSON."""
    typed: st.SearchStrategy[Any]
    if spec is not None and spec.enum:
        typed = st.sampled_from([*spec.enum, "", "bogus"])
    elif isinstance(kind, BoolKind):
        typed = st.booleans()
    elif isinstance(kind, IntKind):
        typed = st.integers(min_value=-30, max_value=12000)
    elif isinstance(kind, FloatKind):
        typed = st.floats(min_value=-1, max_value=5)
    elif isinstance(kind, StrKind):
        typed = st.sampled_from(["", "x", "usage", "request", "static", "usageWithPageCache"])
    elif isinstance(kind, QuantityKind):
        typed = st.sampled_from(["0", "1G", "-1", "1.5", "abc", 100])
    elif isinstance(kind, IntOrStrKind):
        typed = st.integers(min_value=-5, max_value=120) | st.sampled_from(["50M", "x", "-1"])
    elif isinstance(kind, DurationKind):
        typed = st.sampled_from(["5m", "1h30m", "bad", "0", "-1s"])
    elif isinstance(kind, ListKind):
        typed = st.lists(_value_for(None, kind.elem), max_size=3)
    elif isinstance(kind, MapKind):
        typed = st.dictionaries(st.sampled_from(["a", "b", "cpu"]), _value_for(None, kind.elem), max_size=2)
    elif isinstance(kind, StructKind):
        typed = _doc_for(kind.cls)
    elif isinstance(kind, SelectorKind):
        typed = st.sampled_from(
            [
                {},
                POOL_A,
                {"matchExpressions": [{"key": "pool", "operator": "Bad"}]},
                {"matchLabels": {"pool": "b"}},
            ]
        )
    else:
        assert isinstance(kind, (AnyKind, ExtensionsKind)), kind
        typed = JSON_VALUES
    return st.one_of(typed, typed, typed, JSON_VALUES)


def _fields(cls: type[Any]) -> dict[str, st.SearchStrategy[Any]]:
    out: dict[str, st.SearchStrategy[Any]] = {}
    for f in dataclasses.fields(cls):
        spec: FieldSpec = f.metadata[SPEC_KEY]
        if spec.inline:
            assert isinstance(spec.kind, StructKind)
            out.update(_fields(spec.kind.cls))
        else:
            out[spec.name] = _value_for(spec, spec.kind)
    return out


def _doc_for(cls: type[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=_fields(cls))


SHAPED = {
    COLOCATION: ColocationCfg,
    THRESHOLD: ResourceThresholdCfg,
    QOS: ResourceQOSCfg,
    BURST: CPUBurstCfg,
    SYSTEM: SystemCfg,
    HOST_APP: HostApplicationCfg,
    NORMALIZATION: CPUNormalizationCfg,
    AMPLIFICATION: ResourceAmplificationCfg,
}


@settings(max_examples=300, deadline=None)
@given(data=st.fixed_dictionaries({}, optional={k: _doc_for(v).map(json.dumps) for k, v in SHAPED.items()}))
def test_fuzz_schema_shaped_documents(data: dict[str, str]) -> None:
    """Well-shaped but often invalid documents: only ConfigKeyErrors, and what is kept always validates."""
    cfg, errors = parse_slo_controller_config(data, None)
    assert all(isinstance(e, ConfigKeyError) and e.key in data for e in errors)
    for attr in ("resource_threshold", "resource_qos", "cpu_burst", "system", "host_application"):
        assert validate(getattr(cfg, attr)) == []
    assert validate(cfg.colocation) == []
    assert validate(cfg.cpu_normalization) == [] and validate(cfg.resource_amplification) == []
    for labels in ({}, {"pool": "a"}, {"pool": "b"}):
        spec = node_slo_spec(cfg, labels, {c.ANNOTATION_NETWORK_BANDWIDTH: "1G"})
        assert validate(spec) == []  # the NodeSLO the manager writes always satisfies the CRD enums/bounds
        strategy = node_colocation_strategy(cfg, labels, {})
        node_metric_collect_policy(strategy).to_dict()


def test_a_document_nested_a_thousand_deep_is_a_field_error_not_a_crash() -> None:
    """Valid JSON nested far deeper than any field: the error message shows the value cut short
    (found by bench/fuzz.py: repr() of it recursed past Python's limit)."""
    # depths around what JSON itself parses: which one overflowed repr() depends on the stack's depth
    for depth in range(900, 1000):
        deep = "[" * depth + "1" + "]" * depth
        cfg, errors = parse_slo_controller_config({"colocation-config": deep})
        assert cfg is not None
        assert len(errors) == 1 and "colocation-config" in str(errors[0])
        text = str(errors[0])
        assert "must be an object" in text or "invalid JSON" in text
        assert len(text) < 600
