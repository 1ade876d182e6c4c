"""Every tests/scenarios/loadaware/*.json through `koord.simulate.simulate_file`; only the keys present in
`expect` are compared (expected values are worked out by hand in each file's description). Every
scenario also runs through the per-node oracle, which must agree with the plugin on every node."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koord.simulate import simulate_file
from scheduler.plugins.loadaware.simulate import prepare

from .test_property import check_equal

SCENARIOS = sorted((Path(__file__).resolve().parents[3] / "scenarios" / "loadaware").glob("*.json"))


def test_there_are_enough_scenarios() -> None:
    assert len(SCENARIOS) >= 40


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path) -> None:
    scenario: dict[str, Any] = json.loads(path.read_text())
    assert scenario["kind"] == "LoadAwareScheduling"
    result = simulate_file(str(path))
    for key, expected in scenario["expect"].items():
        got = result[key]
        if key == "filterReason":
            # filterReason is only present for failing nodes: compare the listed nodes and no extra ones
            # among the nodes the expectation covers via `filter`.
            for node, reason in expected.items():
                assert got.get(node) == reason, f"{key}[{node}]"
            for node, ok in scenario["expect"].get("filter", {}).items():
                if ok:
                    assert node not in got, f"{key}[{node}] unexpected"
        else:
            for node, value in expected.items():
                assert got[node] == value, f"{key}[{node}]: got {got[node]!r}, expected {value!r}"


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_matches_the_oracle(path: Path) -> None:
    plugin, snapshot, state, pod = prepare(json.loads(path.read_text()))
    check_equal(plugin, snapshot, pod, state.now)
