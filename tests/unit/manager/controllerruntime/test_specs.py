"""Pure decisions of the NodeSLO/NodeMetric controllers (manager.controllers.specs), and the exact-name
counters of manager.metrics."""

from __future__ import annotations

import json
from typing import Any

from prometheus_client import generate_latest

from apis.sloconfig import parse_slo_controller_config
from manager.controllers.specs import nodemetric_plan, nodeslo_plan
from manager.metrics import ManagerMetrics


def cfg(data: dict[str, Any]) -> Any:
    config, errors = parse_slo_controller_config({k: json.dumps(v) for k, v in data.items()})
    assert not errors
    return config


def node(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "n1", "labels": labels or {}, "annotations": annotations or {}}}


CONFIG = {
    "colocation-config": {"enable": True, "metricReportIntervalSeconds": 30},
    "resource-threshold-config": {
        "clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 60},
        "nodeStrategies": [
            {"name": "a", "nodeSelector": {"matchLabels": {"pool": "a"}}, "cpuSuppressPolicy": "cfsQuota"}
        ],
    },
}


def test_nodeslo_create_update_none_delete() -> None:
    c = cfg(CONFIG)
    plan = nodeslo_plan(c, node(), None)
    assert plan.action == "create" and plan.reason == "createNodeSLO" and plan.spec is not None
    assert plan.spec["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == 60
    old = {"metadata": {"name": "n1"}, "spec": plan.spec}
    assert nodeslo_plan(c, node(), old).action == "none"
    relabelled = nodeslo_plan(c, node({"pool": "a"}), old)
    assert relabelled.action == "update" and relabelled.spec is not None
    assert relabelled.spec["resourceUsedThresholdWithBE"]["cpuSuppressPolicy"] == "cfsQuota"
    assert nodeslo_plan(c, None, old).action == "delete"
    assert nodeslo_plan(c, None, None).action == "none"


def test_nodeslo_keeps_old_extensions_and_warns_on_bad_bandwidth() -> None:
    c = cfg(CONFIG)
    old = {"metadata": {"name": "n1"}, "spec": {"extensions": {"plugin": {"x": 1}}}}
    plan = nodeslo_plan(c, node(annotations={"node.koordinator.sh/network-bandwidth": "fast"}), old)
    assert plan.action == "update" and plan.spec is not None
    assert "plugin" in json.dumps(plan.spec["extensions"])
    assert "systemStrategy" not in plan.spec and "network-bandwidth" in plan.warning


def test_nodemetric_policy_from_colocation_or_defaults() -> None:
    c = cfg(CONFIG)
    plan = nodemetric_plan(c, node(), None)
    assert plan.action == "create" and plan.spec is not None
    assert plan.spec["metricCollectPolicy"]["reportIntervalSeconds"] == 30
    off = cfg({"colocation-config": {"enable": False, "metricReportIntervalSeconds": 30}})
    assert (nodemetric_plan(off, node(), None).spec or {})["metricCollectPolicy"][
        "reportIntervalSeconds"
    ] == 60
    old = {"metadata": {"name": "n1"}, "spec": plan.spec, "status": {"updateTime": "x"}}
    assert nodemetric_plan(c, node(), old).action == "none"
    assert nodemetric_plan(off, node(), old).action == "update"
    assert nodemetric_plan(c, None, old).action == "delete"


def test_nodemetric_keeps_old_spec_while_colocation_in_error() -> None:
    good = cfg(CONFIG)
    bad, errors = parse_slo_controller_config({"colocation-config": "{broken"}, good)
    assert errors and bad.colocation_error
    old = {"metadata": {"name": "n1"}, "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 7}}}
    assert nodemetric_plan(bad, node(), old).action == "none"
    assert nodemetric_plan(bad, node(), None).action == "create"


def test_upstream_counters_keep_their_exact_names() -> None:
    m = ManagerMetrics()
    m.nodeslo_reconcile.inc(status="succeeded", reason="createNodeSLO")
    m.nodeslo_reconcile.inc(status="succeeded", reason="createNodeSLO")
    text = generate_latest(m.registry).decode()
    assert 'slo_controller_nodeslo_reconcile_count{reason="createNodeSLO",status="succeeded"} 2.0' in text
    labels = {"status": "succeeded", "reason": "createNodeSLO"}
    assert m.registry.get_sample_value("slo_controller_nodeslo_reconcile_count", labels) == 2.0
    assert m.nodeslo_reconcile.value(**labels) == 2.0


def test_nodeslo_server_defaults_are_not_a_difference() -> None:
    # The CRD defaults networkQOS limits (100) and requests (0): the stored NodeSLO carries them though
    # the rendered spec does not, and that alone must not cause an update on every reconcile.
    c = cfg({"resource-qos-config": {"clusterStrategy": {"lsClass": {"networkQOS": {"enable": True}}}}})
    plan = nodeslo_plan(c, node(), None)
    assert plan.spec is not None
    assert plan.spec["resourceQOSStrategy"]["lsClass"]["networkQOS"] == {"enable": True}
    stored = json.loads(json.dumps(plan.spec))
    stored["resourceQOSStrategy"]["lsClass"]["networkQOS"].update(
        ingressRequest=0, ingressLimit=100, egressRequest=0, egressLimit=100
    )
    assert nodeslo_plan(c, node(), {"metadata": {"name": "n1"}, "spec": stored}).action == "none"
    # A stored value that differs from the default is a real difference.
    stored["resourceQOSStrategy"]["lsClass"]["networkQOS"]["ingressLimit"] = 50
    assert nodeslo_plan(c, node(), {"metadata": {"name": "n1"}, "spec": stored}).action == "update"
