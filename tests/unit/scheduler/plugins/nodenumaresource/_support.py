"""Shared builders for the NodeNUMAResource tests: topologies, NodeResourceTopology objects, pods, nodes."""

from __future__ import annotations

import json
from typing import Any, cast

from apis.kubeobjects import Pod
from apis.numa import ANNOTATION_CPU_TOPOLOGY, ANNOTATION_KUBELET_CPU_MANAGER_POLICY


def detail(
    sockets: int = 2, nodes_per_socket: int = 1, cores_per_node: int = 4, smt: int = 2
) -> list[dict[str, int]]:
    """CPU ``k*smt + t`` is thread t of the k-th core, cores numbered per socket."""
    out: list[dict[str, int]] = []
    for s in range(sockets):
        for n in range(nodes_per_socket):
            for c in range(cores_per_node):
                for _ in range(smt):
                    node = s * nodes_per_socket + n
                    out.append({"id": len(out), "core": n * cores_per_node + c, "socket": s, "node": node})
    return out


def nrt(name: str = "n1", kubelet: dict[str, Any] | None = None, **shape: int) -> dict[str, Any]:
    annotations = {ANNOTATION_CPU_TOPOLOGY: json.dumps({"detail": detail(**shape)})}
    if kubelet is not None:
        annotations[ANNOTATION_KUBELET_CPU_MANAGER_POLICY] = json.dumps(kubelet)
    return {"metadata": {"name": name, "annotations": annotations}}


def node(
    name: str = "n1",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    cpu: str = "16",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels or {}, "annotations": annotations or {}}
    return {"metadata": meta, "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}}}


def pod(
    name: str = "p",
    qos: str | None = "LSE",
    cpu: str | None = "4",
    memory: str | None = None,
    annotations: dict[str, str] | None = None,
    node_name: str = "",
    uid: str | None = None,
) -> Pod:
    labels = {"koordinator.sh/qosClass": qos} if qos else {}
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": uid or f"uid-{name}",
        "labels": labels,
    }
    if annotations:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if node_name:
        spec["nodeName"] = node_name
    return cast(Pod, {"metadata": meta, "spec": spec})


def status_annotation(cpuset: str) -> dict[str, str]:
    return {"scheduling.koordinator.sh/resource-status": json.dumps({"cpuset": cpuset})}
