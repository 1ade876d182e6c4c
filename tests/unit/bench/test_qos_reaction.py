"""Smoke test of bench/qos_reaction.py: two trials (one suppress, one evict) print the documented JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.timeout(60)
def test_qos_reaction_smoke() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "qos_reaction.py"), "--trials", "2", "--time-limit", "20"],
        capture_output=True,
        text=True,
        timeout=50,
        cwd=REPO,
        check=True,
    )
    result = json.loads(out.stdout)
    assert {"trials", "p50_ms", "p99_ms", "collect_interval_ms"} <= set(result)
    assert result["collect_interval_ms"] == 1000
    assert result["trials"] == 2
    assert result["timeouts"] == {"suppress": 0, "evict": 0}
    assert result["collector_failures"] == {}
    assert 0 <= result["p50_ms"] <= result["p99_ms"] < 6000
