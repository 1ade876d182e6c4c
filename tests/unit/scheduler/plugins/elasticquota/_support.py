"""Builders for ElasticQuota tests: quota objects and pods in Kubernetes JSON."""

from __future__ import annotations

from typing import Any

from apis.elasticquota import LABEL_ALLOW_LENT_RESOURCE, LABEL_IS_PARENT, LABEL_PARENT, LABEL_QUOTA_NAME


def quota(
    name: str,
    max_: dict[str, str],
    min_: dict[str, str] | None = None,
    parent: str = "",
    is_parent: bool = False,
    lend: bool = True,
    annotations: dict[str, str] | None = None,
    namespace: str = "default",
) -> dict[str, Any]:
    labels = {LABEL_PARENT: parent} if parent else {}
    if is_parent:
        labels[LABEL_IS_PARENT] = "true"
    if not lend:
        labels[LABEL_ALLOW_LENT_RESOURCE] = "false"
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations or {},
        },
        "spec": {"max": max_, "min": min_ or {}},
    }


def pod(
    name: str,
    requests: dict[str, str],
    quota_name: str = "",
    node: str = "",
    priority: int | None = None,
    labels: dict[str, str] | None = None,
    namespace: str = "default",
    phase: str = "",
    start: str = "",
) -> dict[str, Any]:
    all_labels = dict(labels or {})
    if quota_name:
        all_labels[LABEL_QUOTA_NAME] = quota_name
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if node:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    status: dict[str, Any] = {}
    if phase:
        status["phase"] = phase
    if start:
        status["startTime"] = start
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": all_labels},
        "spec": spec,
        "status": status,
    }
