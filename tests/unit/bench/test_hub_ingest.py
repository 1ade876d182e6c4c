"""Smoke test of bench/hub_ingest.py: its per-send stamp merges into the report's status, and a tiny
run (40 agents, one watcher, 1 s; plaintext and TLS) prints the documented JSON with the reports
delivered."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from proto.koord.v1 import metrichub_pb2 as pb

REPO = Path(__file__).resolve().parents[3]


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hub_ingest", REPO / "bench" / "hub_ingest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_stamp_sets_only_the_update_time() -> None:
    bench = _bench()
    base = bench.make_report("node-7", stamped=False)
    sent = pb.NodeMetricReport.FromString(base + bench.stamp(1_700_000_000.5))
    assert sent.status.update_time.ToNanoseconds() == 1_700_000_000_500_000_000
    sent.status.ClearField("update_time")
    assert sent == pb.NodeMetricReport.FromString(base)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("tls", [[], ["--tls"]])
def test_hub_ingest_smoke(tls: list[str]) -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "hub_ingest.py"), "--nodes", "40", "--seconds", "1",
         "--warmup", "0.5", "--watchers", "1", "--agent-procs", "1", "--channels", "2", *tls],
        capture_output=True, text=True, timeout=110, cwd=REPO, check=True,
    )  # fmt: skip
    result = json.loads(out.stdout)
    assert result["nodes"] == 40 and result["errors"] == 0 and result["tls"] == bool(tls)
    assert result["reports_per_s"] > 0 and result["delivery_p99_ms"] is not None
    assert result["delivered_ratio"] > 0.5
