"""Smoke test of bench/report_check.py: a short run prints the documented JSON with positive timings (which
is faster is the bench's finding, never asserted here: a busy machine may slow either one)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.timeout(120)
def test_report_check_smoke() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "report_check.py"), "--number", "50", "--repeats", "3"],
        capture_output=True,
        text=True,
        timeout=100,
        cwd=REPO,
        check=True,
    )
    result = json.loads(out.stdout)
    assert set(result) == {"pods", "report_bytes", "check_us", "oracle_us", "speedup", "consumer_us"}
    assert result["pods"] == 20 and 2_000 < result["report_bytes"] < 5_000
    assert result["check_us"] > 0 and result["oracle_us"] > 0 and result["consumer_us"] > 0
