"""Every tests/scenarios/colocationprofile/*.json through `koord.simulate.simulate_file` (kind
ColocationProfile): the result must equal `expect` as a whole (the upstream-* files carry the expected
pods of upstream Koordinator's webhook tests, the others are worked out by hand from
docs/rules/colocation-profile.md), or the admission must be refused with `expectError`. Also: bad
scenario input is named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koord.simulate import ScenarioError, simulate_file, simulate_scenario
from manager.webhook.profile import ProfileError

TESTS = Path(__file__).resolve().parents[3]
SCENARIOS = sorted((TESTS / "scenarios" / "colocationprofile").glob("*.json"))


def test_there_are_enough_scenarios() -> None:
    assert len(SCENARIOS) >= 35
    assert len([p for p in SCENARIOS if p.name.startswith("upstream-")]) >= 13


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path) -> None:
    scenario: dict[str, Any] = json.loads(path.read_text())
    assert scenario["kind"] == "ColocationProfile"
    assert scenario["source"].startswith("docs/rules/colocation-profile.md#")
    if "expectError" in scenario:
        with pytest.raises(ProfileError) as info:
            simulate_file(str(path))
        assert scenario["expectError"] in str(info.value)
        return
    assert simulate_file(str(path)) == scenario["expect"]


def test_the_scenario_pod_is_not_modified() -> None:
    scenario: dict[str, Any] = json.loads(
        (TESTS / "scenarios" / "colocationprofile" / "upstream-mutating-pod.json").read_text()
    )
    before = json.dumps(scenario, sort_keys=True)
    result = simulate_scenario(scenario)
    assert json.dumps(scenario, sort_keys=True) == before
    assert result["pod"] is not scenario["pod"]


POD = {"metadata": {"name": "p", "namespace": "default"}}


@pytest.mark.parametrize(
    ("scenario", "message"),
    [
        ({"pod": POD, "admissionOperation": "PATCH"}, "admissionOperation='PATCH'"),
        ({"pod": "p"}, "pod"),
        ({"pod": POD, "profiles": {}}, "profiles"),
        ({"pod": POD, "profiles": [3]}, r"profiles\[0\]"),
        ({"pod": POD, "profiles": [{"spec": {"qosClass": "GOLD"}}]}, r"profiles\[0\]\.spec\.qosClass"),
        ({"pod": POD, "profiles": [{"spec": {"probability": 0.5}}]}, r"profiles\[0\]\.spec\.probability"),
        ({"pod": POD, "namespaces": [{"metadata": {}}]}, r"namespaces\[0\]\.metadata\.name"),
        ({"pod": POD, "namespaces": [{"metadata": {"name": "default", "labels": {"a": 1}}}]}, "labels"),
        (
            {"pod": POD, "priorityClasses": [{"metadata": {"name": "x"}, "value": "5"}]},
            r"priorityClasses\[0\]\.value",
        ),
        (
            {"pod": POD, "priorityClasses": [{"metadata": {"name": "x"}, "preemptionPolicy": 1}]},
            "preemptionPolicy",
        ),
        ({"pod": POD, "features": {"Other": True}}, "features"),
        ({"pod": POD, "features": {"ColocationProfileSkipMutatingResources": "yes"}}, "features"),
        ({"pod": POD, "randIntn": 100}, "randIntn=100"),
        ({"pod": POD, "randIntn": -1}, "randIntn=-1"),
    ],
)
def test_bad_input_is_named(scenario: dict[str, Any], message: str) -> None:
    with pytest.raises((ScenarioError, ValueError), match=message):
        simulate_scenario({"kind": "ColocationProfile", **scenario})
