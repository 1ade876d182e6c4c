"""Every tests/scenarios/nodeslo/*.json through `koord.simulate.simulate_file` (kind NodeSLO); only the
keys present in `expect` are compared (expected specs are worked out by hand from the documented
defaults, see each file's description). Also: bad scenario input is named, and the vendored upstream
ConfigMaps render without a single config error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from koord.simulate import ScenarioError, simulate_file, simulate_scenario

TESTS = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((TESTS / "scenarios" / "nodeslo").glob("*.json"))
UPSTREAM = sorted((TESTS / "data" / "upstream").glob("*/slo-controller-config.yaml"))


def test_there_are_enough_scenarios() -> None:
    assert len(SCENARIOS) >= 12


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path) -> None:
    scenario: dict[str, Any] = json.loads(path.read_text())
    assert scenario["kind"] == "NodeSLO"
    assert scenario["expect"], "a scenario must expect something"
    result = simulate_file(str(path))
    for key, expected in scenario["expect"].items():
        assert result[key] == expected, f"{key}: got {result[key]!r}, expected {expected!r}"


@pytest.mark.parametrize(
    ("scenario", "message"),
    [
        ({"kind": "NodeSLO", "node": {}}, "configMap"),
        ({"kind": "NodeSLO", "configMap": {"data": []}, "node": {}}, "configMap.data"),
        ({"kind": "NodeSLO", "configMap": {"data": {"cpu-burst-config": 3}}, "node": {}}, "cpu-burst-config"),
        ({"kind": "NodeSLO", "configMap": {"data": {}}, "node": "n1"}, "node"),
    ],
)
def test_bad_input_is_named(scenario: dict[str, Any], message: str) -> None:
    with pytest.raises((ScenarioError, ValueError), match=message):
        simulate_scenario(scenario)


def test_inline_json_objects_equal_json_strings() -> None:
    doc = {"clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 55}}
    node = {"metadata": {"name": "n1"}}
    as_text = simulate_scenario(
        {
            "kind": "NodeSLO",
            "configMap": {"data": {"resource-threshold-config": json.dumps(doc)}},
            "node": node,
        }
    )
    inline = simulate_scenario(
        {"kind": "NodeSLO", "configMap": {"data": {"resource-threshold-config": doc}}, "node": node}
    )
    assert as_text == inline
    assert as_text["spec"]["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == 55


def test_vendored_upstream_configs_exist() -> None:
    assert {p.parent.name for p in UPSTREAM} >= {"chart-v1.8.0", "koordinator-e2e"}


@pytest.mark.parametrize("path", UPSTREAM, ids=[p.parent.name for p in UPSTREAM])
def test_upstream_config_applies_without_errors(path: Path) -> None:
    cm = yaml.safe_load(path.read_text())
    result = simulate_scenario({"kind": "NodeSLO", "configMap": cm, "node": {"metadata": {"name": "n1"}}})
    assert result["configErrors"] == []
    assert (
        result["spec"]["resourceUsedThresholdWithBE"]["enable"]
        is json.loads(cm["data"]["resource-threshold-config"])["clusterStrategy"]["enable"]
    )
