"""Builders shared by the Reservation plugin tests: reservations, nodes and pods as JSON objects."""

from __future__ import annotations

import json
from typing import Any

Obj = dict[str, Any]
AFFINITY = "scheduling.koordinator.sh/reservation-affinity"
ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"


def reservation(
    name: str = "r1",
    *,
    node: str = "n1",
    phase: str = "Available",
    alloc: dict[str, str] | None = None,
    policy: str | None = None,
    owners: list[Obj] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    allocate_once: bool | None = None,
    spec: Obj | None = None,
) -> Obj:
    alloc = alloc or {"cpu": "4", "memory": "8Gi"}
    body: Obj = {
        "owners": owners if owners is not None else [{"labelSelector": {"matchLabels": {"app": "a"}}}],
        "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": alloc}}]}},
        **(spec or {}),
    }
    if policy is not None:
        body["allocatePolicy"] = policy
    if allocate_once is not None:
        body["allocateOnce"] = allocate_once
    status: Obj = {"phase": phase}
    if node:
        status["nodeName"] = node
    if phase == "Available":
        status["allocatable"] = alloc
    meta: Obj = {"name": name, "uid": f"uid-{name}", "labels": labels or {}, "annotations": annotations or {}}
    return {"metadata": meta, "spec": body, "status": status}


def node(name: str = "n1", alloc: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> Obj:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "status": {"allocatable": alloc or {"cpu": "8", "memory": "16Gi", "pods": "110"}},
    }


def pod(
    name: str = "p",
    requests: dict[str, str] | None = None,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    node_name: str | None = None,
    owner_of: str | None = None,
) -> Obj:
    ann = dict(annotations or {})
    if owner_of is not None:
        ann[ALLOCATED] = json.dumps({"name": owner_of, "uid": f"uid-{owner_of}"})
    spec: Obj = {
        "containers": [{"name": "c", "resources": {"requests": requests or {"cpu": "2", "memory": "4Gi"}}}]
    }
    if node_name is not None:
        spec["nodeName"] = node_name
    meta: Obj = {
        "namespace": "default",
        "name": name,
        "uid": f"uid-{name}",
        "labels": labels if labels is not None else {"app": "a"},
    }
    if ann:
        meta["annotations"] = ann
    return {"metadata": meta, "spec": spec}


def affinity(**fields: Any) -> dict[str, str]:
    return {AFFINITY: json.dumps(fields)}
