"""Smoke test of bench/scheduler_events.py: a short run prints the documented JSON, the event mix adds up,
and the snapshot and pod views the incremental updates left equal those built from the cache anew
(`--check`: `digest` == `digest_from_scratch`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.timeout(180)
def test_scheduler_events_bench_smoke() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "scheduler_events.py"),
         "--nodes", "40", "--events", "500", "--every", "7", "--check"],
        capture_output=True, text=True, timeout=170, cwd=REPO, check=True,
    )  # fmt: skip
    result = json.loads(out.stdout)
    assert set(result) >= {"nodes", "pods", "events", "us_per_event", "us_per_update", "digest"}
    assert result["nodes"] == 40 and result["pods"] > 0
    assert sum(result["events"].values()) == 500 and result["events"]["bind"] > 0
    assert all(v > 0 for v in result["us_per_event"].values() if v is not None)
    assert result["digest"] == result["digest_from_scratch"]


def test_scheduler_events_bench_refuses_a_bad_size() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "scheduler_events.py"), "--every", "0"],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert out.returncode == 2 and "--every" in out.stderr
