"""Shared sample objects for tests: canonical Kubernetes/Koordinator JSON with every field populated."""

from __future__ import annotations

from typing import Any

GPU = {
    "type": "gpu",
    "id": "GPU-7c6c2a8e",
    "minor": 0,
    "health": True,
    "resources": {"koordinator.sh/gpu-core": "40", "koordinator.sh/gpu-memory": "8Gi"},
    "topology": {"socketID": 0, "nodeID": 1, "pcieID": "pci0000:3a", "busID": "0000:3b:00.0"},
}


def _window(duration: str, cold: tuple[str, ...] = ()) -> dict[str, Any]:
    usage: dict[str, Any] = {}
    for i, agg in enumerate(("avg", "p50", "p90", "p95", "p99")):
        usage[agg] = (
            {} if agg in cold else {"resources": {"cpu": f"{2100 + 100 * i}m", "memory": f"{6 + i}Gi"}}
        )
    return {"usage": usage, "duration": duration}


def full_nodemetric_dict() -> dict[str, Any]:
    """A canonical NodeMetric (exactly what to_dict writes) with every field populated."""
    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {
            "name": "node-1",
            "resourceVersion": "4711",
            "uid": "0b4a3c32-95e9-4d4b-a0a4-7d1c1b7f30b1",
            "generation": 2,
            "creationTimestamp": "2026-11-22T01:00:00Z",
            "labels": {"kubernetes.io/hostname": "node-1"},
        },
        "spec": {
            "metricCollectPolicy": {
                "aggregateDurationSeconds": 300,
                "reportIntervalSeconds": 60,
                "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
                "nodeMemoryCollectPolicy": "usageWithoutPageCache",
            }
        },
        "status": {
            "updateTime": "2026-11-22T02:16:47Z",
            "nodeMetric": {
                "nodeUsage": {
                    "resources": {
                        "cpu": "2500m",
                        "kubernetes.io/batch-cpu": "12k",
                        "kubernetes.io/batch-memory": "1536Mi",
                        "kubernetes.io/mid-cpu": "10700",
                        "memory": "3006477107",
                    },
                    "devices": [GPU],
                },
                "aggregatedNodeUsages": [
                    _window("5m0s"),
                    _window("10m0s", cold=("p95", "p99")),
                    _window("30m0s", cold=("avg", "p50", "p90", "p95", "p99")),
                ],
                "systemUsage": {"resources": {"cpu": "350m", "memory": "1Gi"}},
                "aggregatedSystemUsages": [
                    _window("5m0s"),
                    _window("10m0s"),
                    _window("30m0s", cold=("p99",)),
                ],
                "numaUsages": [
                    {
                        "numaNodeID": 0,
                        "nodeUsage": {"resources": {"cpu": "1200m", "memory": "4Gi"}},
                        "systemUsage": {"resources": {"cpu": "150m", "memory": "512Mi"}},
                    },
                    {
                        "numaNodeID": 1,
                        "nodeUsage": {"resources": {"cpu": "1300m", "memory": "3Gi"}},
                        "systemUsage": {},
                    },
                ],
            },
            "podsMetric": [
                {
                    "name": "batch-job-0",
                    "namespace": "default",
                    "podUsage": {"resources": {"cpu": "4", "memory": "2Gi"}},
                    "priority": "koord-batch",
                    "qos": "BE",
                },
                {
                    "name": "nginx-7d9c",
                    "namespace": "web",
                    "podUsage": {"resources": {"cpu": "250m", "memory": "200Mi"}, "devices": [GPU]},
                    "priority": "koord-prod",
                    "qos": "LS",
                    "extensions": {
                        "Object": {"vendor.io/score": 3, "vendor.io/tags": ["a", "b"], "nested": {}}
                    },
                },
                {
                    "name": "web-static",
                    "namespace": "web",
                    "podUsage": {},
                    "extensions": {"Object": {}},
                },
            ],
            "hostApplicationMetric": [
                {
                    "name": "nginx-host",
                    "usage": {"resources": {"cpu": "100m", "memory": "64Mi"}},
                    "priority": "koord-prod",
                    "qos": "LS",
                },
                {"name": "node-exporter", "usage": {}},
            ],
            "prodReclaimableMetric": {"resource": {"resources": {"cpu": "1500m", "memory": "2Gi"}}},
            "prodPeakMetric": {"resource": {"resources": {"cpu": "6", "memory": "12Gi"}}},
        },
    }
