"""Preemption with and without pruning (docs/rules/scheduler-preemption.md#pruning) on the default
profile: N nodes full of low-priority pods — most of them small (4 cores), a few big (32 cores) — and
a wave of high-priority pods too big for the small nodes, so preemption can only help on the big ones.
Kube's dry run tries every node until it has enough candidates; pruning drops the small nodes in one
numpy pass. Each wave pod runs Filter then PostFilter, and the chosen preemption is applied (victims
removed, the pod bound there) before the next; the pruned and unpruned runs start from identical
clusters with the same rng seed and must decide the same (`identical`). Only PostFilter is timed.

`cannot_preempt_ms`: the median PostFilter (pruned) of a pod that can preempt nowhere (it asks for
more than any node has) on the same cluster.
Prints one JSON object: nodes, pods, wave, with_pruning_per_s, without_pruning_per_s, speedup,
identical, cannot_preempt_ms.
Usage: nice -n 10 python bench/preemption.py [--nodes 5000] [--wave 10] [--big-share 0.02] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from scheduler.framework.cycle_state import CycleState  # noqa: E402
from scheduler.framework.runtime import Framework  # noqa: E402
from scheduler.framework.snapshot import PodInfo, Snapshot  # noqa: E402
from scheduler.plugins.defaultpreemption import DefaultPreemption, PreemptionResult  # noqa: E402
from scheduler.registry import Handle, build_framework, default_profile  # noqa: E402

Obj = dict[str, Any]
LOW, HIGH = 0, 1000
PODS_PER_NODE = 8


def _node(name: str, cores: int) -> Obj:
    alloc = {"cpu": str(cores), "memory": f"{cores * 4}Gi", "pods": "110"}
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}, "spec": {},
            "status": {"allocatable": alloc, "capacity": alloc}}  # fmt: skip


def _pod(name: str, prio: int, cpu_milli: int, node: str | None = None, start: int = 0) -> Obj:
    spec: Obj = {
        "priority": prio,
        "containers": [{"name": "c", "resources": {"requests": {
            "cpu": f"{cpu_milli}m", "memory": f"{cpu_milli * 4}Mi"}}}],
    }  # fmt: skip
    if node:
        spec["nodeName"] = node
    status: Obj = {"startTime": f"2026-01-01T00:{start // 60 % 60:02d}:{start % 60:02d}Z"} if node else {}
    return {"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": spec, "status": status}


def cluster(nodes: int, big_share: float, seed: int) -> tuple[list[Obj], list[Obj]]:
    rnd = random.Random(seed)
    objs, pods = [], []
    for i in range(nodes):
        name = f"node-{i:05d}"
        cores = 32 if rnd.random() < big_share else 4
        objs.append(_node(name, cores))
        for k in range(PODS_PER_NODE):  # full: each pod an eighth of the node
            pods.append(_pod(f"low-{i}-{k}", LOW + rnd.randrange(3), cores * 125, name, rnd.randrange(3600)))
    return objs, pods


def profile(prune: bool, seed: int) -> tuple[Framework, DefaultPreemption]:
    fw = build_framework(default_profile(), Handle(rng=random.Random(seed)))
    dp = next(p for p in fw.post_filters if isinstance(p, DefaultPreemption))
    dp.prune = prune
    return fw, dp


def post_filter(fw: Framework, dp: DefaultPreemption, snap: Snapshot, pod: Obj) -> tuple[float, Any]:
    state = CycleState(1_800_000_000.0)
    for pre in fw.pre_filters:
        pre.pre_filter(state, pod, snap)
    _, rejections = fw.filter_all(state, pod, snap)
    statuses = rejections.as_dict()
    t0 = time.perf_counter()
    st = dp.post_filter(state, pod, snap, statuses)
    took = time.perf_counter() - t0
    r = PreemptionResult.of(state)
    decision = (st.code.name, r.node, [v["metadata"]["name"] for v in r.victims]) if r else (st.code.name,)
    return took, (decision, r)


def apply(snap: Snapshot, pod: Obj, r: PreemptionResult | None) -> None:
    if r is None or r.node is None:
        return
    info = snap.infos[snap.index[r.node]]
    for v in r.victims:
        info.remove_pod(PodInfo.of(v).key, info.generation + 1)
    bound = {**pod, "spec": {**pod["spec"], "nodeName": r.node}}
    info.add_pod(PodInfo.of(bound), info.generation + 1)
    snap.refresh([info])


def wave(
    nodes: list[Obj], pods: list[Obj], n: int, prune: bool, seed: int
) -> tuple[float, list[Any], Snapshot]:
    snap = Snapshot.build(nodes, pods)
    fw, dp = profile(prune, seed)
    total, decisions = 0.0, []
    for k in range(n):
        p = _pod(f"high-{k}", HIGH, 8000)  # two cores more than a small node has
        took, (decision, r) = post_filter(fw, dp, snap, p)
        total += took
        decisions.append(decision)
        apply(snap, p, r)
    return total, decisions, snap


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--wave", type=int, default=10, help="high-priority pods per run (unpruned ~1-2 s each)")
    ap.add_argument("--big-share", type=float, default=0.02, help="share of 32-core nodes")
    ap.add_argument("--cannot", type=int, default=21, help="PostFilters of a pod that cannot preempt")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    nodes, pods = cluster(a.nodes, a.big_share, a.seed)
    with_s, with_d, snap = wave(nodes, pods, a.wave, True, a.seed)
    without_s, without_d, _ = wave(nodes, pods, a.wave, False, a.seed)
    fw, dp = profile(True, a.seed)
    times = [post_filter(fw, dp, snap, _pod(f"huge-{k}", HIGH, 64000))[0] for k in range(a.cannot)]
    print(json.dumps({
        "nodes": a.nodes,
        "pods": len(pods),
        "wave": a.wave,
        "with_pruning_per_s": round(a.wave / with_s, 2),
        "without_pruning_per_s": round(a.wave / without_s, 2),
        "speedup": round(without_s / with_s, 1),
        "identical": with_d == without_d,
        "preempted": sum(1 for d in with_d if len(d) > 1 and d[1] is not None),
        "cannot_preempt_ms": round(statistics.median(times) * 1000, 3),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
