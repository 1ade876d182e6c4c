"""Every tests/scenarios/cpuset/*.json through `koord.simulate.simulate_file` (kind CPUSet): the result must
equal `expect` as a whole (worked out by hand from docs/rules/scheduler-nodenumaresource.md, each file's
description gives the arithmetic; the koordlet's containerCPUSet files are run too). Also: every rule
section and scheduler operation has scenarios, and bad input is named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koord.simulate import KINDS, ScenarioError, simulate_file, simulate_scenario
from scheduler.plugins.nodenumaresource.scenario import OPERATIONS

TESTS = Path(__file__).resolve().parents[4]
SCENARIOS = sorted((TESTS / "scenarios" / "cpuset").glob("*.json"))
OURS = [p for p in SCENARIOS if p.name.startswith("scheduler-")]
DOC = "docs/rules/scheduler-nodenumaresource.md#"


def test_the_kind_is_registered() -> None:
    assert KINDS["CPUSet"] == ("koord.simulate_cpuset", "simulate")


def test_every_rule_section_and_operation_has_scenarios() -> None:
    loaded = [json.loads(p.read_text()) for p in OURS]
    sources = {s["source"].split("#")[1] for s in loaded}
    assert {"accumulator", "allocation", "prefilter", "filter", "worked-examples", "wiring"} <= sources
    assert {s["operation"] for s in loaded} == set(OPERATIONS)
    assert len(OURS) >= 60
    reasons = {s["expect"].get("reason") for s in loaded if s["operation"] != "takeCPUs"}
    assert {
        "the requested CPUs must be integer", "node(s) NUMA Topology policy not match",
        "node(s) invalid CPU Topology", "node(s) requested cpus not multiple cpus per core",
        "node(s) cpu bind policy conflicts with pod's required cpu bind policy",
        "node(s) invalid CPU amplification ratio", "Insufficient amplified cpu",
        "not enough cpus available to satisfy request",
    } <= reasons  # fmt: skip


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path) -> None:
    scenario: dict[str, Any] = json.loads(path.read_text())
    assert scenario["kind"] == "CPUSet"
    if scenario["operation"] in OPERATIONS:
        assert scenario["source"].startswith(DOC), scenario["source"]
        assert path.name.startswith("scheduler-")
    assert simulate_file(str(path)) == scenario["expect"]


def test_a_scenario_is_not_modified() -> None:
    scenario: dict[str, Any] = json.loads(OURS[0].read_text())
    before = json.dumps(scenario, sort_keys=True)
    simulate_scenario(scenario)
    assert json.dumps(scenario, sort_keys=True) == before


TOPO = {"detail": [{"id": 0, "core": 0, "socket": 0, "node": 0}]}


@pytest.mark.parametrize(
    ("scenario", "message"),
    [
        ({"operation": "nope"}, "operation='nope'"),
        ({"operation": "takeCPUs", "cpuTopology": {"detail": [{"id": "x"}]}},
         r"cpuTopology\.detail\[0\]\.id"),
        ({"operation": "takeCPUs", "cpuTopology": TOPO, "cpuBindPolicy": "Tight"}, "cpuBindPolicy=\"Tight\""),
        ({"operation": "takeCPUs", "cpuTopology": TOPO, "cpuBindPolicy": "FullPCPUs", "numCPUsNeeded": -1},
         "numCPUsNeeded=-1"),
        ({"operation": "takeCPUs", "cpuTopology": TOPO, "cpuBindPolicy": "FullPCPUs", "reservedCPUs": "a-b"},
         "reservedCPUs=\"a-b\""),
        ({"operation": "takeCPUs", "cpuTopology": TOPO, "cpuBindPolicy": "FullPCPUs",
          "allocatedPods": [{"cpuset": "0", "cpuExclusivePolicy": "Core"}]},
         r"allocatedPods\[0\]\.cpuExclusivePolicy=\"Core\""),
        ({"operation": "preFilter", "pod": {"metadata": {}}, "args": {"defaultCPUBindPolicy": "Tight"}},
         "args.defaultCPUBindPolicy='Tight'"),
        ({"operation": "preFilter", "pod": {"metadata": {}}, "args": {"scoringStrategy": {"type": "X"}}},
         r"args.scoringStrategy.type='X'"),
        ({"operation": "filter", "pod": {"metadata": {}}, "node": {"metadata": {"name": "n"}},
          "maxRefCount": 0, "cpuTopology": TOPO}, "maxRefCount=0"),
    ],
)  # fmt: skip
def test_bad_input_is_named(scenario: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        simulate_scenario({"kind": "CPUSet", **scenario})


def test_a_missing_evaluator_names_the_operation(monkeypatch: pytest.MonkeyPatch) -> None:
    from koord import simulate_cpuset

    monkeypatch.setitem(simulate_cpuset.OPERATIONS, "containerCPUSet", ("agent.topology.nope", "f"))
    with pytest.raises(ScenarioError, match="operation='containerCPUSet'"):
        simulate_scenario({"kind": "CPUSet", "operation": "containerCPUSet"})
