"""Every tests/scenarios/schedule/*.json through `koord simulate` (kind Schedule): the whole scheduler
on the scenario's cluster, each pending pod's node or unschedulable message compared with `expect`
(worked out by hand in each file's description); ties drawn reproducibly from the seed."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from koord.simulate import simulate_file, simulate_scenario

SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "scenarios" / "schedule").glob("*.json"))


def test_there_are_scenarios() -> None:
    assert len(SCENARIOS) >= 8


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path) -> None:
    scenario: dict[str, Any] = json.loads(path.read_text())
    assert scenario["kind"] == "Schedule"
    assert simulate_file(str(path)) == scenario["expect"]


def _ties() -> dict[str, Any]:
    [path] = [p for p in SCENARIOS if p.stem == "ties-drawn-with-the-seed"]
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def test_equal_nodes_are_each_drawn_and_a_seed_repeats() -> None:
    chosen = set()
    for seed in range(40):
        scenario = {**copy.deepcopy(_ties()), "seed": seed}
        first = simulate_scenario(copy.deepcopy(scenario))
        assert simulate_scenario(scenario) == first
        chosen.add(first["pods"]["default/p"]["node"])
    assert chosen == {"a", "b", "c", "d"}


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"seed": "x"}, "seed='x'"),
        ({"now": "yesterday"}, "now='yesterday'"),
        ({"config": {"apiVersion": "v9"}}, "config: apiVersion='v9'"),
        ({"pods": [{"metadata": {"name": "x"}, "spec": {}}]}, "pods[0].spec.nodeName: required"),
        ({"pending": [{"metadata": {"name": "x"}, "spec": {"nodeName": "a"}}]}, "pending[0].spec.nodeName"),
        ({"pending": [{"metadata": {"name": "x"}, "spec": {}}] * 2}, "given twice"),
        ({"nodes": [{"metadata": {}}]}, "nodes[0].metadata.name: required"),
        ({"typo": 1}, "typo: unknown field"),
    ],
)
def test_input_errors_name_the_field(change: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValueError) as e:
        simulate_scenario({**_ties(), **change})
    assert needle in str(e.value)
