"""Per-view cost of a node joining and leaving in place (docs/scheduler-scale.md#node-list): a snapshot of
N nodes with pods (labels, affinity terms, priorities, volumes) and NodeMetrics, the views of
InterPodAffinity, PodTopologySpread, LoadAwareScheduling, DefaultPreemption's pruning and the volume
plugins registered and warmed (kept per-input results filled); then, per event, one node removed and
one added through `Snapshot.apply_nodes`, timing each view's `resize` + `refresh` of the new row, and
separately each view's full `rebuild` (what a view without `resize` costs per event). The heap is
frozen after the setup, as the daemon does after its initial sync (scheduler.scheduler.freeze_heap).

Prints one JSON object: nodes, pods, events, apply_nodes_us (the whole in-place update), and per view
follow_us = resize_us + refresh_us (median, p90 over the events) and rebuild_ms (median of 3).
Usage: python bench/view_resize.py [--nodes 20000] [--events 50] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from apis.kubeobjects import Node, Pod  # noqa: E402
from apis.nodemetric import NodeMetric  # noqa: E402
from scheduler.framework.cycle_state import CycleState  # noqa: E402
from scheduler.framework.listers import map_requirements  # noqa: E402
from scheduler.framework.snapshot import NodeInfo, PodInfo, RowView, Snapshot  # noqa: E402
from scheduler.framework.volumes import VolumeObjects  # noqa: E402
from scheduler.plugins.defaultpreemption.freeable import VIEW_KEY, FreeableView  # noqa: E402
from scheduler.plugins.interpodaffinity import InterPodAffinity  # noqa: E402
from scheduler.plugins.interpodaffinity.prefilter import pod_index as affinity_index  # noqa: E402
from scheduler.plugins.loadaware import LoadAwareScheduling  # noqa: E402
from scheduler.plugins.podtopologyspread import podindex as spread  # noqa: E402
from scheduler.plugins.volume.binding_filter import label_index  # noqa: E402
from scheduler.plugins.volume.common import pod_volumes_view  # noqa: E402
from scheduler.plugins.volume.limits import _LimitsView  # noqa: E402
from scheduler.plugins.volume.limits_intree import EBSLimits, _LimitColumn  # noqa: E402
from scheduler.scheduler import freeze_heap  # noqa: E402

NOW = 1_800_000_000.0
ZONES = [f"z{i}" for i in range(20)]
APPS = ["web", "db", "cache", "batch", "api"]


def node(name: str, rnd: random.Random) -> Node:
    labels = {"zone": rnd.choice(ZONES), "kubernetes.io/hostname": name, "rack": f"r{rnd.randrange(200)}"}
    alloc = {"cpu": "32", "memory": "128Gi", "pods": "110", "attachable-volumes-aws-ebs": "25"}
    return cast(Node, {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": alloc}})


def pod(name: str, on: str, rnd: random.Random) -> Pod:
    app = rnd.choice(APPS)
    spec: dict[str, Any] = {
        "nodeName": on,
        "priority": rnd.choice([0, 100, 1000, 5000]),
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}],
    }
    if rnd.random() < 0.2:
        term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    if rnd.random() < 0.1:
        spec["volumes"] = [{"name": "v", "awsElasticBlockStore": {"volumeID": f"vol-{name}"}}]
    meta = {"name": name, "namespace": "ns", "labels": {"app": app}}
    return cast(Pod, {"metadata": meta, "spec": spec})


def metric(name: str) -> NodeMetric:
    usage = {"cpu": "4", "memory": "16Gi"}
    status = {"updateTime": "2027-01-15T08:00:00Z", "nodeMetric": {"nodeUsage": {"resources": usage}}}
    return NodeMetric.from_dict({"metadata": {"name": name}, "status": status})


def node_info(name: str, rnd: random.Random, pods: int) -> NodeInfo:
    info = NodeInfo.of(node(name, rnd))
    for k in range(pods):
        info.add_pod(PodInfo.of(pod(f"{name}-p{k}", name, rnd)), 0)
    return info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=20_000)
    ap.add_argument("--pods-per-node", type=int, default=4)
    ap.add_argument("--events", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    snap = Snapshot([node_info(f"n{i}", rnd, a.pods_per_node) for i in range(a.nodes)], seed=a.seed)
    store = VolumeObjects()
    load = LoadAwareScheduling({}, clock=lambda: NOW)
    for name in snap.names:
        load.on_node_metric(name, metric(name))
    incoming = pod("incoming", "", rnd)
    del incoming["spec"]["nodeName"]
    views: dict[str, Callable[[], RowView]] = {
        "interpodaffinity.PodIndex": lambda: _warm_affinity(snap, incoming),
        "podtopologyspread.PodIndex": lambda: _warm_spread(snap),
        "podtopologyspread.CodeColumn": lambda: snap.view(
            ("bench", "zone"), lambda: spread.CodeColumn(lambda n: n["metadata"]["labels"]["zone"])
        ),
        "loadaware.LoadRows": lambda: _warm_load(load, snap, incoming),
        "defaultpreemption.FreeableView": lambda: _warm_freeable(snap),
        "volume.PodVolumesView": lambda: pod_volumes_view(snap),
        "volume.limits._LimitsView": lambda: _warm_limits(snap, store),
        "volume.limits_intree._LimitColumn": lambda: snap.view(
            ("bench", "ebs"), lambda: _LimitColumn(EBSLimits(store))
        ),
        "volume.binding_filter.LabelIndex": lambda: _warm_labels(snap),
    }
    made = {name: make() for name, make in views.items()}
    freeze_heap()  # as the daemon does after its initial sync
    by_id = {id(v): name for name, v in made.items()}
    spent: dict[str, list[float]] = defaultdict(list)
    method_times: dict[tuple[str, str], float] = defaultdict(float)
    for v in list(snap._views.values()):
        known = by_id.get(id(v))
        if known is not None:
            _time_methods(v, known, spent, method_times)
    resize: dict[str, list[float]] = defaultdict(list)
    by_method: dict[tuple[str, str], list[float]] = defaultdict(list)
    total: list[float] = []
    for e in range(a.events):
        gone = rnd.choice(snap.names)
        added = node_info(f"new{e}", rnd, a.pods_per_node)
        spent.clear()
        t0 = time.perf_counter()
        snap.apply_nodes([added], [gone])
        total.append(time.perf_counter() - t0)
        for name, times in spent.items():
            resize[name].append(sum(times))
            for method, t in method_times.items():
                if method[0] == name:
                    by_method[method].append(t)
        method_times.clear()
    out: dict[str, Any] = {"nodes": a.nodes, "pods": sum(len(i.pods) for i in snap.infos), "events": a.events}
    out["apply_nodes_us"] = _stats(total)
    per: dict[str, Any] = {}
    for name, v in made.items():
        rebuilds = []
        for _ in range(3):
            t0 = time.perf_counter()
            type(v).rebuild(v, snap)
            rebuilds.append(time.perf_counter() - t0)
        per[name] = {
            "follow_us": _stats(resize[name]),
            "resize_us": _stats(by_method[(name, "resize")]),
            "refresh_us": _stats(by_method[(name, "refresh")]),
            "rebuild_ms": round(statistics.median(rebuilds) * 1e3, 1),
        }
    out["views"] = per
    print(json.dumps(out))


def _stats(xs: list[float]) -> dict[str, float]:
    ys = sorted(xs)
    if not ys:
        return {}
    return {
        "median": round(statistics.median(ys) * 1e6, 1),
        "p90": round(ys[int(0.9 * (len(ys) - 1))] * 1e6, 1),
    }


def _time_methods(
    v: RowView, name: str, spent: dict[str, list[float]], methods: dict[tuple[str, str], float]
) -> None:
    for method in ("resize", "refresh"):
        inner = getattr(v, method)

        def timed(*args: Any, _inner: Any = inner, _method: str = method) -> Any:
            t0 = time.perf_counter()
            try:
                return _inner(*args)
            finally:
                spent[name].append(time.perf_counter() - t0)
                methods[(name, _method)] += spent[name][-1]

        setattr(v, method, timed)


def _warm_affinity(snap: Snapshot, incoming: Pod) -> RowView:
    plugin = InterPodAffinity()
    state = CycleState(NOW)
    plugin.pre_filter(state, incoming, snap)
    return affinity_index(snap)


def _warm_spread(snap: Snapshot) -> RowView:
    index = spread.pod_index(snap)
    for app in APPS:
        index.counts("ns", map_requirements({"app": app}))
    return index


def _warm_load(plugin: LoadAwareScheduling, snap: Snapshot, incoming: Pod) -> RowView:
    state = CycleState(NOW)
    plugin.pre_filter(state, incoming, snap)
    plugin.filter_all(state, incoming, snap)
    return plugin.rows(snap)


def _warm_freeable(snap: Snapshot) -> RowView:
    view = snap.view(VIEW_KEY, FreeableView)
    view.freeable(1000)
    return view


def _warm_limits(snap: Snapshot, store: VolumeObjects) -> RowView:
    view = snap.view(("bench", "limits"), lambda: _LimitsView(store))
    view.array("attachable-volumes-aws-ebs")
    return view


def _warm_labels(snap: Snapshot) -> RowView:
    index = label_index(snap, "zone")
    index.rows_of(frozenset({"z1"}))
    return index


if __name__ == "__main__":
    main()
