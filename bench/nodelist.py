"""Node list micro-benchmark (docs/scheduler-scale.md#node-list): the time to bring a scheduling
snapshot of N nodes up to date after one node joins, leaves or changes, with every view of the default
profile registered (a few pods of each kind are scheduled first, so the plugins make their views).

`before`: what a node joining or leaving used to cost — every NodeInfo copied and the snapshot rebuilt
(rows sorted by name, every view rebuilt). `after`: `SchedulerCache.update_snapshot` on the in-place
path (`Snapshot.apply_nodes`: rows moved, views resized). Also lists the views that have no `resize`
and are therefore still rebuilt on each join or leave.

Prints one JSON object: nodes, pods, views, views_without_resize, before_ms (rebuild), after_us
(add/remove/update: median and p90 over `--events` events each).
Usage: python bench/nodelist.py [--nodes 20000] [--events 200] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any, cast

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from apis.kubeobjects import Node, Pod  # noqa: E402
from scheduler.cache import SchedulerCache, copy_node_info  # noqa: E402
from scheduler.framework.cycle_state import CycleState  # noqa: E402
from scheduler.framework.snapshot import Snapshot  # noqa: E402
from scheduler.registry import Handle, build_framework, default_profile  # noqa: E402

NOW = 1_800_000_000.0
IMAGES = ["nginx:1", "redis:7", "busybox", "app:v2"]


def make_node(name: str, rnd: random.Random, version: int = 0) -> Node:
    images = [{"names": [i], "sizeBytes": 200 * 1024 * 1024} for i in IMAGES if rnd.random() < 0.5]
    labels = {"zone": f"z{rnd.randrange(8)}", "kubernetes.io/hostname": name, "v": str(version)}
    spec: dict[str, Any] = {}
    if rnd.random() < 0.1:
        spec["taints"] = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    alloc = {"cpu": rnd.choice(["16", "32", "64"]), "memory": "128Gi", "pods": "110"}
    return cast(
        Node,
        {
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
            "status": {"allocatable": alloc, "images": images},
        },
    )


def make_pod(name: str, node: str | None, rnd: random.Random, kind: int) -> Pod:
    container: dict[str, Any] = {
        "name": "c",
        "image": rnd.choice(IMAGES),
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
    }
    if kind == 1:
        container["ports"] = [{"containerPort": 80, "hostPort": 8000 + rnd.randrange(4)}]
    spec: dict[str, Any] = {"containers": [container], "schedulerName": "koord-scheduler"}
    app = f"app{rnd.randrange(5)}"
    if node is not None:
        spec["nodeName"] = node
    elif kind == 2:
        term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "zone"}
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    elif kind == 3:
        spec["topologySpreadConstraints"] = [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"app": app}}},
        ]  # fmt: skip
    elif kind == 4:
        expr = {"key": "zone", "operator": "In", "values": ["z1", "z2"]}
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [expr]}]}}}  # fmt: skip
    meta = {"name": name, "namespace": "bench", "uid": name, "labels": {"app": app}}
    return cast(Pod, {"metadata": meta, "spec": spec, "status": {"phase": "Running" if node else "Pending"}})


def timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def summary(seconds: list[float]) -> dict[str, float]:
    us = sorted(s * 1e6 for s in seconds)
    return {"median": round(statistics.median(us), 1), "p90": round(us[int(0.9 * (len(us) - 1))], 1)}


def run(n_nodes: int, events: int, seed: int) -> dict[str, Any]:
    rnd = random.Random(seed)
    cache = SchedulerCache(clock=lambda: NOW)
    names = [f"node-{i:05d}" for i in range(n_nodes)]
    for name in names:
        cache.add_node(make_node(name, rnd))
    pods = 0
    for k, name in enumerate(names):
        for j in range(2):
            cache.add_pod(make_pod(f"b-{k}-{j}", name, rnd, (k + j) % 2))
            pods += 1
    snap = Snapshot(seed=seed)
    cache.update_snapshot(snap)
    fw = build_framework(default_profile(), Handle(clock=lambda: NOW), rng=random.Random(seed))
    for k in range(10):  # every kind of pod: the plugins register their views
        fw.schedule(CycleState(NOW), make_pod(f"p{k}", None, rnd, k % 5), snap)
    views = sorted({type(v).__name__ for v in snap._views.values()})
    without = sorted({type(v).__name__ for v in snap._views.values() if not hasattr(v, "resize")})

    def old_path() -> None:  # what a node-set change cost before: copies of every node, a full rebuild
        snap.rebuild(sorted((copy_node_info(i) for i in snap.infos), key=lambda i: i.name), snap.resources)

    before = [timed(old_path) for _ in range(3)]
    cache.update_snapshot(snap)  # the snapshot was rebuilt behind the cache's back: resync once
    add, remove, update = [], [], []
    for e in range(events):
        name = f"new-{e:05d}"
        cache.add_node(make_node(name, rnd))
        add.append(timed(lambda: cache.update_snapshot(snap)))
        cache.remove_node(rnd.choice(snap.names))
        remove.append(timed(lambda: cache.update_snapshot(snap)))
        changed = rnd.choice(snap.names)
        cache.update_node(make_node(changed, rnd, version=e + 1))
        update.append(timed(lambda: cache.update_snapshot(snap)))
    assert snap.n == n_nodes and sorted(snap.names) == sorted(
        n["metadata"]["name"] for n in cache.list_nodes()
    )
    return {
        "nodes": n_nodes,
        "pods": pods,
        "views": views,
        "views_without_resize": without,
        "before_ms": {"rebuild_median": round(statistics.median(before) * 1e3, 1)},
        "after_us": {"add": summary(add), "remove": summary(remove), "update": summary(update)},
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=20_000)
    ap.add_argument("--events", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    print(json.dumps(run(a.nodes, a.events, a.seed)))


if __name__ == "__main__":
    main()
