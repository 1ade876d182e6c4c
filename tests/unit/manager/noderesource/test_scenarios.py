"""Every tests/scenarios/batchresource/*.json through `koord.simulate.simulate_file`; only the keys present in
`expect` are compared (expected values are worked out by hand in each file's description)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koord.simulate import simulate_file

SCENARIOS = sorted((Path(__file__).resolve().parents[3] / "scenarios" / "batchresource").glob("*.json"))


def test_there_are_enough_scenarios() -> None:
    assert len(SCENARIOS) >= 40


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path) -> None:
    scenario: dict[str, Any] = json.loads(path.read_text())
    assert scenario["kind"] == "BatchResource"
    assert scenario["expect"], "a scenario must expect something"
    result = simulate_file(str(path))
    for key, expected in scenario["expect"].items():
        assert result[key] == expected, f"{key}: got {result[key]!r}, expected {expected!r}"
