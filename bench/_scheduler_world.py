"""The simulated cluster the scheduler benchmarks share (bench/scheduler_throughput.py,
bench/scheduler_scale.py): nodes of three shapes in three zones, each with a NodeMetric, and pods of a
fixed mix — two in three latency-sensitive (cpu/memory requests and limits, priority 9000), one in
three batch (`kubernetes.io/batch-cpu`/`batch-memory` requests, koord-batch) — optionally with a share
of "rich" pods using the default profile's heavier plugins (docs/testing.md#scheduler-scale-benchmark).

Every value is drawn from the caller's `random.Random` in a fixed order, so a seed gives the same world
in every benchmark that draws the same things.
Imports: the standard library, apis (nodemetric).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from apis.nodemetric import NodeMetric

NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
GI = 1024**3
MI = 1024**2
SCHEDULER_NAME = "koord-scheduler"
NAMESPACE = "bench"
SHAPES: tuple[tuple[int, int], ...] = ((32, 128), (64, 256), (16, 64))  # (cores, GiB)
CPU_MILLIS: tuple[int, ...] = (100, 250, 500, 1000, 2000)
MEM_MIB: tuple[int, ...] = (128, 256, 512, 1024, 2048)
BATCH_EVERY = 3  # pod k is a batch pod when k % 3 == 0
RICH_APPS = 100  # rich pods belong to one of this many apps (label `app`)
ZONE_KEY = "zone"
HOSTNAME_KEY = "kubernetes.io/hostname"

Obj = dict[str, Any]


def time_string(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_node(name: str, zone: int, rnd: random.Random) -> tuple[Obj, tuple[int, int]]:
    """A node of a random shape in zone `zone % 3`, and its (cores, GiB)."""
    cpu, mem = rnd.choice(SHAPES)
    node = {
        "metadata": {"name": name, "labels": {ZONE_KEY: f"z{zone % 3}", HOSTNAME_KEY: name}},
        "spec": {},
        "status": {
            "allocatable": {
                "cpu": str(cpu),
                "memory": f"{mem}Gi",
                "pods": "110",
                "kubernetes.io/batch-cpu": str(cpu * 400),
                "kubernetes.io/batch-memory": f"{mem // 3}Gi",
            }
        },
    }
    return node, (cpu, mem)


def base_usage(shape: tuple[int, int], rnd: random.Random) -> tuple[int, int]:
    """A node's background usage: (cpu millicores, memory bytes)."""
    cpu, mem = shape
    return int(cpu * 1000 * rnd.uniform(0.05, 0.55)), int(mem * GI * rnd.uniform(0.1, 0.7))


def pod_metric(namespace: str, pod: str, cpu_m: int, mem: int) -> Obj:
    """One pod's entry of a NodeMetric's `podsMetric`: its cpu (millicores) and memory (bytes) usage.
    Built once per pod by the scale benchmark's cluster and shared by its node's NodeMetrics (the
    decoders only read them), so the simulated API server costs little of the measured process."""
    usage = {"resources": {"cpu": f"{cpu_m}m", "memory": str(mem)}}
    return {"namespace": namespace, "name": pod, "podUsage": usage}


def metric_object(name: str, used_cpu_m: int, used_mem: int, stamp: float, pods: Iterable[Obj] = ()) -> Obj:
    """A NodeMetric CR as the koordlet writes it: node usage, and the pods' entries (`pod_metric`) in
    `podsMetric`."""
    status: Obj = {
        "updateTime": time_string(stamp),
        "nodeMetric": {"nodeUsage": {"resources": {"cpu": f"{used_cpu_m}m", "memory": str(used_mem)}}},
    }
    pods_metric = list(pods)
    if pods_metric:
        status["podsMetric"] = pods_metric
    return {
        "metadata": {"name": name},
        "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
        "status": status,
    }


def rich_fields(app: int, spread: bool) -> tuple[Obj, Obj]:
    """(labels, spec fields) of a rich pod of app `app`: `spread` → a hard topology spread over zones
    (maxSkew 1) and a soft one over hostnames; else a required pod anti-affinity on hostname against its
    own app and a preferred one (weight 50) on zone."""
    labels = {"app": f"rich-{app}"}
    selector = {"matchLabels": dict(labels)}
    if spread:
        constraints = [
            {"maxSkew": 1, "topologyKey": ZONE_KEY, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": selector},
            {"maxSkew": 1, "topologyKey": HOSTNAME_KEY, "whenUnsatisfiable": "ScheduleAnyway",
             "labelSelector": selector},
        ]  # fmt: skip
        return labels, {"topologySpreadConstraints": constraints}
    anti = {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": selector, "topologyKey": HOSTNAME_KEY}
        ],
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "podAffinityTerm": {"labelSelector": selector, "topologyKey": ZONE_KEY}}
        ],
    }
    return labels, {"affinity": {"podAntiAffinity": anti}}


def make_pod(
    name: str, uid: str, batch: bool, rnd: random.Random, rich: tuple[Obj, Obj] | None = None
) -> Obj:
    """A pending pod of the mix (two draws: cpu, memory); `rich` adds rich_fields' labels and spec."""
    cpu_m = rnd.choice(CPU_MILLIS)
    mem_mi = rnd.choice(MEM_MIB)
    if batch:
        res: Obj = {
            "requests": {"kubernetes.io/batch-cpu": str(cpu_m), "kubernetes.io/batch-memory": f"{mem_mi}Mi"}
        }
        extra: Obj = {"priorityClassName": "koord-batch", "priority": 5000}
    else:
        res = {
            "requests": {"cpu": f"{cpu_m}m", "memory": f"{mem_mi}Mi"},
            "limits": {"cpu": f"{cpu_m * 2}m", "memory": f"{mem_mi}Mi"},
        }
        extra = {"priority": 9000}
    labels, spec_extra = rich if rich is not None else ({}, {})
    return {
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid, "labels": labels},
        "spec": {
            "schedulerName": SCHEDULER_NAME,
            "containers": [{"name": "c", "resources": res}],
            **extra,
            **spec_extra,
        },
        "status": {"phase": "Pending"},
    }


def pod_shape(pod: Obj) -> tuple[int, int]:
    """The pod's (cpu millicores, memory MiB) request, whichever resource names it uses."""
    req = pod["spec"]["containers"][0]["resources"]["requests"]
    cpu = req.get("cpu") or req["kubernetes.io/batch-cpu"]
    mem = req.get("memory") or req["kubernetes.io/batch-memory"]
    return int(str(cpu).removesuffix("m")), int(str(mem).removesuffix("Mi"))


def node_capacity(shape: tuple[int, int]) -> int:
    """About how many pods of the mix fit a node of `shape` (its tightest resource, at the mix's mean
    requests): what "half full" is measured against."""
    cpu, mem = shape
    mean_cpu, mean_mem = sum(CPU_MILLIS) / len(CPU_MILLIS), sum(MEM_MIB) / len(MEM_MIB)
    ls, batch = (BATCH_EVERY - 1) / BATCH_EVERY, 1 / BATCH_EVERY
    return int(
        min(
            110,
            cpu * 1000 / (ls * mean_cpu),
            mem * 1024 / (ls * mean_mem),
            cpu * 400 / (batch * mean_cpu),
            (mem // 3) * 1024 / (batch * mean_mem),
        )
    )


def make_world(n_nodes: int, n_pods: int, seed: int) -> tuple[list[Obj], list[NodeMetric], list[Obj]]:
    """`n_nodes` nodes with NodeMetrics stamped 20 s before NOW, and `n_pods` pending pods of the mix."""
    rnd = random.Random(seed)
    nodes, metrics = [], []
    stamp = NOW.timestamp() - 20
    for i in range(n_nodes):
        name = f"node-{i:05d}"
        node, shape = make_node(name, i, rnd)
        nodes.append(node)
        used_cpu, used_mem = base_usage(shape, rnd)
        metrics.append(NodeMetric.from_dict(metric_object(name, used_cpu, used_mem, stamp)))
    pods = [make_pod(f"pod-{k:05d}", f"uid-{k:05d}", k % BATCH_EVERY == 0, rnd) for k in range(n_pods)]
    return nodes, metrics, pods
