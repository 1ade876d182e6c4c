"""InterPodAffinity micro-benchmark (docs/rules/scheduler-interpodaffinity.md#performance): what
PreFilter and PreScore cost per incoming pod on a large snapshot, and how many label-selector tests
(`LabelSelector.matches`) they make now that the existing pods' term groups are indexed by what their
selectors require.

The cluster is bench/scheduler_scale.py's (bench/_scheduler_world.py): `--nodes` nodes in three zones,
`--pods` existing pods spread over them, a `--rich-share` of them "rich" pods of one of `--apps` apps —
half with a required anti-affinity on hostname and a preferred one on zone against their own app, half
with topology spread constraints; the anti-affinity selectors of the first `--inexact-share` of the
apps also require `track NotIn (canary)`, so the index cannot decide them alone. Then `--events`
incoming pods of the same mix run InterPodAffinity's PreFilter and PreScore (every node feasible),
timed; the same pods are run again with `LabelSelector.matches` counted (not timed).

Prints one JSON object: nodes, existing_pods, term_groups (anti, score: what every incoming pod was
tested against before the index), events, rich_events, groups_per_pod (mean `candidates` the index
hands out and mean `tested` with `matches`, the others being decided by the index),
matches_calls_per_pod (mean, max: the groups' tests plus the incoming pod's own terms checked on the
existing pods they may match), prefilter_prescore_ms_per_pod (median, p90; all pods and rich pods
only), build_s (snapshot, pod index and label columns).
Usage: python bench/interpodaffinity.py [--nodes 20000] [--pods 40000] [--apps 100] [--rich-share 0.1]
       [--inexact-share 0.5] [--events 1000] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from apis.kubeobjects import Pod  # noqa: E402
from apis.labelselector import LabelSelector  # noqa: E402
from bench._scheduler_world import make_node, make_pod, rich_fields  # noqa: E402
from scheduler.framework.cycle_state import CycleState  # noqa: E402
from scheduler.framework.snapshot import Snapshot  # noqa: E402
from scheduler.plugins.interpodaffinity import InterPodAffinity  # noqa: E402
from scheduler.plugins.interpodaffinity.prefilter import pod_index  # noqa: E402
from scheduler.plugins.interpodaffinity.terms import pod_label_set, pod_namespace  # noqa: E402

NOW = 1_800_000_000.0


CANARY = {"key": "track", "operator": "NotIn", "values": ["canary"]}


def _pod(k: int, rnd: random.Random, w: World, node: str | None) -> Pod:
    rich = None
    if rnd.random() < w.rich_share:
        app = rnd.randrange(w.apps)
        labels, fields = rich_fields(app, spread=rnd.random() < 0.5)
        if app < w.apps * w.inexact_share:  # the selectors get a second requirement: not exact
            anti = fields.get("affinity", {}).get("podAntiAffinity", {})
            for t in anti.get("requiredDuringSchedulingIgnoredDuringExecution", []):
                t["labelSelector"] = {**t["labelSelector"], "matchExpressions": [CANARY]}
            for t in anti.get("preferredDuringSchedulingIgnoredDuringExecution", []):
                sel = t["podAffinityTerm"]["labelSelector"]
                t["podAffinityTerm"]["labelSelector"] = {**sel, "matchExpressions": [CANARY]}
        rich = labels, fields
    p = make_pod(f"p{k}", f"u{k}", k % 3 == 0, rnd, rich)
    if node is not None:
        p["spec"]["nodeName"] = node
    return cast(Pod, p)


@dataclass(frozen=True)
class World:
    nodes: int
    pods: int
    apps: int
    rich_share: float
    inexact_share: float


def build(w: World, rnd: random.Random) -> Snapshot:
    names = [f"node-{i:05d}" for i in range(w.nodes)]
    node_objs = [make_node(name, i, rnd)[0] for i, name in enumerate(names)]
    existing = [_pod(k, rnd, w, names[k % w.nodes]) for k in range(w.pods)]
    return Snapshot.build(node_objs, existing)


def run(w: World, events: int, seed: int) -> dict[str, Any]:
    rnd = random.Random(seed)
    t0 = time.perf_counter()
    snap = build(w, rnd)
    plugin = InterPodAffinity()
    feasible = np.arange(snap.n, dtype=np.int64)
    probe = _pod(-1, random.Random(0), replace(w, rich_share=1.0), None)  # builds the index and columns
    plugin.pre_filter(CycleState(NOW), probe, snap)
    plugin.pre_score(CycleState(NOW), probe, snap, feasible)
    build_s = time.perf_counter() - t0
    index = pod_index(snap)
    incoming = [_pod(w.pods + k, rnd, w, None) for k in range(events)]

    def cycle(p: Pod) -> None:
        state = CycleState(NOW)
        plugin.pre_filter(state, p, snap)
        plugin.pre_score(state, p, snap, feasible)

    took: list[float] = []
    for p in incoming:
        start = time.perf_counter()
        cycle(p)
        took.append(time.perf_counter() - start)
    rich_took = [t for t, p in zip(took, incoming, strict=True) if p["metadata"].get("labels")]

    calls: list[int] = []
    count = [0]
    real = LabelSelector.matches

    def counting(self: LabelSelector, labels: Mapping[str, str]) -> bool:
        count[0] += 1
        return real(self, labels)

    setattr(LabelSelector, "matches", counting)  # noqa: B010 (a method swapped for the count only)
    try:
        for p in incoming:
            count[0] = 0
            cycle(p)
            calls.append(count[0])
    finally:
        setattr(LabelSelector, "matches", real)  # noqa: B010
    candidates = [
        index.anti_terms.candidates(pod_namespace(p), pod_label_set(p))
        + index.score_terms.candidates(pod_namespace(p), pod_label_set(p))
        for p in incoming
    ]

    def stats(xs: list[float]) -> dict[str, float]:
        if not xs:
            return {"median": 0.0, "p90": 0.0}
        return {
            "median": round(statistics.median(xs) * 1e3, 3),
            "p90": round(sorted(xs)[int(0.9 * (len(xs) - 1))] * 1e3, 3),
        }

    return {
        "nodes": snap.n,
        "existing_pods": sum(len(info.pods) for info in snap.infos),
        "term_groups": {"anti": len(index.anti_groups), "score": len(index.score_groups)},
        "events": events,
        "rich_events": len(rich_took),
        "groups_per_pod": {
            "candidates": round(statistics.mean(len(c) for c in candidates), 3),
            "tested": round(statistics.mean(sum(not exact for _, exact in c) for c in candidates), 3),
        },
        "matches_calls_per_pod": {"mean": round(statistics.mean(calls), 2), "max": max(calls)},
        "prefilter_prescore_ms_per_pod": {"all": stats(took), "rich": stats(rich_took)},
        "build_s": round(build_s, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--nodes", type=int, default=20_000)
    ap.add_argument("--pods", type=int, default=40_000)
    ap.add_argument("--apps", type=int, default=100)
    ap.add_argument("--rich-share", type=float, default=0.1)
    ap.add_argument("--inexact-share", type=float, default=0.5)
    ap.add_argument("--events", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    for flag, value in (("--nodes", a.nodes), ("--apps", a.apps), ("--events", a.events)):
        if value < 1:
            ap.error(f"{flag}={value}: must be at least 1")
    if a.pods < 0:
        ap.error(f"--pods={a.pods}: must not be negative")
    for flag, share in (("--rich-share", a.rich_share), ("--inexact-share", a.inexact_share)):
        if not 0.0 <= share <= 1.0:
            ap.error(f"{flag}={share}: must be between 0 and 1")
    w = World(a.nodes, a.pods, a.apps, a.rich_share, a.inexact_share)
    print(json.dumps(run(w, a.events, a.seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
