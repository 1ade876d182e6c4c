"""Upstream's own slo-controller-config ConfigMaps (chart v1.8.0's, and the one upstream's e2e tests
apply; vendored under tests/data/upstream) through koord-manager's controllers on the real API server:
every key applies (batch resources appear, the NodeSLO is rendered, no config error), and the NodeSLO
the manager writes equals the one `koord simulate` (kind NodeSLO) reports for the same node. A config
with "" in its enum fields does not switch colocation off."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from apis.constants import BATCH_CPU, BATCH_MEMORY
from koord.simulate import simulate_scenario
from tests.integration.manager.conftest import Harness, wait_for
from tests.integration.manager.test_noderesource import _allocatable, _node, _pods, _set_metric, _time

pytestmark = pytest.mark.apiserver

UPSTREAM = sorted(
    (Path(__file__).resolve().parents[2] / "data" / "upstream").glob("*/slo-controller-config.yaml")
)


def _apply_and_check(h: Harness, data: dict[str, str]) -> dict[str, Any]:
    h.set_config(data)
    node = _node(h)
    h.core.patch_node(node, {"metadata": {"labels": {"pool": "a"}}})
    _pods(h, node)
    wait_for(lambda: h.nodemetric(node), 30, "the NodeMetric controller to create the NodeMetric")
    _set_metric(h, node, "1500m", _time())
    # The worked example of docs/rules (default reclaim thresholds): 10700 milli-cores.
    wait_for(lambda: _allocatable(h, node).get(BATCH_CPU) == "10700", 30, "batch resources")
    assert BATCH_MEMORY in _allocatable(h, node)

    expected = simulate_scenario(
        {"kind": "NodeSLO", "configMap": {"data": data}, "node": h.core.read_node(node).to_dict()}
    )
    assert expected["configErrors"] == []
    spec = wait_for(
        lambda: ((h.nodeslo(node) or {}).get("spec") == expected["spec"]) and h.nodeslo(node),
        30,
        "the NodeSLO koord simulate reports",
    )["spec"]
    assert h.config_events("SLOCfgFieldInvalid") == []
    for key in data:
        assert h.sample("koord_manager_config_errors_total", key=key) == 0
    cfg = h.config.current()
    assert cfg is not None and cfg.colocation_available and not cfg.colocation_error
    return dict(spec)


@pytest.mark.parametrize("path", UPSTREAM, ids=[p.parent.name for p in UPSTREAM])
def test_upstream_configmap_applies_and_matches_simulate(harness: Harness, path: Path) -> None:
    cm = yaml.safe_load(path.read_text())
    spec = _apply_and_check(harness, {str(k): str(v) for k, v in cm["data"].items()})
    enable = json.loads(cm["data"]["resource-threshold-config"])["clusterStrategy"]["enable"]
    assert spec["resourceUsedThresholdWithBE"]["enable"] is enable


def test_empty_enum_strings_do_not_switch_colocation_off(harness: Harness) -> None:
    colocation = {"enable": True, "midReclaimMode": "", "memoryCalculatePolicy": "", "cpuCalculatePolicy": ""}
    data = {
        "colocation-config": json.dumps(colocation),
        "resource-threshold-config": json.dumps(
            {"clusterStrategy": {"enable": True, "cpuSuppressPolicy": ""}}
        ),
        "cpu-burst-config": json.dumps({"clusterStrategy": {"policy": ""}}),
        "resource-qos-config": json.dumps(
            {"clusterStrategy": {"policies": {"cpuPolicy": "", "netQOSPolicy": ""}}}
        ),
    }
    spec = _apply_and_check(harness, data)
    assert spec["cpuBurstStrategy"]["policy"] == "none"
    # Upstream writes the pointer strings as given ("" = the default policy, as its koordlet reads it);
    # the API server must store them (build-kube.sh keeps 1.20's handling of empty strings).
    assert spec["resourceQOSStrategy"]["policies"] == {"cpuPolicy": "", "netQOSPolicy": ""}
