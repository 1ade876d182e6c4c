"""Every tests/scenarios/jobreservation/*.json through `koord.simulate.simulate_file` (kind JobReservation):
the result must equal `expect` as a whole (each expectation worked out by hand from
docs/rules/scheduler-jobreservation.md, as each file's description says). Also: every rule has a scenario,
and bad scenario input is named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koord.simulate import KINDS, simulate_file, simulate_scenario

TESTS = Path(__file__).resolve().parents[4]
SCENARIOS = sorted((TESTS / "scenarios" / "jobreservation").glob("*.json"))


def test_the_kind_is_registered() -> None:
    assert KINDS["JobReservation"] == ("scheduler.plugins.jobreservation.scenario", "simulate")


def test_every_rule_and_operation_has_scenarios() -> None:
    docs = [json.loads(p.read_text()) for p in SCENARIOS]
    sources = {d["source"].split("#")[1] for d in docs}
    assert {"lessequal", "ready-task-num", "elect", "reserve", "locked-nodes"} <= sources
    assert {d["operation"] for d in docs} == {"elect", "lockStep", "allowedNodes"}
    assert len(SCENARIOS) >= 40


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path) -> None:
    scenario: dict[str, Any] = json.loads(path.read_text())
    assert scenario["kind"] == "JobReservation"
    assert scenario["source"].startswith("docs/rules/scheduler-jobreservation.md#")
    assert simulate_file(str(path)) == scenario["expect"]


JOB = {"name": "a", "minAvailable": 1, "tasks": []}


@pytest.mark.parametrize(
    ("scenario", "message"),
    [
        ({}, "operation=None: expected one of elect, lockStep, allowedNodes"),
        ({"operation": "fly"}, "operation='fly'"),
        ({"operation": "elect", "now": "noon"}, "now='noon'"),
        ({"operation": "elect", "targetJob": 3}, "targetJob=3: expected a string"),
        ({"operation": "elect", "jobs": {}}, "jobs={}: expected a list"),
        ({"operation": "elect", "jobs": [3]}, r"jobs\[0\]=3: expected an object"),
        ({"operation": "elect", "jobs": [{"minAvailable": 1}]}, r"jobs\[0\]\.name=None"),
        (
            {"operation": "elect", "jobs": [{**JOB, "priority": 1 << 31}]},
            r"jobs\[0\]\.priority=2147483648: expected an int32",
        ),
        ({"operation": "elect", "jobs": [{**JOB, "priority": True}]}, r"jobs\[0\]\.priority=True"),
        (
            {"operation": "elect", "jobs": [{**JOB, "scheduleStartTimestamp": "x"}]},
            r"jobs\[0\]\.scheduleStartTimestamp='x'",
        ),
        ({"operation": "elect", "jobs": [{**JOB, "podGroupPhase": 1}]}, r"jobs\[0\]\.podGroupPhase=1"),
        (
            {"operation": "lockStep", "jobs": [{**JOB, "tasks": [{"status": 1}]}]},
            r"jobs\[0\]\.tasks\[0\]\.status=1",
        ),
        (
            {
                "operation": "lockStep",
                "jobs": [{**JOB, "tasks": [{"status": "Pending", "resreq": {"cpu": "x"}}]}],
            },
            r"jobs\[0\]\.tasks\[0\]\.resreq\.cpu: invalid quantity",
        ),
        ({"operation": "lockStep", "nodes": [{"idle": {}}]}, r"nodes\[0\]\.name=None"),
        (
            {"operation": "lockStep", "nodes": [{"name": "a", "idle": []}]},
            r"nodes\[0\]\.idle=\[\]: expected an object",
        ),
        ({"operation": "lockStep", "lockedNodes": [1]}, r"lockedNodes\[0\]=1: expected a string"),
        ({"operation": "allowedNodes"}, "job=None: expected a string"),
    ],
)
def test_bad_input_is_named(scenario: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        simulate_scenario({"kind": "JobReservation", **scenario})
