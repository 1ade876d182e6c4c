"""NodeMetric decode micro-benchmark: what ``NodeMetric.from_dict`` costs the scheduler's NodeMetric informer
thread per object (docs/architecture.md#informer-mailbox). At 20,000 nodes each rewritten about
once a minute the informer decodes 333 NodeMetrics a second.

The objects are what a koordlet writes (apis.nodemetric dataclasses built like agent/reporter/build.py:
cpu as millicores, memory as bytes in BinarySI, every pod with its priority and QoS class, node and
system usages with avg/p50/p90/p95/p99 over 5m/10m/30m windows, an empty prodReclaimableMetric) as the
API server returns them (metadata with managedFields unless ``--no-managed-fields``), each node with its
own random usages so the quantity caches see production's mostly distinct values. Each object is checked
to decode to the values it was built with before timing. ``scale_driver_decode_us_median`` times the
smaller objects bench/_scale_driver.py feeds the scheduler (node usage and per-pod cpu/memory only).

Prints one JSON object: pods_per_nodemetric, decode_us_median, decodes_per_s (at that median),
decode_us_p90, scale_driver_decode_us_median, samples. Bounded by ``--seconds`` (default 5; at most 30).
Usage: python bench/nodemetric_decode.py [--pods 50] [--nodes 200] [--seconds 5] [--seed 1]
    [--no-managed-fields]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from apis.duration import Duration  # noqa: E402
from apis.kubeobjects import ObjectMeta  # noqa: E402
from apis.nodemetric import (  # noqa: E402
    AggregatedUsage,
    AggregationType,
    NodeMetric,
    NodeMetricInfo,
    NodeMetricSpec,
    NodeMetricStatus,
    PodMetricInfo,
    ResourceMap,
    default_collect_policy,
)
from apis.qos import PriorityClass, QoSClass  # noqa: E402
from apis.quantity import Format, Quantity  # noqa: E402
from bench._scheduler_world import metric_object, pod_metric  # noqa: E402

MAX_SECONDS = 30.0
WINDOWS = ("5m", "10m", "30m")
NOW = datetime(2026, 11, 27, 23, 0, 0, tzinfo=UTC)


def _usage(rnd: random.Random, cores: int, gib: int) -> ResourceMap:
    cpu = Quantity.from_milli(rnd.randrange(1, cores * 1000), Format.DECIMAL_SI)
    memory = Quantity.from_int(rnd.randrange(1 << 20, gib << 30), Format.BINARY_SI)
    return ResourceMap(resources={"cpu": cpu, "memory": memory})


def _windows(rnd: random.Random) -> list[AggregatedUsage]:
    return [
        AggregatedUsage(usage={t: _usage(rnd, 32, 128) for t in AggregationType}, duration=Duration.parse(d))
        for d in WINDOWS
    ]


def _managed_fields() -> list[dict[str, Any]]:
    """The managedFields an API server keeps for a NodeMetric: the manager's spec, the koordlet's status."""
    leaf: dict[str, Any] = {}
    usage = {".": leaf, "f:resources": {".": leaf, "f:cpu": leaf, "f:memory": leaf}}
    return [
        {"manager": "koord-manager", "operation": "Update", "apiVersion": "slo.koordinator.sh/v1alpha1",
         "time": "2026-11-20T10:00:00Z", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:spec": {".": leaf, "f:metricCollectPolicy": {
             ".": leaf, "f:aggregateDurationSeconds": leaf, "f:reportIntervalSeconds": leaf,
             "f:nodeAggregatePolicy": {".": leaf, "f:durations": leaf}, "f:nodeMemoryCollectPolicy": leaf}}}},
        {"manager": "koordlet", "operation": "Update", "apiVersion": "slo.koordinator.sh/v1alpha1",
         "time": "2026-11-27T22:59:00Z", "fieldsType": "FieldsV1", "subresource": "status",
         "fieldsV1": {"f:status": {".": leaf, "f:nodeMetric": {
             ".": leaf, "f:aggregatedNodeUsages": leaf, "f:aggregatedSystemUsages": leaf,
             "f:nodeUsage": usage, "f:systemUsage": usage}, "f:podsMetric": leaf,
             "f:prodReclaimableMetric": {".": leaf, "f:resource": {".": leaf}}, "f:updateTime": leaf}}},
    ]  # fmt: skip


def koordlet_nodemetric(
    rnd: random.Random, index: int, pods: int, managed_fields: bool
) -> tuple[dict[str, Any], NodeMetric]:
    """Node ``index``'s NodeMetric, in its JSON form and as built, with ``pods`` pods in podsMetric (sorted
    as Go sorts)."""
    name = f"node-{index:05d}"
    metadata: dict[str, Any] = {
        "name": name, "uid": f"6b1f6a44-8a0b-4f5e-9d0e-{index:012d}", "generation": 1,
        "resourceVersion": str(1_000_000 + index), "creationTimestamp": "2026-11-20T10:00:00Z",
    }  # fmt: skip
    if managed_fields:
        metadata["managedFields"] = _managed_fields()
    rows = []
    for k in range(pods):
        prod = rnd.random() < 0.6
        rows.append(
            PodMetricInfo(
                name=f"app-{rnd.randrange(1000)}-{k:05d}-x7k2p",
                namespace="default" if k % 3 else "team-a",
                pod_usage=_usage(rnd, 4, 8),
                priority=PriorityClass.PROD if prod else PriorityClass.BATCH,
                qos=QoSClass.LS if prod else QoSClass.BE,
            )
        )
    rows.sort(key=lambda p: (p.namespace.encode(), p.name.encode()))
    status = NodeMetricStatus(
        update_time=NOW - timedelta(seconds=rnd.randrange(60)),
        node_metric=NodeMetricInfo(
            node_usage=_usage(rnd, 32, 128),
            aggregated_node_usages=_windows(rnd),
            system_usage=_usage(rnd, 2, 4),
            aggregated_system_usages=_windows(rnd),
        ),
        pods_metric=rows,
    )
    nm = NodeMetric(
        metadata=cast(ObjectMeta, metadata), spec=NodeMetricSpec(default_collect_policy()), status=status
    )
    return nm.to_dict(), nm


def scale_driver_nodemetric(rnd: random.Random, index: int, pods: int) -> dict[str, Any]:
    """The NodeMetric bench/_scale_driver.py's World.metric writes (its pods' cpu and memory only)."""
    rows = [
        (
            "bench",
            f"f-{index}-{k}",
            rnd.choice((40, 100, 200, 400, 800)),
            rnd.choice((128, 256, 512)) * 629146,
        )
        for k in range(pods)
    ]
    cpu, mem = sum(r[2] for r in rows) + 2000, sum(r[3] for r in rows) + (4 << 30)
    return metric_object(f"node-{index:05d}", cpu, mem, NOW.timestamp(), [pod_metric(*r) for r in rows])


def time_decodes(objects: list[dict[str, Any]], seconds: float) -> list[float]:
    """Per-decode microseconds, round-robin over ``objects`` until ``seconds`` have passed."""
    samples: list[float] = []
    decode = NodeMetric.from_dict
    clock = time.perf_counter_ns
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for obj in objects:
            start = clock()
            decode(obj)
            samples.append((clock() - start) / 1000)
    return samples


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=50, help="pods per NodeMetric")
    ap.add_argument("--nodes", type=int, default=200, help="distinct NodeMetrics decoded in turn")
    ap.add_argument("--seconds", type=float, default=5.0, help=f"timing budget (at most {MAX_SECONDS:g})")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-managed-fields", action="store_true", help="metadata without managedFields")
    args = ap.parse_args(argv)
    if args.pods < 0 or args.nodes < 1 or not 0 < args.seconds <= MAX_SECONDS:
        ap.error(f"need --pods >= 0, --nodes >= 1 and 0 < --seconds <= {MAX_SECONDS:g}")
    rnd = random.Random(args.seed)
    built = [koordlet_nodemetric(rnd, i, args.pods, not args.no_managed_fields) for i in range(args.nodes)]
    rich = [obj for obj, _ in built]
    small = [scale_driver_nodemetric(rnd, i, args.pods) for i in range(args.nodes)]
    for obj, nm in built:  # what is timed is a real decode: every object comes back whole
        if NodeMetric.from_dict(obj) != nm:
            raise SystemExit(f"NodeMetric {nm.name} decoded to other values than it was built with")
    samples = time_decodes(rich, args.seconds * 0.75)
    small_samples = time_decodes(small, args.seconds * 0.25)
    median = statistics.median(samples)
    result = {
        "pods_per_nodemetric": args.pods,
        "decode_us_median": round(median, 1),
        "decodes_per_s": round(1e6 / median),
        "decode_us_p90": round(statistics.quantiles(samples, n=10)[-1], 1) if len(samples) > 1 else median,
        "scale_driver_decode_us_median": round(statistics.median(small_samples), 1),
        "samples": len(samples),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
