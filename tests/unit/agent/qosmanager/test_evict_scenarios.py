"""Every tests/scenarios/{memoryevict,cpuevict}/*.json through `koord.simulate.simulate_file`; only the keys
present in `expect` are compared (expected values are worked out by hand in each file's description)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koord.simulate import simulate_file

ROOT = Path(__file__).resolve().parents[3] / "scenarios"
SCENARIOS = sorted([*(ROOT / "memoryevict").glob("*.json"), *(ROOT / "cpuevict").glob("*.json")])
KINDS = {"memoryevict": "MemoryEvict", "cpuevict": "CPUEvict"}


def test_there_are_enough_scenarios() -> None:
    assert len([p for p in SCENARIOS if p.parent.name == "memoryevict"]) >= 30
    assert len([p for p in SCENARIOS if p.parent.name == "cpuevict"]) >= 40


@pytest.mark.parametrize("path", SCENARIOS, ids=[f"{p.parent.name}/{p.stem}" for p in SCENARIOS])
def test_scenario(path: Path) -> None:
    scenario: dict[str, Any] = json.loads(path.read_text())
    assert scenario["kind"] == KINDS[path.parent.name]
    assert scenario["expect"], "a scenario must expect something"
    assert scenario["description"], "a scenario must explain its arithmetic"
    result = simulate_file(str(path))
    for key, expected in scenario["expect"].items():
        assert result[key] == expected, f"{key}: got {result[key]!r}, expected {expected!r}"


def test_unknown_operation_is_a_clear_error(tmp_path: Path) -> None:
    f = tmp_path / "bad.json"
    f.write_text(json.dumps({"kind": "CPUEvict", "operation": "nope"}))
    with pytest.raises(ValueError, match="operation='nope'"):
        simulate_file(str(f))
    f.write_text(json.dumps({"kind": "MemoryEvict", "operation": "usedRelease", "node": None}))
    with pytest.raises(ValueError, match="node"):
        simulate_file(str(f))
