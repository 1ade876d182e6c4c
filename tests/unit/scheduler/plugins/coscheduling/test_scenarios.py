"""Every tests/scenarios/coscheduling/*.json through `koord.simulate.simulate_file` (kind Coscheduling):
the result must equal `expect` as a whole (the upstream-* files carry the expectations of upstream
Koordinator's controller tests, the others are worked out by hand from
docs/rules/scheduler-coscheduling.md in each file's description). Also: bad scenario input is named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koord.simulate import KINDS, simulate_file, simulate_scenario

TESTS = Path(__file__).resolve().parents[4]
SCENARIOS = sorted((TESTS / "scenarios" / "coscheduling").glob("*.json"))
DOC = TESTS.parent / "docs" / "rules" / "scheduler-coscheduling.md"


def test_the_kind_is_registered() -> None:
    assert KINDS["Coscheduling"] == ("scheduler.plugins.coscheduling.scenario", "simulate")


def test_there_are_enough_scenarios() -> None:
    assert len(SCENARIOS) >= 55
    assert len([p for p in SCENARIOS if p.name.startswith("upstream-")]) >= 20


def test_every_rule_section_has_a_scenario() -> None:
    """Each rule anchor of the rules page is the `source` of at least one scenario."""
    sources = {json.loads(p.read_text())["source"].split("#")[1] for p in SCENARIOS}
    wanted = {
        "plugin-arguments", "initialising-a-gang", "declaring-a-gang", "gang-cache", "queue-ordering",
        "preenqueue", "basic-check", "beforeprefilter", "afterpostfilter", "permit", "unreserve",
        "prebind", "postbind", "podgroup-status",
    }  # fmt: skip
    assert wanted <= sources, sorted(wanted - sources)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path) -> None:
    scenario: dict[str, Any] = json.loads(path.read_text())
    assert scenario["kind"] == "Coscheduling"
    assert scenario["source"].startswith("docs/rules/scheduler-coscheduling.md#")
    assert simulate_file(str(path)) == scenario["expect"]


def test_a_scenario_is_not_modified() -> None:
    scenario: dict[str, Any] = json.loads(
        (TESTS / "scenarios" / "coscheduling" / "prebind-annotations.json").read_text()
    )
    before = json.dumps(scenario, sort_keys=True)
    simulate_scenario(scenario)
    assert json.dumps(scenario, sort_keys=True) == before


POD = {"metadata": {"namespace": "default", "name": "p"}}


@pytest.mark.parametrize(
    ("scenario", "message"),
    [
        ({"operation": "nope"}, "operation='nope'"),
        ({"steps": {}}, "steps: expected a list"),
        ({"steps": [3]}, r"steps\[0\]: expected an object"),
        ({"steps": [{"op": "fly"}]}, r"steps\[0\]\.op='fly'"),
        ({"steps": [{"op": "addPod", "pod": "p"}]}, r"steps\[0\]\.pod"),
        ({"steps": [{"op": "addPod", "pod": POD, "id": 4}]}, r"steps\[0\]\.id=4"),
        (
            {"steps": [{"op": "setOnceResourceSatisfied", "gang": "default/x"}]},
            r"steps\[0\]\.gang='default/x'",
        ),
        (
            {"steps": [{"op": "addPodGroup", "podGroup": {"metadata": {}}}]},
            r"steps\[0\]\.podGroup\.metadata\.name",
        ),
        (
            {
                "steps": [
                    {"op": "addPodGroup", "podGroup": {"metadata": {"name": "g"}, "spec": {"minMember": "2"}}}
                ]
            },
            r"steps\[0\]\.podGroup\.spec\.minMember='2'",
        ),
        ({"steps": [{"op": "deletePodGroup", "namespace": "a"}]}, "deletePodGroup needs"),
        ({"steps": [{"op": "afterPostFilter", "pod": POD, "fitError": 1}]}, r"fitError=1"),
        ({"steps": [], "now": "yesterday"}, "now='yesterday'"),
        ({"steps": [], "args": {"defaultTimeout": "-1s"}}, "defaultTimeout='-1s': must not be negative"),
        ({"steps": [], "args": {"controllerWorkers": 0}}, "controllerWorkers=0: must be at least 1"),
        ({"steps": [], "args": {"timeout": "1s"}}, "timeout='1s': unknown field"),
        ({"operation": "podGroupStatus"}, r"podGroup\.metadata\.name"),
        (
            {"operation": "podGroupStatus", "podGroup": {"metadata": {"name": "g"}}, "pods": {}},
            "pods: expected a list",
        ),
    ],
)
def test_bad_input_is_named(scenario: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        simulate_scenario({"kind": "Coscheduling", **scenario})
