"""The object rewrites of koord.kustomize, applied once the kustomization's fields are validated
there: the namespace (with kustomize's cluster-scoped kinds and its role-binding subject rule), metadata
labels and container image references, and kustomize's legacy output order. None of them raises: bad
input is refused by koord.kustomize before they run.

Imports: the standard library only.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = [
    "CLUSTER_SCOPED",
    "ORDER_FIRST",
    "ORDER_LAST",
    "add_labels",
    "set_images",
    "set_namespace",
    "sort_objects",
]

# kustomize's legacy output order (api/resid/gvk.go): these kinds first, in this order; these last;
# every other kind in between. Ties: group_version_kind, then namespace, then name.
ORDER_FIRST = (
    "Namespace", "ResourceQuota", "StorageClass", "CustomResourceDefinition", "ServiceAccount",
    "PodSecurityPolicy", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "ConfigMap",
    "Secret", "Endpoints", "Service", "LimitRange", "PriorityClass", "PersistentVolume",
    "PersistentVolumeClaim", "Deployment", "StatefulSet", "CronJob", "PodDisruptionBudget",
)  # fmt: skip
ORDER_LAST = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")

# Kinds kustomize knows to be cluster-scoped (the namespace transformer leaves them alone). Kinds it does
# not know (custom resources) count as namespaced, as in kustomize.
CLUSTER_SCOPED = frozenset({
    "APIService", "CertificateSigningRequest", "ClusterRole", "ClusterRoleBinding", "ComponentStatus",
    "CSIDriver", "CSINode", "CustomResourceDefinition", "FlowSchema", "IngressClass",
    "MutatingWebhookConfiguration", "Namespace", "Node", "PersistentVolume", "PodSecurityPolicy",
    "PriorityClass", "PriorityLevelConfiguration", "RuntimeClass", "SelfSubjectAccessReview",
    "SelfSubjectRulesReview", "StorageClass", "SubjectAccessReview", "TokenReview",
    "ValidatingWebhookConfiguration", "VolumeAttachment",
})  # fmt: skip


def set_namespace(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    """``obj`` in ``namespace`` (a cluster-scoped kind keeps none), as kustomize's namespace transformer."""
    if obj.get("kind") in CLUSTER_SCOPED:
        out = obj
    else:
        out = copy.deepcopy(obj)
        out["metadata"]["namespace"] = namespace
    # kustomize's role-binding rule: subjects named "default" (the default ServiceAccount) follow the
    # namespace; every other subject keeps its own.
    if obj.get("kind") in ("RoleBinding", "ClusterRoleBinding"):
        out = copy.deepcopy(out)
        for subject in out.get("subjects") or []:
            if isinstance(subject, dict) and subject.get("name") == "default":
                subject["namespace"] = namespace
    return out


def add_labels(obj: dict[str, Any], pairs: Mapping[str, str]) -> dict[str, Any]:
    """``obj`` with ``pairs`` added to its ``metadata.labels`` (a copy)."""
    out = copy.deepcopy(obj)
    labels = out["metadata"].get("labels")
    out["metadata"]["labels"] = {**(labels or {}), **pairs}
    return out


def _split_image(image: str) -> tuple[str, str]:
    """(name, suffix): suffix is ``:tag``, ``@digest``, ``:tag@digest`` or empty."""
    name, at, digest = image.partition("@")
    suffix = at + digest
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        name, suffix = name[:colon], name[colon:] + suffix
    return name, suffix


def set_images(obj: dict[str, Any], spec: Mapping[str, str]) -> dict[str, Any]:
    """``obj`` with every container image named ``spec["name"]`` rewritten by ``spec`` (a copy)."""
    out = copy.deepcopy(obj)
    _walk_images(out, spec)
    return out


def _walk_images(node: Any, spec: Mapping[str, str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                for container in value:
                    if isinstance(container, dict) and isinstance(container.get("image"), str):
                        container["image"] = _new_image(container["image"], spec)
            _walk_images(value, spec)
    elif isinstance(node, list):
        for item in node:
            _walk_images(item, spec)


def _new_image(image: str, spec: Mapping[str, str]) -> str:
    name, suffix = _split_image(image)
    if name != spec["name"]:
        return image
    if "newTag" in spec:
        suffix = ":" + spec["newTag"]
    elif "digest" in spec:
        suffix = "@" + spec["digest"]
    return spec.get("newName", name) + suffix


# -- output order -------------------------------------------------------------------------------------------


def _gvk(obj: Mapping[str, Any]) -> str:
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    return "_".join((group or "~G", version or "~V", str(obj.get("kind") or "~K")))


def _order_key(obj: Mapping[str, Any]) -> tuple[int, str, str, str]:
    kind = str(obj.get("kind", ""))
    if kind in ORDER_FIRST:
        rank = ORDER_FIRST.index(kind) - len(ORDER_FIRST)
    elif kind in ORDER_LAST:
        rank = ORDER_LAST.index(kind) + 1
    else:
        rank = 0
    meta = obj.get("metadata") or {}
    return rank, _gvk(obj), str(meta.get("namespace") or "~X"), str(meta.get("name") or "~N")


def sort_objects(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``objs`` in kustomize's legacy output order."""
    return sorted(objs, key=_order_key)
