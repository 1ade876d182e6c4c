"""Scheduler throughput: N nodes with NodeMetrics and P pending pods through the real scheduling loop
(queue, incremental snapshot, default profile, Reserve, assume, bind pool) with an in-process binder
that records decisions. Every node is filtered and scored for every pod (no sampling). The nodes,
NodeMetrics and pods come from bench/_scheduler_world.py (shared with bench/scheduler_scale.py).

The oracle scheduler (tests/oracles: every plugin's readable per-node form, run node by node by the
same Framework) is too slow for all P pods, so it runs from an identical start over the first
`--reference-pods` pods; decisions are deterministic, so its decisions must equal the production run's
first ones (`identical`).

Prints one JSON object: nodes, pods, pods_per_s, reference_pods, reference_pods_per_s, identical,
speedup, scheduled, unschedulable.
Usage: python bench/scheduler_throughput.py [--nodes 5000] [--pods 10000] [--reference-pods 100]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any, cast

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # the oracles live under tests/
    sys.path.insert(0, str(REPO))

from apis.kubeobjects import Node, Pod  # noqa: E402
from apis.nodemetric import NodeMetric  # noqa: E402
from bench._scheduler_world import NOW, make_world  # noqa: E402
from scheduler.cache import SchedulerCache  # noqa: E402
from scheduler.framework.status import Status  # noqa: E402
from scheduler.queue import SchedulingQueue  # noqa: E402
from scheduler.registry import Handle, build_framework, default_profile  # noqa: E402
from scheduler.scheduler import Decision, Scheduler, freeze_heap  # noqa: E402
from tests.oracles.framework import oracle_framework  # noqa: E402


class RecordingBinder:
    def __init__(self) -> None:
        self.bound: dict[str, str] = {}
        self.lock = threading.Lock()

    def bind(self, pod: Pod, node: str) -> Status:
        with self.lock:
            self.bound[pod["metadata"]["name"]] = node
        return Status.success()


def run(
    nodes: list[dict[str, Any]],
    metrics: list[NodeMetric],
    pods: list[dict[str, Any]],
    reference: bool,
    seed: int,
) -> tuple[list[tuple[str, str | None]], float]:
    """Schedules every pod; returns (pod name, node) in the order the queue released them."""
    clock = NOW.timestamp
    # Seeded: ties are drawn at random as in production, and both runs draw the same nodes.
    fw = build_framework(default_profile(), Handle(clock=clock), rng=random.Random(seed))
    if reference:
        fw = oracle_framework(fw)
    la = next(p for p in fw.plugins if p.name == "LoadAwareScheduling")
    cache = SchedulerCache(clock=clock)
    for node in nodes:
        cache.add_node(cast(Node, node))
    for m in metrics:
        la.on_node_metric(m.metadata["name"], m)  # type: ignore[attr-defined]
    decisions: list[Decision] = []
    queue = SchedulingQueue(clock=clock)
    # The in-process binder does no I/O: bind inline (bind_workers=0) rather than through a pool.
    sched = Scheduler(
        fw,
        cache,
        queue,
        RecordingBinder(),
        clock=clock,
        on_decision=decisions.append,
        bind_workers=0,
    )
    freeze_heap()  # as SchedulerService.start does once its informers have synced
    for pod in pods:
        queue.add(cast(Pod, pod))
    order: list[tuple[str, str | None]] = []
    t0 = time.perf_counter()
    for _ in range(len(pods)):
        qpi = queue.pop(timeout=0)
        if qpi is None:
            break
        result = sched.schedule_pod(qpi)
        order.append((qpi.pod["metadata"]["name"], result.node))
    sched.wait_for_binds()
    elapsed = time.perf_counter() - t0
    return order, elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=10000)
    ap.add_argument("--reference-pods", type=int, default=100)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    n_nodes, n_pods = min(a.nodes, 20000), min(a.pods, 50000)  # bounded
    n_ref = min(a.reference_pods, n_pods)
    nodes, metrics, pods = make_world(n_nodes, n_pods, a.seed)
    fast, fast_s = run(nodes, metrics, pods, reference=False, seed=a.seed)
    # The reference replays the first n_ref pods the fast run's queue released, in that order.
    by_name = {p["metadata"]["name"]: p for p in pods}
    sample = [by_name[name] for name, _ in fast[:n_ref]]
    ref, ref_s = run(nodes, metrics, sample, reference=True, seed=a.seed)
    print(
        json.dumps(
            {
                "nodes": n_nodes,
                "pods": n_pods,
                "pods_per_s": round(n_pods / fast_s, 1),
                "reference_pods": n_ref,
                "reference_pods_per_s": round(n_ref / ref_s, 2),
                "identical": fast[:n_ref] == ref,
                "speedup": round((n_pods / fast_s) / (n_ref / ref_s), 1),
                "scheduled": sum(1 for _, x in fast if x is not None),
                "unschedulable": sum(1 for _, x in fast if x is None),
            }
        )
    )


if __name__ == "__main__":
    main()
