"""bench/scheduler_scale.py at a tiny scale (200 nodes, 100 pods/s, 3 s after a 1 s warm-up), in-process
and as two shard processes against the cluster process (`--shards 1,2`): it prints the documented JSON,
pods bind through the real loop with positive latencies, both shards bind, none twice and no node is
overcommitted, and the driver's churn (node replacements, pod deletions, NodeMetric refreshes) reaches
the scheduler. Plus the pieces the numbers rest on: the nearest-rank percentile, the world's mix, the
shared world staying the one bench/scheduler_throughput.py has always drawn, the truth checks
(overcommitted nodes, a pod bound twice) and the fan-out of events to the shards
(docs/testing.md#scheduler-scale-benchmark)."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import queue
import threading
from multiprocessing.connection import Connection
from typing import Any

import pytest

from bench import scheduler_scale
from bench._scale_driver import Pending, Recorder, build_world, overcommitted_nodes
from bench._scheduler_world import make_world, node_capacity, pod_shape
from bench._shard_cluster import ClusterDriver, FanOut, Ops
from bench._shard_proc import STOP

KEYS = {
    "nodes", "offered_pods_per_s", "pods_per_s", "p50_ms", "p99_ms", "p999_ms", "max_ms", "cpu_ms_per_pod",
    "sched_cpu_ms_per_pod", "informer_cpu_ms_per_pod", "driver_cpu_ms_per_pod", "unschedulable",
    "unschedulable_attempts", "preemption_victims", "node_events", "metric_updates", "pod_deletes",
    "pending_at_end", "unbound_after_drain", "informer_backlog_at_end", "keeps_up", "timed_out", "error",
    "rate", "seconds", "warmup", "node_churn", "percentage", "rich_share", "bind_workers", "prefilled_pods",
    "pod_lifetime_s", "setup_s", "prime_s", "rss_mib", "loadavg_1m", "shards",
}  # fmt: skip
ENTRY = {
    "shards", "pods_per_s", "offered_pods_per_s", "p50_ms", "p99_ms", "p999_ms", "cpu_ms_per_pod",
    "sched_cpu_ms_per_pod", "informer_cpu_ms_per_pod", "unbound_after_drain", "informer_backlog_at_end",
    "keeps_up", "error", "overcommitted_nodes", "bound_twice", "arbiter_rejections", "binds_by_shard", "mode",
}  # fmt: skip
PROCESS_ENTRY = ENTRY | {
    "cluster_cpu_ms_per_pod", "cluster_rss_mib", "arbiter", "arbiter_reasons", "event_batches",
    "event_mib_per_shard", "fanout_backlog_at_end",
}  # fmt: skip


@pytest.mark.timeout(90)
def test_a_tiny_run_binds_pods_and_reports_the_documented_keys(capsys: pytest.CaptureFixture[str]) -> None:
    args = "--nodes 200 --rate 100 --seconds 3 --warmup 1 --drain 2 --fill 0.3 --shards 1,2"
    result = scheduler_scale.main(args.split())
    assert json.loads(capsys.readouterr().out) == result
    assert set(result) == KEYS
    one, two = result["shards"]
    assert set(one) == ENTRY and set(two) == PROCESS_ENTRY, result["shards"]
    assert (one["shards"], one["mode"], two["shards"], two["mode"]) == (1, "in-process", 2, "processes")
    assert one["pods_per_s"] == result["pods_per_s"] and one["p99_ms"] == result["p99_ms"]
    for entry in (one, two):
        assert entry["bound_twice"] == 0 and entry["overcommitted_nodes"] == 0, entry
        assert entry["error"] is None and entry["pods_per_s"] > 0, entry
        assert 0 < entry["p50_ms"] <= entry["p99_ms"] and entry["cpu_ms_per_pod"] > 0, entry
    # Both shards bound pods (the gate split them), every bind through the arbiter on shard 0.
    assert len(two["binds_by_shard"]) == 2 and min(two["binds_by_shard"]) > 0, two
    assert two["arbiter"]["accepted"] >= sum(two["binds_by_shard"]), two
    assert two["arbiter_rejections"] == two["arbiter"]["rejected"] == sum(two["arbiter_reasons"].values()), (
        two
    )
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


def test_overcommitted_nodes_counts_what_the_runs_binds_overfilled() -> None:
    world = build_world(3, 0.5, 0.0, seed=3)
    assert overcommitted_nodes(world) == 0
    name = world.names[0]
    alloc = world.nodes[name].node["status"]["allocatable"]
    cores = int(alloc["cpu"])
    pod = world.new_pod("p")
    while "cpu" not in pod["spec"]["containers"][0]["resources"]["requests"]:  # an LS pod
        pod = world.new_pod("p")
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = str(cores)  # a node's worth
    world.place("bench/" + pod["metadata"]["name"], name, pod)
    assert overcommitted_nodes(world) == 1
    # The same excess from a prefilled pod (random draws of the prefill) is not the run's doing.
    world = build_world(3, 0.5, 0.0, seed=3)
    key = next(k for k in world.nodes[name].pods if "cpu" in pod_shape_names(world.live[k].pod))
    world.live[key].pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = str(cores)
    assert overcommitted_nodes(world) == 0


def pod_shape_names(pod: dict[str, Any]) -> set[str]:
    return set(pod["spec"]["containers"][0]["resources"]["requests"])


class _Posts:
    def __init__(self) -> None:
        self.events: list[tuple[str, tuple[Any, ...]]] = []

    def post(self, handler: str, *args: Any) -> None:
        self.events.append((handler, args))


def test_the_cluster_binds_a_pod_once_and_tells_every_shard() -> None:
    world = build_world(2, 0.0, 0.0, seed=1)
    rec, posts, inbox = Recorder(), _Posts(), queue.SimpleQueue[object]()
    rec.window = (0.0, float("inf"))
    pod = world.new_pod("p")
    pending = {"bench/" + pod["metadata"]["name"]: Pending(pod, 10.0)}
    driver = ClusterDriver(world, posts, Ops(), pending, inbox, rec, 1.0, 0.0, 30.0, 0.0, threading.Event(),
                           shards=2)  # fmt: skip
    key, node = "bench/" + pod["metadata"]["name"], world.names[1]
    driver.handle(("bind", 1, key, node, 10.25), start=0.0)
    assert not pending and driver.binds_by_shard == [0, 1] and driver.bound_twice == 0
    assert rec.binds_in_window() == 1 and rec.latencies({}, 0.0) == [0.25]
    [(handler, (old, new))] = posts.events
    assert handler == "pod_update" and old is pod and new["spec"]["nodeName"] == node
    assert world.live[key].node == node and key in world.nodes[node].pods
    driver.handle(("bind", 0, key, world.names[0], 10.5), start=0.0)  # another shard, the same pod
    assert driver.bound_twice == 1 and driver.binds_by_shard == [0, 1] and len(posts.events) == 1
    assert world.live[key].node == node


def test_the_fan_out_writes_one_pickled_batch_to_every_shard_then_stop() -> None:
    pipes = [os.pipe() for _ in range(2)]
    readers = [Connection(r, writable=False) for r, _ in pipes]
    writers = [Connection(w, readable=False) for _, w in pipes]
    fan = FanOut()
    fan.start(writers)
    try:
        fan.post("pod_add", {"metadata": {"name": "a"}})
        fan.post("node_delete", {"metadata": {"name": "n"}})
        fan.flush()
        fan.flush()  # nothing new: nothing written
        first = [r.recv_bytes() for r in readers]
        assert first[0] == first[1]  # the same bytes: pickled once
        batch = pickle.loads(first[0])
        assert [h for h, _ in batch] == ["pod_add", "node_delete"]
        assert batch[0][1] == ({"metadata": {"name": "a"}},)
        fan.close()
        fan.post("pod_add", {"metadata": {"name": "late"}})  # after close: dropped
        fan.flush()
        for r in readers:
            assert pickle.loads(r.recv_bytes()) == [(STOP, ())]
            assert not r.poll(0.05)
        fan.join(timeout=5)
        writing = [
            t for t in threading.enumerate() if t.name.startswith("shard-") and t.name.endswith("-writer")
        ]
        assert fan.started and not writing
        assert fan.posted == 2 and fan.batches == 1
    finally:
        fan.close()
        fan.join(timeout=5)
        for c in [*readers, *writers]:
            c.close()


@pytest.mark.parametrize("bad", ["0", "1,x", "17", ""])
def test_shards_must_be_a_list_of_counts(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        scheduler_scale.parse_args(["--shards", bad])
    assert "--shards" in capsys.readouterr().err
    assert scheduler_scale.parse_args(["--shards", "1,2,4"]).shards == (1, 2, 4)
