"""Every tests/scenarios/deviceshare/*.json through `koord.simulate.simulate_file` (kind DeviceShare): the
result must equal `expect` as a whole (worked out by hand from docs/rules/scheduler-deviceshare.md; each
file's description gives the arithmetic). Also: every rule section and operation has scenarios, and bad
input is named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koord.simulate import KINDS, simulate_file, simulate_scenario
from scheduler.plugins.deviceshare.scenario import OPERATIONS

TESTS = Path(__file__).resolve().parents[4]
SCENARIOS = sorted((TESTS / "scenarios" / "deviceshare").glob("*.json"))


def test_the_kind_is_registered() -> None:
    assert KINDS["DeviceShare"] == ("scheduler.plugins.deviceshare.scenario", "simulate")


def test_every_rule_section_and_operation_has_scenarios() -> None:
    loaded = [json.loads(p.read_text()) for p in SCENARIOS]
    sources = {s["source"].split("#")[1] for s in loaded}
    assert {"normalise", "per-gpu", "scoring", "allocation"} <= sources
    assert {s["operation"] for s in loaded} == set(OPERATIONS)
    assert len(SCENARIOS) >= 60
    # both outcomes of each operation that has two
    assert {s["expect"]["valid"] for s in loaded if s["operation"] == "normalize"} == {True, False}
    allocations = [s["expect"] for s in loaded if s["operation"] == "allocate"]
    assert any(e["reason"] is None for e in allocations) and any(e["reason"] for e in allocations)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path) -> None:
    scenario: dict[str, Any] = json.loads(path.read_text())
    assert scenario["kind"] == "DeviceShare"
    assert scenario["source"].startswith("docs/rules/scheduler-deviceshare.md#")
    assert scenario["description"]
    assert simulate_file(str(path)) == scenario["expect"]


def test_a_scenario_is_not_modified() -> None:
    scenario: dict[str, Any] = json.loads(
        (TESTS / "scenarios" / "deviceshare" / "allocate-preemptible-partial.json").read_text()
    )
    before = json.dumps(scenario, sort_keys=True)
    simulate_scenario(scenario)
    assert json.dumps(scenario, sort_keys=True) == before


@pytest.mark.parametrize(
    ("scenario", "message"),
    [
        ({"operation": "nope"}, "operation='nope'"),
        ({"operation": "normalize", "requests": {"koordinator.sh/gpu": "lots"}},
         r"requests\.koordinator\.sh/gpu='lots'"),
        ({"operation": "normalize", "requests": [1]}, "requests: expected an object"),
        ({"operation": "scoreDevice", "scoringStrategy": {"type": "Balanced"}},
         r"scoringStrategy\.type='Balanced'"),
        (
            {"operation": "scoreDevice", "scoringStrategy": {"resources": [{"name": "x", "weight": 0}]}},
            r"scoringStrategy\.resources\[0\]\.weight=0",
        ),
        ({"operation": "allocate", "devices": {}}, "devices: expected a list"),
        ({"operation": "allocate", "devices": [{"minor": "zero"}]}, r"devices\[0\]\.minor"),
        ({"operation": "allocate", "allocatedPods": [{"deviceAllocations": {"gpu": [{"minor": 1.5}]}}]},
         r"allocatedPods\[0\]\.deviceAllocations\.gpu\[0\]\.minor=1\.5"),
        ({"operation": "allocate", "deviceRequests": {"gpu": 3}}, r"deviceRequests\.gpu"),
        ({"operation": "allocate", "preemptible": {"gpu": {"a": {}}}}, r"preemptible\.gpu: minor 'a'"),
    ],
)  # fmt: skip
def test_bad_input_is_named(scenario: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        simulate_scenario({"kind": "DeviceShare", **scenario})
