"""Smoke test of bench/elasticquota.py: a short run prints the documented JSON for the tree it built, with
positive timings in order (median ≤ p90). The timings are the bench's output, never compared with each
other here: a busy machine may slow either one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.timeout(120)
def test_elasticquota_bench_smoke() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "elasticquota.py"),
         "--parents", "3", "--children", "4", "--pods", "600", "--events", "40"],
        capture_output=True, text=True, timeout=100, cwd=REPO, check=True,
    )  # fmt: skip
    result = json.loads(out.stdout)
    assert set(result) == {"quotas", "pods", "events", "arrive_ms", "bind_us"}
    assert result["quotas"] == 3 + 3 * (1 + 4)  # root, system, default; each parent and its leaves
    assert result["pods"] == 640 and result["events"] == 40
    for key in ("arrive_ms", "bind_us"):
        assert 0 < result[key]["median"] <= result[key]["p90"], (key, result[key])


def test_elasticquota_bench_refuses_a_bad_size() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "elasticquota.py"), "--children", "0"],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert out.returncode == 2 and "--children=0" in out.stderr
