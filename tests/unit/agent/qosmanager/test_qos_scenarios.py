"""Every scenario file of the koordlet QoS kinds (tests/scenarios/{cpusuppress,cpuburst,memoryevict,
cpuevict}/*.json, whichever directories exist) through `koord.simulate.simulate_file`; only the keys
present in `expect` are compared (expected values are worked out by hand in each file's description)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koord.simulate import simulate_file

ROOT = Path(__file__).resolve().parents[3] / "scenarios"
KIND_DIRS = {
    "cpusuppress": "CPUSuppress",
    "cpuburst": "CPUBurst",
    "memoryevict": "MemoryEvict",
    "cpuevict": "CPUEvict",
}
SCENARIOS = sorted(p for d in KIND_DIRS if (ROOT / d).is_dir() for p in (ROOT / d).glob("*.json"))


@pytest.mark.parametrize("minimum", [("cpusuppress", 30), ("cpuburst", 30)], ids=lambda m: m[0])
def test_there_are_enough_scenarios(minimum: tuple[str, int]) -> None:
    kind_dir, count = minimum
    assert len(list((ROOT / kind_dir).glob("*.json"))) >= count


@pytest.mark.parametrize("path", SCENARIOS, ids=[f"{p.parent.name}/{p.stem}" for p in SCENARIOS])
def test_scenario(path: Path) -> None:
    scenario: dict[str, Any] = json.loads(path.read_text())
    assert scenario["kind"] == KIND_DIRS[path.parent.name]
    assert scenario["expect"], "a scenario must expect something"
    result = simulate_file(str(path))
    for key, expected in scenario["expect"].items():
        assert key in result, f"{key}: missing from the result {result!r}"
        assert result[key] == expected, f"{key}: got {result[key]!r}, expected {expected!r}"
