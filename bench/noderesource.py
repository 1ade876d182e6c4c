"""Benchmark: a full NodeResource recompute (MidResource + BatchResource ``calculate``, ``prepare_node``,
``need_sync``) for 5,000 nodes × 30 pods in-process, as the controller does after a ConfigMap change.
Prints ONE JSON object: ``nodes``, ``pods_per_node``, ``seconds`` (plus ``synced`` and per-node µs).
Target ≤ 2 s. Inputs are built before the clock starts (distinct dicts per node and pod, realistic
quantity strings that repeat across the cluster as real ones do).
Imports: the standard library, ``apis`` and ``manager.noderesource``.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from datetime import UTC, datetime
from typing import Any

from apis.sloconfig_merge import default_colocation_strategy
from manager.noderesource.plugins import batchresource, midresource
from manager.noderesource.prepare import need_sync, prepare_node
from manager.noderesource.resources import pod_infos

NOW = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
CLASSES = ("koord-prod", "koord-prod", "koord-mid", "koord-batch", "koord-free")


Case = tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]


def build(nodes: int, pods_per_node: int) -> list[Case]:
    out: list[Case] = []
    for n in range(nodes):
        name = f"node-{n}"
        node = {
            "metadata": {"name": name, "annotations": {}},
            "status": {
                "capacity": {"cpu": "96", "memory": "512Gi", "pods": "110"},
                "allocatable": {"cpu": "94", "memory": "500Gi", "kubernetes.io/batch-cpu": "40k"},
            },
        }
        pods: list[dict[str, Any]] = []
        metrics: list[dict[str, Any]] = []
        for i in range(pods_per_node):
            cls = CLASSES[i % len(CLASSES)]
            pname = f"pod-{n}-{i}"
            pods.append(
                {
                    "metadata": {
                        "namespace": "default",
                        "name": pname,
                        "labels": {"koordinator.sh/priority-class": cls},
                    },
                    "spec": {
                        "nodeName": name,
                        "containers": [
                            {
                                "name": "app",
                                "resources": {
                                    "requests": {"cpu": f"{(i % 8 + 1) * 250}m", "memory": f"{i % 6 + 1}Gi"},
                                    "limits": {"cpu": f"{(i % 8 + 1) * 500}m", "memory": f"{i % 6 + 2}Gi"},
                                },
                            }
                        ],
                    },
                    "status": {"phase": "Running" if i % 10 else "Succeeded"},
                }
            )
            if i % 7:
                metrics.append(
                    {
                        "namespace": "default",
                        "name": pname,
                        "priority": cls,
                        "qos": "LS",
                        "podUsage": {
                            "resources": {"cpu": f"{(i % 5 + 1) * 100}m", "memory": f"{i % 4 + 1}Gi"}
                        },
                    }
                )
        nodemetric = {
            "metadata": {"name": name},
            "status": {
                "updateTime": "2026-01-01T00:09:00Z",
                "nodeMetric": {
                    "nodeUsage": {"resources": {"cpu": "30", "memory": "200Gi"}},
                    "systemUsage": {"resources": {"cpu": "2", "memory": "8Gi"}},
                },
                "podsMetric": metrics,
                "prodReclaimableMetric": {"resource": {"resources": {"cpu": "8", "memory": "32Gi"}}},
            },
        }
        out.append((node, pods, nodemetric))
    return out


def run(nodes: int, pods_per_node: int) -> dict[str, Any]:
    data = build(nodes, pods_per_node)
    strategy = default_colocation_strategy()
    threshold = strategy.resource_diff_threshold or 0.1
    # The inputs stand for the controller's informer cache: long-lived objects the cyclic GC need not
    # rescan on every collection triggered by the recompute's short-lived allocations.
    gc.collect()
    gc.freeze()
    start = time.perf_counter()
    synced = 0
    for node, pods, nodemetric in data:
        infos = pod_infos(pods)  # extracted once, shared by both plugins
        mid = midresource.calculate(strategy, node, infos, nodemetric, NOW)
        batch = batchresource.calculate(strategy, node, infos, nodemetric, NOW)
        new = prepare_node(node, (*mid.items, *batch.items))
        synced += need_sync(node, new, threshold)
    seconds = time.perf_counter() - start
    gc.unfreeze()
    return {
        "nodes": nodes,
        "pods_per_node": pods_per_node,
        "seconds": round(seconds, 4),
        "synced": synced,
        "us_per_node": round(seconds / max(nodes, 1) * 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=30)
    args = parser.parse_args()
    print(json.dumps(run(args.nodes, args.pods_per_node)))


if __name__ == "__main__":
    main()
