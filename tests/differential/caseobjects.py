"""A differential case's objects other than nodes and pods, through the API
(docs/testing.md#the-kube-scheduler-oracle): PriorityClasses, PodDisruptionBudgets (policy/v1beta1),
StorageClasses, PVs and claims, and the Services and workload controllers SelectorSpread reads
(`WORKLOADS`), created with the case in its namespace (or cluster-wide), listed for the in-process
half, deleted after it.
Imports: standard library, kubernetes client, tests.differential (checker, controllers).
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client

from tests.differential.checker import Obj
from tests.differential.controllers import Controllers

# The namespaced kinds SelectorSpread and PodTopologySpread's default constraints read → the client's
# method suffix.
WORKLOADS = {"Service": "service", "ReplicationController": "replication_controller",
             "ReplicaSet": "replica_set", "StatefulSet": "stateful_set"}  # fmt: skip


def _api_of(api: Any, kind: str) -> Any:
    return (client.AppsV1Api if kind in ("ReplicaSet", "StatefulSet") else client.CoreV1Api)(api)


def create_extra(api: Any, obj: Obj, ns: str) -> None:
    kind = obj["kind"]
    if kind == "PriorityClass":
        client.SchedulingV1Api(api).create_priority_class(obj)
    elif kind == "PodDisruptionBudget":  # policy/v1beta1 (1.20), which the client has no class for
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            "policy", "v1beta1", ns, "poddisruptionbudgets", obj
        )
    elif kind == "StorageClass":
        client.StorageV1Api(api).create_storage_class(obj)
    elif kind == "PersistentVolume":
        if ref := obj["spec"].get("claimRef"):  # pre-bound to a claim of the case's namespace
            obj = {**obj, "spec": {**obj["spec"], "claimRef": {**ref, "namespace": ns}}}
        client.CoreV1Api(api).create_persistent_volume(obj)
    elif kind == "PersistentVolumeClaim":
        client.CoreV1Api(api).create_namespaced_persistent_volume_claim(ns, obj)
    elif kind in WORKLOADS:
        getattr(_api_of(api, kind), "create_namespaced_" + WORKLOADS[kind])(ns, obj, _preload_content=False)
    else:
        raise ValueError(f"kind {kind!r}: the harness does not create it")


def delete_extra(api: Any, ctl: Controllers | None, obj: Obj, ns: str) -> None:
    name, kind = obj["metadata"]["name"], obj["kind"]
    if kind == "PriorityClass":
        client.SchedulingV1Api(api).delete_priority_class(name)
    elif kind == "PodDisruptionBudget":
        client.CustomObjectsApi(api).delete_namespaced_custom_object(
            "policy", "v1beta1", ns, "poddisruptionbudgets", name
        )
    elif kind == "StorageClass":
        client.StorageV1Api(api).delete_storage_class(name)
    elif kind == "PersistentVolume" and ctl is not None:
        ctl.delete_pv(name)
    elif kind == "PersistentVolumeClaim" and ctl is not None:
        ctl.delete_claim(ns, name)
    elif kind in WORKLOADS:
        # (1.20 answers a Service's deletion with a Status, which the client's model refuses)
        getattr(_api_of(api, kind), "delete_namespaced_" + WORKLOADS[kind])(name, ns, _preload_content=False)


def list_workloads(api: Any, ns: str) -> dict[str, list[Obj]]:
    """The case's Services and workload controllers as the API server has them, by kind (as JSON: the
    client's models are slow to build)."""
    out: dict[str, list[Obj]] = {}
    for kind, plural in WORKLOADS.items():
        call = getattr(_api_of(api, kind), f"list_namespaced_{plural}")
        out[kind] = list(json.loads(call(ns, _preload_content=False).data)["items"])
    return out
