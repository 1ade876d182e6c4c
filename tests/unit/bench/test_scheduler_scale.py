"""bench/scheduler_scale.py at a tiny scale (200 nodes, 100 pods/s, 3 s after a 1 s warm-up): it prints
the documented JSON, pods bind through the real loop with positive latencies, and the driver's churn
(node replacements, pod deletions, NodeMetric refreshes) reaches the scheduler. Plus the pieces the
numbers rest on: the nearest-rank percentile, the world's mix, and the shared world staying the one
bench/scheduler_throughput.py has always drawn (docs/testing.md#scheduler-scale-benchmark)."""

from __future__ import annotations

import hashlib
import json

import pytest

from bench import scheduler_scale
from bench._scale_driver import build_world
from bench._scheduler_world import make_world, node_capacity, pod_shape

KEYS = {
    "nodes", "offered_pods_per_s", "pods_per_s", "p50_ms", "p99_ms", "p999_ms", "max_ms", "cpu_ms_per_pod",
    "sched_cpu_ms_per_pod", "informer_cpu_ms_per_pod", "driver_cpu_ms_per_pod", "unschedulable",
    "unschedulable_attempts", "preemption_victims", "node_events", "metric_updates", "pod_deletes",
    "pending_at_end", "unbound_after_drain", "informer_backlog_at_end", "keeps_up", "timed_out", "error",
    "rate", "seconds", "warmup", "node_churn", "percentage", "rich_share", "bind_workers", "prefilled_pods",
    "pod_lifetime_s", "setup_s", "prime_s", "rss_mib", "loadavg_1m",
}  # fmt: skip


@pytest.mark.timeout(60)
def test_a_tiny_run_binds_pods_and_reports_the_documented_keys(capsys: pytest.CaptureFixture[str]) -> None:
    args = "--nodes 200 --rate 100 --seconds 3 --warmup 1 --drain 2 --fill 0.3"
    result = scheduler_scale.main(args.split())
    assert json.loads(capsys.readouterr().out) == result
    assert set(result) == KEYS
    # Timing-dependent facts carry the whole result, so a failure on a loaded machine says what ran.
    assert result["error"] is None and not result["timed_out"], result
    assert result["nodes"] == 200 and result["prefilled_pods"] > 200 * 5, result  # about 30 % full
    assert result["pods_per_s"] > 0 and 0 < result["offered_pods_per_s"] <= 101, result
    assert 0 < result["p50_ms"] <= result["p99_ms"] <= result["p999_ms"] <= result["max_ms"], result
    assert result["cpu_ms_per_pod"] > 0 and result["sched_cpu_ms_per_pod"] > 0, result
    # 1 node replaced per second (a delete and an add), 200/60 NodeMetrics per second, the prefilled
    # pods' lives (prefilled/rate seconds, about 36) ending uniformly.
    assert result["node_events"] >= 4 and result["metric_updates"] >= 6, result
    assert result["pod_deletes"] > 0, result
    assert result["rss_mib"] > 0


def test_percentile_is_nearest_rank_in_ms() -> None:
    values = [i / 1000 for i in range(1, 101)]  # 1..100 ms
    assert scheduler_scale.percentile(values, 50) == 50.0
    assert scheduler_scale.percentile(values, 99) == 99.0
    assert scheduler_scale.percentile(values, 100) == 100.0
    assert scheduler_scale.percentile([0.002], 99.9) == 2.0
    assert scheduler_scale.percentile([], 50) is None


def test_the_prefilled_world_holds_half_of_each_nodes_capacity() -> None:
    world = build_world(30, 0.5, 0.5, seed=3)
    assert len(world.nodes) == 30 and world.prefilled == len(world.live)
    for state in world.nodes.values():
        alloc = state.node["status"]["allocatable"]
        shape = (int(alloc["cpu"]), int(alloc["memory"].removesuffix("Gi")))
        assert len(state.pods) == round(0.5 * node_capacity(shape))
        cpu_m = sum(pod_shape(world.live[k].pod)[0] for k in state.pods)
        assert cpu_m < shape[0] * 1000  # LS and batch requests together stay under the node's cores
    rich = [p.pod for p in world.live.values() if p.pod["metadata"]["labels"]]
    assert rich and all(
        "topologySpreadConstraints" in p["spec"] or "podAntiAffinity" in p["spec"]["affinity"] for p in rich
    )


def test_the_shared_world_is_the_throughput_benchmarks() -> None:
    """The world bench/scheduler_throughput.py's seed 7 has always drawn (the digest of the objects its
    own make_world built before it moved to bench/_scheduler_world.py), so its numbers stay comparable."""
    nodes, metrics, pods = make_world(20, 30, seed=7)
    blob = json.dumps([nodes, [m.to_dict() for m in metrics], pods], sort_keys=True)
    assert hashlib.sha256(blob.encode()).hexdigest() == (
        "0b822930d39aa240c59af558f188eeba03b5d897cce569b4599db39f74846019"
    )
    assert ["priorityClassName" in p["spec"] for p in pods[:4]] == [True, False, False, True]
