"""The NodeResourceTopology object itself (docs/rules/koordlet-topology.md#reporting): whether a built
``NRTStatus`` differs from the object on the API server, the object created when there is none, and the
merge patch that brings an existing one up to date. Pure. Imports: standard library, apis.kubeobjects,
agent.topology.{nrt,zones}.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from agent.topology.nrt import MANAGED_ANNOTATIONS, MANAGED_LABELS, NRTStatus
from agent.topology.zones import merge_zones, zones_equal
from apis.kubeobjects import Node

__all__ = [
    "NRT_API_VERSION",
    "NRT_GROUP",
    "NRT_PLURAL",
    "NRT_VERSION",
    "create_body",
    "is_changed",
    "patch_body",
]

NRT_GROUP: Final = "topology.node.k8s.io"
NRT_VERSION: Final = "v1alpha1"
NRT_PLURAL: Final = "noderesourcetopologies"
NRT_API_VERSION: Final = f"{NRT_GROUP}/{NRT_VERSION}"
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"


def _decoded(text: Any) -> Any:
    try:
        return ("json", json.loads(text))
    except (TypeError, ValueError, RecursionError):
        return ("raw", text)


def is_changed(status: NRTStatus, current: Mapping[str, Any] | None) -> tuple[bool, str]:
    """Upstream's ``isChanged``: no object or no annotations; ``topologyPolicies`` ≠ [policy]; a managed
    annotation present on one side only, or whose JSON decodes to a different value; a managed label
    differing; the zones differing (``zones_equal``). Returns (changed, reason)."""
    if current is None:
        return True, "metadata changed"
    meta = current.get("metadata") or {}
    old_ann = meta.get("annotations")
    if old_ann is None:
        return True, "metadata changed"
    if current.get("topologyPolicies") != [status.topology_policy]:
        return True, "TopologyPolicies changed"
    for key in MANAGED_ANNOTATIONS:
        in_old, in_new = key in old_ann, key in status.annotations
        if not in_old and not in_new:
            continue
        if in_old != in_new or _decoded(old_ann[key]) != _decoded(status.annotations[key]):
            return True, f"annotations changed, key {key}"
    old_labels = meta.get("labels") or {}
    for key in MANAGED_LABELS:
        if old_labels.get(key, "") != status.labels.get(key, ""):
            return True, f"labels changed, key {key}"
    equal, what = zones_equal(current.get("zones") or [], status.zones)
    if not equal:
        return True, f"Zones changed, item: {what}"
    return False, ""


def create_body(node: Node, status: NRTStatus) -> dict[str, Any]:
    """A new NRT named after the Node, owned by it (the object goes with the Node), labelled managed by
    Koordinator, already carrying this round's report."""
    meta = node.get("metadata") or {}
    name = str(meta.get("name") or "")
    return {
        "apiVersion": NRT_API_VERSION,
        "kind": "NodeResourceTopology",
        "metadata": {
            "name": name,
            "labels": {LABEL_MANAGED_BY: "Koordinator", **status.labels},
            "annotations": dict(status.annotations),
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "name": name,
                    "uid": str(meta.get("uid") or ""),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "topologyPolicies": [status.topology_policy],
        "zones": merge_zones([], status.zones),
    }


def patch_body(status: NRTStatus, current: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch: the managed annotations and labels (others untouched), ``topologyPolicies``
    and the merged zone list (a list is replaced whole, so it is merged here first). A managed key the
    object has but this report lacks (``cpu-basic-info`` from an upstream koordlet, a label the Node
    dropped) is deleted (``null``): left in place it would differ every round and be rewritten forever."""
    cur_meta = current.get("metadata") or {}
    cur_ann, cur_labels = cur_meta.get("annotations") or {}, cur_meta.get("labels") or {}
    annotations: dict[str, Any] = dict(status.annotations)
    annotations |= {k: None for k in MANAGED_ANNOTATIONS if k in cur_ann and k not in status.annotations}
    labels: dict[str, Any] = dict(status.labels)
    labels |= {k: None for k in MANAGED_LABELS if k in cur_labels and k not in status.labels}
    meta: dict[str, Any] = {"annotations": annotations}
    if labels:
        meta["labels"] = labels
    return {
        "metadata": meta,
        "topologyPolicies": [status.topology_policy],
        "zones": merge_zones(current.get("zones") or [], status.zones),
    }
