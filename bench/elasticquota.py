"""ElasticQuota micro-benchmark (docs/rules/scheduler-elasticquota.md#performance): what the quota tree costs
the scheduler per pod. A tree of `--parents` parent quotas with `--children` leaf quotas each, `--pods` pods
charged across the leaves (half bound), every quota below its max so that every request counts; then, per
measured pod: `arrive` — a new pending pod reaches the plugin (its request moves its leaf's, its parent's
and the root's requests, which makes the root's and the parent's calculators stale) and its PreFilter asks
for its quota's runtime (the two calculators on its path run again); `bind` — the pod is assumed on a node
(used only: added along its path, no calculator runs).

Prints one JSON object: quotas, pods, arrive_ms (median, p90) and bind_us (median, p90) over `--events`
pods.
Usage: python bench/elasticquota.py [--parents 10] [--children 19] [--pods 47500] [--events 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from apis.elasticquota import ElasticQuota  # noqa: E402
from apis.quantity import Quantity  # noqa: E402
from scheduler.plugins.elasticquota.args import ElasticQuotaArgs  # noqa: E402
from scheduler.plugins.elasticquota.manager import GroupQuotaManager  # noqa: E402

LABEL = "quota.scheduling.koordinator.sh/name"


def _pod(i: int, quota: str, bound: bool) -> dict[str, Any]:
    return {
        "metadata": {"name": f"p{i}", "namespace": "bench", "uid": f"u{i}", "labels": {LABEL: quota}},
        "spec": {
            "nodeName": "n1" if bound else "",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        },
    }


def build(parents: int, children: int, pods: int) -> tuple[GroupQuotaManager, list[str]]:
    q = Quantity.parse
    m = GroupQuotaManager(ElasticQuotaArgs())
    leaves: list[str] = []
    for p in range(parents):
        # maxes above what the pods ask for: a request that passed its max would stop moving the runtime
        team_min, team_max = (
            {"cpu": q("4000"), "memory": q("16000Gi")},
            {"cpu": q("40000"), "memory": q("160000Gi")},
        )
        m.upsert_quota(ElasticQuota(f"team{p}", min=team_min, max=team_max, is_parent=True))
        for c in range(children):
            name = f"team{p}-app{c}"
            m.upsert_quota(ElasticQuota(name, parent=f"team{p}", min={"cpu": q("100"), "memory": q("400Gi")},
                                        max={"cpu": q("4000"), "memory": q("16000Gi")}))  # fmt: skip
            leaves.append(name)
    m.set_cluster_total({"cpu": 5000 * 32_000, "memory": 5000 * 128 * 2**30})
    for i in range(pods):
        leaf = leaves[i % len(leaves)]
        m.on_pod_add(leaf, _pod(i, leaf, bound=i % 2 == 1))
    m.refresh()
    return m, leaves


def run(parents: int, children: int, pods: int, events: int) -> dict[str, Any]:
    m, leaves = build(parents, children, pods)
    arrive: list[float] = []
    bind: list[float] = []
    for k in range(events):
        leaf = leaves[(k * 7) % len(leaves)]
        pod = _pod(pods + k, leaf, bound=False)
        t0 = time.perf_counter()
        m.on_pod_add(leaf, pod)
        m.refresh_runtime(leaf)
        t1 = time.perf_counter()
        m.reserve(leaf, pod)
        m.refresh_runtime(leaf)
        t2 = time.perf_counter()
        arrive.append(t1 - t0)
        bind.append(t2 - t1)

    def p90(xs: list[float]) -> float:
        return sorted(xs)[int(0.9 * (len(xs) - 1))]

    return {
        "quotas": len(m.quotas),
        "pods": pods + events,
        "events": events,
        "arrive_ms": {
            "median": round(statistics.median(arrive) * 1e3, 3),
            "p90": round(p90(arrive) * 1e3, 3),
        },
        "bind_us": {"median": round(statistics.median(bind) * 1e6, 1), "p90": round(p90(bind) * 1e6, 1)},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--parents", type=int, default=10)
    ap.add_argument("--children", type=int, default=19)
    ap.add_argument("--pods", type=int, default=47_500)
    ap.add_argument("--events", type=int, default=200)
    a = ap.parse_args(argv)
    for flag, value in (("--parents", a.parents), ("--children", a.children), ("--events", a.events)):
        if value < 1:
            ap.error(f"{flag}={value}: must be at least 1")
    if a.pods < 0:
        ap.error(f"--pods={a.pods}: must not be negative")
    print(json.dumps(run(a.parents, a.children, a.pods, a.events)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
