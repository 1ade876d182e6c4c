"""Every tests/scenarios/elasticquota/*.json through `koord.simulate.simulate_file` (kind ElasticQuota): the
result must equal `expect` as a whole (each file's description works the numbers out by hand from
docs/rules/scheduler-elasticquota.md). Also: bad scenario input is named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koord.simulate import KINDS, simulate_file, simulate_scenario

TESTS = Path(__file__).resolve().parents[4]
SCENARIOS = sorted((TESTS / "scenarios" / "elasticquota").glob("*.json"))


def test_the_kind_is_registered() -> None:
    assert KINDS["ElasticQuota"] == ("scheduler.plugins.elasticquota.scenario", "simulate")


def test_every_operation_and_rule_has_scenarios() -> None:
    docs = [json.loads(p.read_text()) for p in SCENARIOS]
    assert len(docs) >= 60
    operations = {d["operation"] for d in docs}
    assert operations == {
        "redistribute", "runtime", "admit", "canPreempt", "eligibleToPreempt", "selectVictims", "revokeList",
    }  # fmt: skip
    sources = {d["source"].split("#")[1] for d in docs}
    wanted = {
        "redistribution-one-resource", "min-scaling", "top-down-evaluation", "propagation-to-ancestors",
        "pod-accounting", "which-quota-a-pod-belongs-to", "the-cluster-total", "special-quotas",
        "labels-and-annotations", "plugin-arguments", "prefilter-admission", "preemption", "overuse-revoke",
        "edge-cases", "koord-decisions",
    }  # fmt: skip
    assert wanted <= sources, sorted(wanted - sources)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path) -> None:
    scenario: dict[str, Any] = json.loads(path.read_text())
    assert scenario["kind"] == "ElasticQuota"
    assert scenario["source"].startswith("docs/rules/scheduler-elasticquota.md#")
    assert simulate_file(str(path)) == scenario["expect"]


def test_a_scenario_is_not_modified() -> None:
    scenario: dict[str, Any] = json.loads(
        (TESTS / "scenarios" / "elasticquota" / "admit-insufficient-runtime.json").read_text()
    )
    before = json.dumps(scenario, sort_keys=True)
    simulate_scenario(scenario)
    assert json.dumps(scenario, sort_keys=True) == before


POD = {"metadata": {"namespace": "default", "name": "p"}}


@pytest.mark.parametrize(
    ("scenario", "message"),
    [
        ({"operation": "nope"}, "operation='nope': expected one of redistribute"),
        ({}, "operation=None"),
        ({"operation": "redistribute", "totalResource": "1", "quotas": []}, "totalResource"),
        ({"operation": "redistribute", "totalResource": 1, "quotas": {}}, "quotas: expected a list"),
        (
            {"operation": "redistribute", "totalResource": 1, "quotas": [{"name": ""}]},
            r"quotas\[0\]\.name=''",
        ),
        (
            {"operation": "redistribute", "totalResource": 1, "quotas": [{"name": "a"}, {"name": "a"}]},
            r"quotas\[1\]\.name='a': listed twice",
        ),
        (
            {"operation": "redistribute", "totalResource": 1, "quotas": [{"name": "a", "min": 1.5}]},
            r"quotas\[0\]\.min",
        ),
        (
            {
                "operation": "redistribute",
                "totalResource": 1,
                "quotas": [{"name": "a", "allowLentResource": 1}],
            },
            r"quotas\[0\]\.allowLentResource=1",
        ),
        ({"operation": "runtime", "clusterTotal": {"cpu": "x"}}, "clusterTotal: "),
        ({"operation": "runtime", "quotas": [{"metadata": {}}]}, r"quotas\[0\]\.metadata\.name"),
        ({"operation": "runtime", "requests": {"zz": {"cpu": "1"}}}, "requests.zz: not a quota"),
        ({"operation": "runtime", "args": {"delayEvictTime": "-1s"}}, "args: .*delayEvictTime='-1s'"),
        ({"operation": "admit", "pod": "p"}, "pod"),
        (
            {"operation": "admit", "pod": POD, "runtimeOverride": {"zz": {}}},
            "runtimeOverride.zz: not a quota",
        ),
        ({"operation": "canPreempt", "quotaNames": [1], "pod": POD, "victim": POD}, "quotaNames: expected"),
        (
            {"operation": "eligibleToPreempt", "pod": POD, "nominatedNodeStatus": "x"},
            "nominatedNodeStatus='x'",
        ),
        ({"operation": "eligibleToPreempt", "pod": POD, "nodes": "n1"}, "nodes: expected a list"),
        ({"operation": "selectVictims", "pod": POD, "nodeName": 1}, "nodeName=1"),
        (
            {
                "operation": "selectVictims",
                "pod": POD,
                "nodeName": "n",
                "postFilterState": {"quotaPodCache": "a"},
            },
            "postFilterState.quotaPodCache",
        ),
        ({"operation": "revokeList", "used": {"cpu": []}}, "used: "),
        ({"operation": "revokeList", "pods": [3]}, r"pods\[0\]"),
    ],
)
def test_bad_input_is_named(scenario: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        simulate_scenario({"kind": "ElasticQuota", **scenario})
