"""slo-controller-config validated per field, on the real API server: "" in an enum field is unset
and does not switch colocation off; an invalid field keeps its last good (or default) value while the
valid fields of the same key reach the NodeSLO and NodeMetric; a Warning Event names key, field and
value and the error counter counts it (docs/configuration.md, "Invalid values")."""

from __future__ import annotations

import pytest

from tests.integration.manager.conftest import Harness, wait_for

pytestmark = pytest.mark.apiserver


def test_empty_enum_strings_keep_colocation_on_first_load(harness: Harness) -> None:
    h = harness
    h.set_config({
        "colocation-config": {"enable": True, "metricReportIntervalSeconds": 30, "midReclaimMode": "",
                              "memoryCalculatePolicy": "", "cpuCalculatePolicy": "",
                              "metricMemoryCollectPolicy": ""},
        "resource-threshold-config": {"clusterStrategy": {"enable": True, "cpuSuppressPolicy": ""}},
    })  # fmt: skip
    node = h.create_node("a")
    policy = wait_for(
        lambda: h.collect_policy(node).get("reportIntervalSeconds") == 30 and h.collect_policy(node),
        what="NodeMetric from the colocation config",
    )
    assert policy["nodeMemoryCollectPolicy"] == "usageWithoutPageCache"
    wait_for(
        lambda: h.nodeslo_part(node, "resourceUsedThresholdWithBE").get("enable") is True, what="NodeSLO"
    )
    cfg = h.config.current()
    assert cfg is not None and cfg.colocation_available and not cfg.colocation_error
    assert h.sample("koord_manager_config_errors_total", key="colocation-config") == 0
    assert h.config_events("SLOCfgFieldInvalid") == []
    assert h.config_events("ColocationCfgUnmarshalFailed") == []


def test_invalid_field_keeps_last_good_value_valid_fields_apply(harness: Harness) -> None:
    h = harness
    h.set_config({
        "colocation-config": {"enable": True, "metricReportIntervalSeconds": 30},
        "resource-threshold-config": {"clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 60}},
    })  # fmt: skip
    node = h.create_node("a")
    threshold = lambda: h.nodeslo_part(node, "resourceUsedThresholdWithBE")  # noqa: E731
    wait_for(lambda: threshold().get("cpuSuppressThresholdPercent") == 60, what="first NodeSLO")
    wait_for(lambda: h.collect_policy(node).get("reportIntervalSeconds") == 30, what="first NodeMetric")

    # One invalid field next to valid edits of the same key, in both kinds of key.
    h.set_config({
        "colocation-config": {"enable": True, "metricReportIntervalSeconds": -5,
                              "metricAggregateDurationSeconds": 120},
        "resource-threshold-config": {"clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 150,
                                                          "memoryEvictThresholdPercent": 80}},
    })  # fmt: skip
    wait_for(lambda: threshold().get("memoryEvictThresholdPercent") == 80, what="valid field applied")
    assert threshold().get("cpuSuppressThresholdPercent") == 60  # its last good value
    wait_for(
        lambda: h.collect_policy(node).get("aggregateDurationSeconds") == 120, what="valid colocation field"
    )
    assert h.collect_policy(node).get("reportIntervalSeconds") == 30

    field_events = lambda: h.config_events("SLOCfgFieldInvalid")  # noqa: E731
    events = wait_for(lambda: len(field_events()) >= 2 and field_events(), what="a Warning Event per key")
    messages = " | ".join(e.message for e in events)
    assert all(e.type == "Warning" and e.involved_object.kind == "ConfigMap" for e in events)
    assert (
        "resource-threshold-config" in messages and "clusterStrategy.cpuSuppressThresholdPercent" in messages
    )
    assert "150" in messages and "last good value: 60" in messages
    assert "colocation-config" in messages and "metricReportIntervalSeconds" in messages and "-5" in messages
    for key in ("resource-threshold-config", "colocation-config"):
        assert h.sample("koord_manager_config_errors_total", key=key) >= 1
        assert h.sample("koord_manager_config_last_error", key=key) == 0  # the key itself was accepted
    cfg = h.config.current()
    assert cfg is not None and not cfg.colocation_error


def test_invalid_field_on_first_load_takes_the_default(harness: Harness) -> None:
    h = harness
    h.set_config({
        "cpu-burst-config": {"clusterStrategy": {"policy": "auto", "cfsQuotaBurstPercent": 50}},
        "colocation-config": {"enable": True, "degradeTimeMinutes": 0, "metricReportIntervalSeconds": 20},
    })  # fmt: skip
    node = h.create_node("a")
    burst = wait_for(lambda: h.nodeslo_part(node, "cpuBurstStrategy").get("policy") == "auto"
                     and h.nodeslo_part(node, "cpuBurstStrategy"), what="NodeSLO")  # fmt: skip
    assert burst["cfsQuotaBurstPercent"] == 300  # the default, as 50 is below 100
    wait_for(lambda: h.collect_policy(node).get("reportIntervalSeconds") == 20, what="NodeMetric")
    cfg = h.config.current()
    assert cfg is not None and cfg.colocation.strategy.degrade_time_minutes == 15
    events = wait_for(lambda: h.config_events("SLOCfgFieldInvalid"), what="Warning Event")
    # The ConfigMap may first be seen missing (defaults loaded): then the defaults are the last good values.
    messages = " | ".join(e.message for e in events)
    assert "degradeTimeMinutes" in messages and "value 0" in messages and "falls back to the" in messages
