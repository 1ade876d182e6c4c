"""The config, NodeSLO and NodeMetric controllers against the real API server: ConfigMap edits reach
every node's NodeSLO and NodeMetric, a broken key keeps the previous values and raises a Warning Event
and the error metrics, nodes created/deleted create/delete their objects, node selectors render per
node (the fuller example of docs/configuration.md#the-slo-controller-config-configmap)."""

from __future__ import annotations

from typing import Any

import pytest

from apis.constants import NODE_SLO_KIND, NODE_SLO_PLURAL
from apis.sloconfig import node_colocation_strategy
from tests.integration.manager.conftest import Harness, wait_for

pytestmark = pytest.mark.apiserver

FULLER_EXAMPLE: dict[str, Any] = {
    "colocation-config": {
        "enable": True, "cpuReclaimThresholdPercent": 70, "memoryCalculatePolicy": "request",
        "nodeConfigs": [{"name": "pool-a", "nodeSelector": {"matchLabels": {"pool": "a"}},
                         "memoryReclaimThresholdPercent": 80, "degradeTimeMinutes": 5}],
    },
    "resource-threshold-config": {
        "clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 60,
                            "memoryEvictThresholdPercent": 75},
        "nodeStrategies": [{"name": "pool-a", "nodeSelector": {"matchLabels": {"pool": "a"}},
                            "cpuSuppressPolicy": "cfsQuota"}],
    },
    "cpu-burst-config": {"clusterStrategy": {"policy": "auto"}},
    "resource-qos-config": {"clusterStrategy": {"beClass": {"resctrlQOS": {"enable": True}}}},
}  # fmt: skip


def threshold(h: Harness, node: str) -> dict[str, Any]:
    return h.nodeslo_part(node, "resourceUsedThresholdWithBE")


def test_configmap_edit_flows_to_nodeslo_and_nodemetric(harness: Harness) -> None:
    h = harness
    h.set_config({
        "colocation-config": {"enable": True, "metricReportIntervalSeconds": 30},
        "resource-threshold-config": {"clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 60}},
    })  # fmt: skip
    node = h.create_node("a")
    wait_for(lambda: threshold(h, node).get("cpuSuppressThresholdPercent") == 60, what="first NodeSLO")
    wait_for(lambda: h.collect_policy(node).get("reportIntervalSeconds") == 30, what="first NodeMetric")
    policy = h.collect_policy(node)
    assert policy["aggregateDurationSeconds"] == 300
    assert policy["nodeAggregatePolicy"]["durations"] == ["5m0s", "10m0s", "30m0s"]
    assert (h.nodemetric(node) or {}).get("status", {}) == {}

    h.set_config({
        "colocation-config": {"enable": True, "metricReportIntervalSeconds": 20},
        "resource-threshold-config": {"clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 55}},
    })  # fmt: skip
    wait_for(lambda: threshold(h, node).get("cpuSuppressThresholdPercent") == 55, what="edited NodeSLO")
    wait_for(lambda: h.collect_policy(node).get("reportIntervalSeconds") == 20, what="edited NodeMetric")

    # colocation disabled → the NodeMetric falls back to the default collect policy
    h.set_config({"colocation-config": {"enable": False, "metricReportIntervalSeconds": 20}})
    wait_for(lambda: h.collect_policy(node).get("reportIntervalSeconds") == 60, what="default policy")
    # the threshold key is gone → default threshold strategy (enable false, 65 %)
    wait_for(lambda: threshold(h, node).get("cpuSuppressThresholdPercent") == 65, what="default threshold")
    # the counters move just after the write the API shows, so wait for them rather than read them once
    wait_for(
        lambda: (
            h.sample("slo_controller_nodeslo_reconcile_count", status="succeeded", reason="updateNodeSLO")
            >= 2
        ),
        what="two NodeSLO updates counted",
    )
    assert (
        h.sample("slo_controller_nodemetric_reconcile_count", status="succeeded", reason="createNodeMetric")
        == 1
    )
    wait_for(
        lambda: h.sample("koord_manager_reconcile_total", controller="nodeslo", result="success") >= 3,
        what="three NodeSLO reconciles counted",
    )


def test_broken_key_keeps_previous_values_and_warns(harness: Harness) -> None:
    h = harness
    good = {
        "colocation-config": {"enable": True, "metricReportIntervalSeconds": 30},
        "resource-threshold-config": {"clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 60}},
        "cpu-burst-config": {"clusterStrategy": {"policy": "none"}},
    }
    h.set_config(good)
    node = h.create_node("a")
    wait_for(lambda: threshold(h, node).get("cpuSuppressThresholdPercent") == 60, what="NodeSLO")
    wait_for(lambda: h.collect_policy(node).get("reportIntervalSeconds") == 30, what="NodeMetric")

    # A broken threshold key next to a valid edit of another key: the edit applies, the broken key keeps
    # its last good value, a Warning Event names it, the metrics count it.
    h.set_config({**good, "resource-threshold-config": "{not json",
                  "cpu-burst-config": {"clusterStrategy": {"policy": "auto"}}})  # fmt: skip
    burst = lambda: ((h.nodeslo(node) or {}).get("spec") or {}).get("cpuBurstStrategy") or {}  # noqa: E731
    wait_for(lambda: burst().get("policy") == "auto", what="valid key applied")
    events = wait_for(lambda: h.config_events("SLOCfgUnmarshalFailed"), what="Warning Event")
    assert events[0].type == "Warning"
    assert "resource-threshold-config" in events[0].message
    assert events[0].involved_object.kind == "ConfigMap"
    assert threshold(h, node).get("cpuSuppressThresholdPercent") == 60
    key = "resource-threshold-config"
    assert h.sample("koord_manager_config_errors_total", key=key) >= 1
    assert h.sample("koord_manager_config_last_error", key=key) == 1
    assert h.sample("koord_manager_config_last_error", key="cpu-burst-config") == 0

    # A broken colocation key: NodeMetric keeps its spec, ColocationCfgUnmarshalFailed is raised.
    h.set_config({**good, "colocation-config": '{"enable": "yes"'})
    wait_for(lambda: h.config_events("ColocationCfgUnmarshalFailed"), what="colocation Warning Event")
    assert h.collect_policy(node).get("reportIntervalSeconds") == 30
    assert h.sample("koord_manager_config_last_error", key="colocation-config") == 1
    cfg = h.config.current()
    assert (
        cfg is not None
        and cfg.colocation_error
        and cfg.colocation.strategy.metric_report_interval_seconds == 30
    )

    # Fixed again: the error gauge drops, the values flow.
    h.set_config(
        {**good, "resource-threshold-config": {"clusterStrategy": {"cpuSuppressThresholdPercent": 50}}}
    )
    wait_for(lambda: threshold(h, node).get("cpuSuppressThresholdPercent") == 50, what="fixed key")
    assert h.sample("koord_manager_config_last_error", key=key) == 0
    assert h.sample("koord_manager_config_last_error", key="colocation-config") == 0


def test_nodes_created_and_deleted_create_and_delete_their_objects(harness: Harness) -> None:
    h = harness
    h.set_config({"colocation-config": {"enable": True}})
    a, b = h.create_node("a"), h.create_node("b")
    for n in (a, b):
        wait_for(lambda n=n: h.nodeslo(n), what=f"NodeSLO {n}")
        wait_for(lambda n=n: h.nodemetric(n), what=f"NodeMetric {n}")
    h.core.delete_node(a)
    wait_for(lambda: h.nodeslo(a) is None and h.nodemetric(a) is None, what="objects deleted with node")
    assert h.nodeslo(b) is not None and h.nodemetric(b) is not None
    counted = {
        ("nodeslo", "createNodeSLO"): 2.0,
        ("nodeslo", "deleteNodeSLO"): 1.0,
        ("nodemetric", "deleteNodeMetric"): 1.0,
    }
    # counters move just after the writes the API shows: wait until each reaches its exact count
    for (kind, reason), want in counted.items():
        name = f"slo_controller_{kind}_reconcile_count"
        wait_for(lambda n=name, r=reason, w=want: h.sample(n, status="succeeded", reason=r) == w, what=reason)

    # An orphan NodeSLO (no such node) is deleted; extensions of an existing NodeSLO survive updates.
    orphan = h.node_name("orphan")
    h.create_cr(NODE_SLO_PLURAL, NODE_SLO_KIND, orphan, {})
    wait_for(lambda: h.nodeslo(orphan) is None, what="orphan NodeSLO deleted")

    # The NodeSLO's spec is put back when someone edits it.
    slo = h.nodeslo(b) or {}
    slo["spec"]["resourceUsedThresholdWithBE"] = {"enable": True, "cpuSuppressThresholdPercent": 1}
    h.custom.replace_cluster_custom_object("slo.koordinator.sh", "v1alpha1", NODE_SLO_PLURAL, b, slo)
    wait_for(lambda: threshold(h, b).get("cpuSuppressThresholdPercent") == 65, what="spec restored")


def test_node_selector_overrides_render_per_node(harness: Harness) -> None:
    h = harness
    data = dict(FULLER_EXAMPLE)
    colocation = dict(data["colocation-config"])
    colocation["nodeConfigs"] = [dict(colocation["nodeConfigs"][0], metricReportIntervalSeconds=15)]
    data["colocation-config"] = colocation
    h.set_config(data)
    a = h.create_node("a", {"pool": "a"})
    b = h.create_node("b", {"pool": "b"})
    wait_for(lambda: threshold(h, a).get("cpuSuppressPolicy") == "cfsQuota", what="pool-a threshold")
    wait_for(lambda: threshold(h, b).get("cpuSuppressPolicy") == "cpuset", what="pool-b threshold")
    keys = ("enable", "cpuSuppressThresholdPercent", "memoryEvictThresholdPercent")
    assert [threshold(h, a)[k] for k in keys] == [True, 60, 75]
    for n in (a, b):
        spec = (h.nodeslo(n) or {})["spec"]
        assert spec["cpuBurstStrategy"]["policy"] == "auto"
        assert spec["resourceQOSStrategy"]["beClass"]["resctrlQOS"]["enable"] is True
    wait_for(lambda: h.collect_policy(a).get("reportIntervalSeconds") == 15, what="pool-a NodeMetric")
    wait_for(lambda: h.collect_policy(b).get("reportIntervalSeconds") == 60, what="pool-b NodeMetric")

    cfg = h.config.current()
    assert cfg is not None
    strategy = node_colocation_strategy(cfg, {"pool": "a"}, {})
    assert (strategy.cpu_reclaim_threshold_percent, strategy.memory_reclaim_threshold_percent) == (70, 80)
    assert (strategy.memory_calculate_policy, strategy.degrade_time_minutes) == ("request", 5)

    # Relabelling a node re-renders it.
    h.core.patch_node(b, {"metadata": {"labels": {"pool": "a"}}})
    wait_for(lambda: threshold(h, b).get("cpuSuppressPolicy") == "cfsQuota", what="relabelled node")
    wait_for(lambda: h.collect_policy(b).get("reportIntervalSeconds") == 15, what="relabelled NodeMetric")
