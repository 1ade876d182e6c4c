"""Every tests/scenarios/reservation/*.json through `koord.simulate.simulate_file` (kind Reservation): the
result must equal `expect` as a whole (worked out by hand from docs/rules/scheduler-reservation.md, each
file's description gives the arithmetic). Also: every rule section has a scenario, every operation is
used, and bad input is named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koord.simulate import KINDS, simulate_file, simulate_scenario
from scheduler.plugins.reservation.scenario import OPERATIONS

TESTS = Path(__file__).resolve().parents[4]
SCENARIOS = sorted((TESTS / "scenarios" / "reservation").glob("*.json"))


def test_the_kind_is_registered() -> None:
    assert KINDS["Reservation"] == ("scheduler.plugins.reservation.scenario", "simulate")


def test_every_rule_section_and_operation_has_a_scenario() -> None:
    loaded = [json.loads(p.read_text()) for p in SCENARIOS]
    sources = {s["source"].split("#")[1] for s in loaded}
    wanted = {
        "status", "requests", "reserve-pod", "reservationinfo", "owner-matching", "matching",
        "reservation-affinity", "exact-match", "restoration", "normal-pod-filter", "reserve-pod-filter",
        "score", "controller",
    }  # fmt: skip
    assert wanted <= sources, sorted(wanted - sources)
    assert {s["operation"] for s in loaded} == set(OPERATIONS)
    assert len(SCENARIOS) >= 100


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path) -> None:
    scenario: dict[str, Any] = json.loads(path.read_text())
    assert scenario["kind"] == "Reservation"
    assert scenario["source"].startswith("docs/rules/scheduler-reservation.md#")
    assert simulate_file(str(path)) == scenario["expect"]


def test_a_scenario_is_not_modified() -> None:
    scenario: dict[str, Any] = json.loads(
        (TESTS / "scenarios" / "reservation" / "reserve-pod-available-resized.json").read_text()
    )
    before = json.dumps(scenario, sort_keys=True)
    simulate_scenario(scenario)
    assert json.dumps(scenario, sort_keys=True) == before


RES = {"metadata": {"name": "r"}, "spec": {"owners": [{}]}}


@pytest.mark.parametrize(
    ("scenario", "message"),
    [
        ({"operation": "nope"}, "operation='nope'|operation=\"nope\""),
        ({"operation": "status", "reservation": 3}, "reservation: expected an object"),
        ({"operation": "requests", "reservation": {**RES, "spec": {"ttl": "soon"}}}, r"spec\.ttl"),
        (
            {"operation": "requests", "reservation": {**RES, "spec": {"allocatePolicy": "Loose"}}},
            r"reservation\.spec\.allocatePolicy=\"Loose\"",
        ),
        ({"operation": "requests", "reservation": {**RES, "status": {"phase": "Gone"}}}, r"status\.phase"),
        (
            {"operation": "requests", "reservation": {**RES, "status": {"allocatable": {"cpu": "x"}}}},
            r"reservation\.status\.allocatable",
        ),
        ({"operation": "exactMatch", "exactMatchSpec": {"resourceNames": "cpu"}}, "resourceNames"),
        ({"operation": "filter", "node": {"metadata": {"name": "n"}}, "nodePodCount": -1}, "nodePodCount"),
        ({"operation": "filter", "node": {"metadata": {"name": "n"}}, "reservations": {}}, "reservations"),
        ({"operation": "filter", "node": {"metadata": {"name": "n"}}, "hasAffinity": "yes"}, "hasAffinity"),
        (
            {"operation": "affinity", "pod": {"metadata": {"annotations": {
                "scheduling.koordinator.sh/reservation-affinity": "{"}}}},
            "reservation-affinity: invalid JSON",
        ),
        ({"operation": "controllerSync", "reservation": RES, "now": "noon"}, "now="),
    ],
)  # fmt: skip
def test_bad_input_is_named(scenario: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        simulate_scenario({"kind": "Reservation", **scenario})
