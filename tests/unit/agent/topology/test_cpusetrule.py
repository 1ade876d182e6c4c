"""The container cpuset rule (docs/rules/koordlet-cpuset.md#container-cpuset), the CFS-quota rule
(#cfs-quota), the resource-status reader (#resource-status) and the ``containerCPUSet`` scenarios
(tests/scenarios/cpuset/koordlet-*.json, expected values worked out by hand in each description)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.topology.cpusetrule import (
    ContainerCPUSetInputError,
    CPUSetRule,
    cfs_quota_unset,
    container_cpuset,
    cpuset_cpus,
    simulate_container_cpuset,
)
from apis.numa import parse_resource_status

TESTS = Path(__file__).resolve().parents[3]
SCENARIOS = sorted((TESTS / "scenarios" / "cpuset").glob("koordlet-*.json"))
RS = "scheduling.koordinator.sh/resource-status"
QOS = "koordinator.sh/qosClass"
RULE = CPUSetRule(
    ({"socket": 0, "node": 0, "cpuset": "0-1"}, {"socket": 0, "node": 1, "cpuset": "4-5"}),
    ({"socket": 0, "node": 0, "cpuset": "0-3"}, {"socket": 0, "node": 1, "cpuset": "4-7"}),
    "none",
    "",
)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path) -> None:
    scenario: dict[str, Any] = json.loads(path.read_text())
    assert (scenario["kind"], scenario["operation"]) == ("CPUSet", "containerCPUSet")
    assert scenario["source"].startswith("docs/rules/koordlet-cpuset.md#")
    before = json.dumps(scenario, sort_keys=True)
    assert simulate_container_cpuset(scenario) == scenario["expect"]
    assert json.dumps(scenario, sort_keys=True) == before


def test_enough_scenarios_and_every_result_shape() -> None:
    loaded = [json.loads(p.read_text()) for p in SCENARIOS]
    assert len(loaded) >= 20
    shapes = {json.dumps(c) if c in (None, "") else "set" for c in (s["expect"]["cpuset"] for s in loaded)}
    assert shapes == {"null", '""', "set"}
    assert any(s["expect"]["error"] for s in loaded)


def ann(status: Any) -> dict[str, str]:
    return {RS: status if isinstance(status, str) else json.dumps(status)}


def rule_cpuset(labels: dict[str, str], status: Any, parent: str, rule: CPUSetRule | None = RULE,
                be: bool = False) -> str | None:  # fmt: skip
    return container_cpuset(labels, ann(status), parent, rule, be_cpu_manager=be)


def test_branch_order() -> None:
    burst, best = "kubepods/burstable/p/c/", "kubepods/besteffort/p/c/"
    numa = {"numaNodeResources": [{"node": 1, "resources": {"cpu": "1"}}]}
    assert rule_cpuset({QOS: "BE"}, {"cpuset": "9"}, best) == "9"
    assert rule_cpuset({QOS: "LS"}, numa, burst) == "4-5"
    assert rule_cpuset({QOS: "BE"}, numa, best, be=True) == "4-7"
    assert rule_cpuset({QOS: "BE"}, numa, best, be=False) == ""
    assert rule_cpuset({QOS: "BE"}, numa, burst, be=False) == "0-1,4-5"
    system = CPUSetRule(RULE.share_pools, RULE.be_share_pools, "static", "6")
    assert rule_cpuset({QOS: "SYSTEM"}, {}, best, system) == "6"
    assert rule_cpuset({QOS: "LS"}, {}, best, system) == "0-1,4-5"
    assert rule_cpuset({}, {}, best, system) == ""
    assert rule_cpuset({}, {}, burst, system) is None
    assert rule_cpuset({}, {}, burst) == "0-1,4-5"
    assert rule_cpuset({QOS: "LS"}, {}, burst, None) is None


def test_pools_are_joined_as_written() -> None:
    rule = CPUSetRule(({"socket": 0, "node": 0, "cpuset": ""}, {"socket": 0, "node": 1, "cpuset": "5,4"}))
    assert rule_cpuset({QOS: "LS"}, {}, "x", rule) == ",5,4"
    assert cpuset_cpus(",5,4") == {4, 5}
    assert cpuset_cpus("") == frozenset()


def test_rule_error_on_undecodable_status() -> None:
    with pytest.raises(ValueError):
        rule_cpuset({QOS: "LS"}, "[]", "x")


@pytest.mark.parametrize(
    ("text", "cpuset", "nodes"),
    [
        ("null", "", ()),
        ('{"cpuset": null, "numaNodeResources": null}', "", ()),
        ('{"cpuset": "1", "cpuset": "2", "other": [1]}', "2", ()),
        ('{"CPUSET": "3"}', "3", ()),
        ('{"numaNodeResources": [null, {"Node": 2}]}', "", (0, 2)),
    ],
)
def test_resource_status_decodes_as_go(text: str, cpuset: str, nodes: tuple[int, ...]) -> None:
    status = parse_resource_status({RS: text})
    assert status.cpuset == cpuset
    assert tuple(e.node for e in status.numa_node_resources) == nodes


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("", "invalid JSON"),
        ("NaN", "invalid JSON"),
        ("[]", "expected a JSON object"),
        ('{"cpuset": 1}', "cpuset"),
        ('{"numaNodeResources": {}}', "numaNodeResources"),
        ('{"numaNodeResources": [1]}', "numaNodeResources[0]"),
        ('{"numaNodeResources": [{"node": "1"}]}', "numaNodeResources[0].node"),
        ('{"numaNodeResources": [{"node": 2147483648}]}', "node: expected a 32-bit integer"),
        ('{"numaNodeResources": [{"node": 0, "resources": []}]}', "resources"),
        ('{"numaNodeResources": [{"node": 0, "resources": {"cpu": "x"}}]}', "resources['cpu']"),
        ('{"numaNodeResources": [{"node": 0, "resources": {"cpu": true}}]}', "resources['cpu']"),
    ],
)
def test_resource_status_errors_name_the_part(text: str, where: str) -> None:
    with pytest.raises(ValueError, match=None) as err:
        parse_resource_status({RS: text})
    assert where in str(err.value)


def test_missing_annotation_is_empty_status() -> None:
    assert parse_resource_status({}).cpuset == ""
    assert parse_resource_status(None).numa_node_resources == ()


@pytest.mark.parametrize(
    ("labels", "status", "unset"),
    [
        ({QOS: "LSR"}, {"cpuset": "0-1"}, True),
        ({QOS: "LSE"}, {"cpuset": "0-1"}, True),
        ({}, {"cpuset": "0-1"}, True),
        ({QOS: "LS"}, {"cpuset": "0-1"}, False),
        ({QOS: "BE"}, {"cpuset": "0-1"}, False),
        ({QOS: "LSR"}, {"numaNodeResources": [{"node": 0, "resources": {"cpu": "1"}}]}, False),
        ({QOS: "LSR"}, "{bad", False),
    ],
)
def test_cfs_quota_unset(labels: dict[str, str], status: Any, unset: bool) -> None:
    assert cfs_quota_unset(labels, ann(status)) is unset


BASE: dict[str, Any] = {"kind": "CPUSet", "operation": "containerCPUSet", "cgroupParent": "x"}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"rule": []}, "rule=[]"),
        ({"rule": {"pools": []}}, "rule.pools"),
        ({"rule": {"sharePools": {}}}, "rule.sharePools={}"),
        ({"rule": {"sharePools": [{"node": "0"}]}}, "rule.sharePools[0].node='0'"),
        ({"rule": {"sharePools": [{"cpuset": "x"}]}}, "rule.sharePools[0].cpuset='x'"),
        ({"rule": {"beSharePools": [{"socket": True}]}}, "rule.beSharePools[0].socket=True"),
        ({"rule": {"kubeletCPUManagerPolicy": {"policy": 1}}}, "rule.kubeletCPUManagerPolicy.policy=1"),
        ({"rule": {"systemQOSCPUSet": "1-x"}}, "rule.systemQOSCPUSet='1-x'"),
        ({"features": {"BECPUManager": "yes"}}, "features.BECPUManager='yes'"),
        ({"podLabels": {"a": 1}}, "podLabels['a']=1"),
        ({"podAnnotations": []}, "podAnnotations=[]"),
        ({"cgroupParent": 3}, "cgroupParent=3"),
    ],
)
def test_bad_input_names_field_and_value(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(ContainerCPUSetInputError) as err:
        simulate_container_cpuset({**BASE, **extra})
    assert message in str(err.value)
    assert isinstance(err.value, ValueError)
