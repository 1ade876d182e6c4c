"""Smoke test of bench/fuzz.py: one JSON line per target with the documented keys, exit 0 without a
crash; a failing target exits 1 and leaves a reproducer naming the minimal failing input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import strategies as st

from bench import fuzz
from tests.reliability.fuzz import targets
from tests.reliability.fuzz.targets import Target

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.timeout(120)
def test_a_short_run_prints_one_line_per_target(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "fuzz.py"), "--examples", "20", "--target", "quantity",
         "--seed", "1", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=100, cwd=REPO, check=True,
    )  # fmt: skip
    [line] = out.stdout.splitlines()
    result = json.loads(line)
    assert result == {
        "target": "quantity",
        "examples": 20,
        "crashes": 0,
        "seconds": result["seconds"],
        "seed": 1,
    }
    assert not list(tmp_path.iterdir())


def _below_1000(n: int) -> None:
    assert n < 1000, "too big"


def test_a_crash_exits_1_and_writes_the_minimal_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(targets.TARGETS, "boom", Target("boom", st.integers(0, 10**6), _below_1000))
    assert fuzz.main(["--examples", "2000", "--target", "boom", "--seed", "3", "--out", str(tmp_path)]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["crashes"] == 1 and 1 <= result["examples"] <= 2000
    report = Path(result["reproducer"]).read_text()
    assert "seed: 3" in report and "\n1000\n" in report and "AssertionError: too big" in report
