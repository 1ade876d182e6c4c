"""Smoke test of bench/shard_binder.py: a short run in each mode prints the documented JSON and every
bind reaches the arbiter and is accepted (the rate is the bench's to print, not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("mode", [[], ["--coalesce"], ["--batch", "16"]])
def test_short_run_prints_binds_per_s(mode: list[str]) -> None:
    args = ["--binds", "200", "--shards", "2", "--threads", "2", "--nodes", "20", *mode]
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "shard_binder.py"), *args],
        capture_output=True, text=True, timeout=170, cwd=REPO, check=True,
    )  # fmt: skip
    r = json.loads(out.stdout)
    assert r["binds"] == r["accepted"] == 200
    assert isinstance(r["binds_per_s"], float) and r["binds_per_s"] > 0
