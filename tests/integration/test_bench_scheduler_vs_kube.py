"""Smoke test of bench/scheduler_vs_kube.py (docs/testing.md#scheduler-vs-kube-benchmark) at a tiny size
on the session's control plane: koord-scheduler and the real kube-scheduler v1.20.2 each bind every one of
their pods, the JSON carries every documented key, and the bench leaves none of its objects behind.

kube-scheduler comes from build-kube.sh's cache (`make deps`); a missing binary is an error, not a skip.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from bench.scheduler_vs_kube import KOORD, KUBE, LABEL, measure
from koord.localcluster.controlplane import ControlPlane

pytestmark = pytest.mark.apiserver

KEYS = {
    "nodes", "pods", "koord_pods_per_s", "kube_pods_per_s", "koord_cpu_ms_per_pod", "kube_cpu_ms_per_pod",
    "koord_rss_mib", "kube_rss_mib", "same_outcome", "loadavg_1m", "runs",
}  # fmt: skip
RUN_KEYS = {
    "nodes", "mode", "scheduler", "pods_per_s", "cpu_ms_per_pod", "rss_mib", "bound", "unschedulable",
    "seconds", "timed_out",
}  # fmt: skip


@pytest.mark.timeout(240)
def test_both_schedulers_bind_every_pod(control_plane: ControlPlane, kube: Any, tmp_path: Path) -> None:
    result = measure(control_plane, [20], 40, ["backlog"], 1, timeout=120, workdir=tmp_path)
    json.dumps(result)  # printable as is
    assert set(result) == KEYS
    assert (result["nodes"], result["pods"], result["same_outcome"]) == (20, 40, True)
    runs = result["runs"]
    assert sorted(r["scheduler"] for r in runs) == sorted([KOORD, KUBE])
    for r in runs:
        assert set(r) == RUN_KEYS, r
        assert (r["nodes"], r["mode"], r["bound"], r["unschedulable"], r["timed_out"]) == (
            20, "backlog", 40, 0, False
        ), r  # fmt: skip
        assert r["pods_per_s"] > 0 and r["seconds"] > 0
        # real process figures, not placeholders: a scheduler burns CPU and holds tens of MiB at least
        assert r["cpu_ms_per_pod"] > 0 and r["rss_mib"] > 10
    for s in ("koord", "kube"):
        mine = next(r for r in runs if r["scheduler"] == f"{s}-scheduler")
        assert result[f"{s}_pods_per_s"] == mine["pods_per_s"]
        assert result[f"{s}_rss_mib"] == mine["rss_mib"]
    # its nodes, NodeMetrics-bearing nodes and pods are gone from the shared API server
    core = client.CoreV1Api(kube)
    assert not core.list_node(label_selector=LABEL).items
    assert not core.list_pod_for_all_namespaces(label_selector=LABEL).items
