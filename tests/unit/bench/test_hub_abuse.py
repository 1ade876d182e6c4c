"""Smoke test of bench/hub_abuse.py: short runs of both scenarios (a token flood; one node flooding 1 MiB
reports, the hub's RSS sampled) print the documented JSON; every honest report gets through and the
hub's memory stays within a generous bound. Latency figures are the bench's to print, not asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def run(*args: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "hub_abuse.py"), *args, "--seconds", "3", "--honest", "3"],
        capture_output=True, text=True, timeout=170, cwd=REPO, check=True,
    )  # fmt: skip
    result: dict[str, object] = json.loads(out.stdout)
    return result


@pytest.mark.timeout(180)
def test_a_token_flood_leaves_honest_agents_served() -> None:
    r = run("tokens", "--flooders", "30", "--review-ms", "20")
    assert r["honest_calls"] == r["honest_ok"] and isinstance(r["honest_ok"], int) and r["honest_ok"] >= 6
    outcomes = r["abuser_outcomes"]
    assert isinstance(outcomes, dict) and "OK" not in outcomes and outcomes.get("RESOURCE_EXHAUSTED", 0) > 0
    assert isinstance(r["token_reviews"], int) and r["token_reviews"] <= 3 + 10 + 0.5 * 10  # honest + budget
    assert r["honest_p99_ms"] is not None


@pytest.mark.timeout(180)
def test_a_report_flood_keeps_the_hub_small() -> None:
    r = run("flood", "--streams", "8")
    assert r["honest_calls"] == r["honest_ok"]
    stored, history = r["stored_bytes"], r["history_bytes"]
    assert isinstance(stored, int) and isinstance(history, int)
    assert stored < 2 << 20 and history < 8 << 20  # one 1 MiB report accepted per 8 s, plus the honest
    start, peak = r["hub_rss_mib_start"], r["hub_rss_mib_max"]
    assert isinstance(start, float) and isinstance(peak, float) and peak - start < 400
