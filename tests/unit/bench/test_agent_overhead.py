"""Smoke test of bench/agent_overhead.py: a ~3 s run at a small pod count prints the documented JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.timeout(90)
def test_agent_overhead_smoke() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "agent_overhead.py"), "--pods", "4,8", "--seconds", "3"],
        capture_output=True,
        text=True,
        timeout=80,
        cwd=REPO,
        check=True,
    )
    results = json.loads(out.stdout)
    assert [r["pods"] for r in results] == [4, 8]
    for r in results:
        assert {"pods", "cpu_cores", "rss_mib", "floor_cpu_cores"} <= set(r)
        assert r["cpu_cores"] >= 0 and r["floor_cpu_cores"] >= 0
        assert 10 < r["rss_mib"] < 500
        assert r["failures"] == {} and r["not_started"] == []  # every collector ran and started
        assert r["files_per_tick"] > 3 * r["pods"]
