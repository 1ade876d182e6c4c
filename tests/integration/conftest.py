"""Integration fixtures: a small cluster of Node objects with NodeMetrics on the real API server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client

from apis.constants import NODE_METRIC_PLURAL, SLO_GROUP, SLO_VERSION


@pytest.fixture()
def cluster(kube: Any, namespace: str) -> Iterator[dict[str, Any]]:
    """Three nodes (8 cpu, 32Gi) with NodeMetrics at 70 %, 20 % and 40 % cpu."""
    core = client.CoreV1Api(kube)
    custom = client.CustomObjectsApi(kube)
    tag = uuid.uuid4().hex[:6]
    names = {"hot": f"hot-{tag}", "cool": f"cool-{tag}", "warm": f"warm-{tag}"}
    usage = {"hot": "5600m", "cool": "1600m", "warm": "3200m"}
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for key, name in names.items():
        core.create_node({
            "metadata": {"name": name, "labels": {"koord-test": tag, "tier": key}},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                       "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
        })  # fmt: skip
        # Admission taints a new node not-ready; with no node lifecycle controller here, clear it as
        # that controller would for a Ready node.
        core.patch_node(name, {"spec": {"taints": None}})
        custom.create_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, {
            "apiVersion": f"{SLO_GROUP}/{SLO_VERSION}", "kind": "NodeMetric", "metadata": {"name": name},
            "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
        })  # fmt: skip
        status = {
            "updateTime": now,
            "nodeMetric": {"nodeUsage": {"resources": {"cpu": usage[key], "memory": "8Gi"}}},
        }
        custom.patch_cluster_custom_object_status(
            SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, name, {"status": status}
        )
    try:
        yield {"names": names, "tag": tag, "core": core, "custom": custom}
    finally:
        for name in names.values():
            core.delete_node(name)
            custom.delete_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, name)
