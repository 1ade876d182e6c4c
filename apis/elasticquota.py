"""ElasticQuota's shared vocabulary: the CRD (``scheduling.sigs.k8s.io/v1alpha1``, namespaced), the quota
labels and annotations, the pod labels naming a quota, and the special quota names
(docs/rules/scheduler-elasticquota.md#the-elasticquota-object,
docs/rules/scheduler-elasticquota.md#labels-and-annotations,
docs/rules/scheduler-elasticquota.md#special-quotas).

``parse_elastic_quota`` decodes one object; its ValueError names the field and the value.
Imports: the standard library and apis (quantity, pod field access). Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from apis.pod import pod_labels
from apis.quantity import Quantity, QuantityError, parse_resource_list

GROUP: Final = "scheduling.sigs.k8s.io"
VERSION: Final = "v1alpha1"
PLURAL: Final = "elasticquotas"

PREFIX: Final = "quota.scheduling.koordinator.sh"
# --- on the ElasticQuota (docs/rules/scheduler-elasticquota.md#labels-and-annotations) -----------------
LABEL_PARENT: Final = PREFIX + "/parent"
LABEL_IS_PARENT: Final = PREFIX + "/is-parent"
LABEL_ALLOW_LENT_RESOURCE: Final = PREFIX + "/allow-lent-resource"
LABEL_TREE_ID: Final = PREFIX + "/tree-id"
LABEL_IS_ROOT: Final = PREFIX + "/is-root"
ANNOTATION_SHARED_WEIGHT: Final = PREFIX + "/shared-weight"
ANNOTATION_NAMESPACES: Final = PREFIX + "/namespaces"
ANNOTATION_RUNTIME: Final = PREFIX + "/runtime"
ANNOTATION_REQUEST: Final = PREFIX + "/request"
ANNOTATION_CHILD_REQUEST: Final = PREFIX + "/child-request"
ANNOTATION_GUARANTEED: Final = PREFIX + "/guaranteed"
ANNOTATION_ALLOCATED: Final = PREFIX + "/allocated"
ANNOTATION_NON_PREEMPTIBLE_REQUEST: Final = PREFIX + "/non-preemptible-request"
ANNOTATION_NON_PREEMPTIBLE_USED: Final = PREFIX + "/non-preemptible-used"
# --- on the Pod ------------------------------------------------------------------------------------------
LABEL_QUOTA_NAME: Final = PREFIX + "/name"
LABEL_PREEMPTIBLE: Final = PREFIX + "/preemptible"

# --- special quotas (docs/rules/scheduler-elasticquota.md#special-quotas) --------------------------------
ROOT_QUOTA: Final = "koordinator-root-quota"
SYSTEM_QUOTA: Final = "koordinator-system-quota"
DEFAULT_QUOTA: Final = "koordinator-default-quota"
SPECIAL_QUOTAS: Final = frozenset({ROOT_QUOTA, SYSTEM_QUOTA, DEFAULT_QUOTA})


@dataclass(frozen=True, slots=True)
class ElasticQuota:
    """One ElasticQuota as the scheduler reads it. ``shared_weight`` is None when the annotation is
    absent, unparsable or all zeros (the quota then shares by its max)."""

    name: str
    namespace: str = ""
    min: dict[str, Quantity] = field(default_factory=dict)
    max: dict[str, Quantity] = field(default_factory=dict)
    parent: str = ROOT_QUOTA
    is_parent: bool = False
    allow_lent_resource: bool = True
    tree_id: str = ""
    is_root: bool = False
    shared_weight: dict[str, Quantity] | None = None
    namespaces: tuple[str, ...] = ()

    @property
    def effective_shared_weight(self) -> dict[str, Quantity]:
        return dict(self.max) if self.shared_weight is None else dict(self.shared_weight)


def _str_map(value: object, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}={value!r:.80}: expected an object of strings")
    out: dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(v, str):
            raise ValueError(f"{where}.{k}={v!r:.80}: expected a string")
        out[str(k)] = v
    return out


def _resources(value: object, where: str) -> dict[str, Quantity]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}={value!r:.80}: expected a ResourceList object")
    try:
        return parse_resource_list(value)
    except QuantityError as e:
        raise ValueError(f"{where}: {e}") from None


def parse_shared_weight(text: str | None) -> dict[str, Quantity] | None:
    """The shared-weight annotation: a JSON ResourceList used when it parses and is not all zeros
    (docs/rules/scheduler-elasticquota.md#labels-and-annotations)."""
    if text is None:
        return None
    try:
        raw = json.loads(text)
        weights = parse_resource_list(raw) if isinstance(raw, Mapping) else None
    except (ValueError, RecursionError):
        return None
    if not weights or all(q.is_zero() for q in weights.values()):
        return None
    return weights


def parse_namespaces(text: str | None) -> tuple[str, ...]:
    """The namespaces annotation: a JSON array of strings; anything else lists none."""
    if text is None:
        return ()
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        return ()
    if not isinstance(raw, list) or not all(isinstance(n, str) for n in raw):
        return ()
    return tuple(raw)


def parse_elastic_quota(obj: object, where: str = "quota") -> ElasticQuota:
    """An ElasticQuota from its JSON (``metadata.name/namespace/labels/annotations``, ``spec.min/max``).
    The label rules: parent empty or absent → the root (the root itself has none); ``is-parent`` and
    ``is-root`` exactly ``"true"``; lending allowed unless ``allow-lent-resource`` is exactly ``"false"``."""
    if not isinstance(obj, Mapping):
        raise ValueError(f"{where}={obj!r:.80}: expected an ElasticQuota object")
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise ValueError(f"{where}.metadata={meta!r:.80}: expected an object")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}.metadata.name={name!r:.80}: expected a non-empty string")
    namespace = meta.get("namespace")
    if namespace is None:
        namespace = ""
    if not isinstance(namespace, str):
        raise ValueError(f"{where}.metadata.namespace={namespace!r:.80}: expected a string")
    labels = _str_map(meta.get("labels"), f"{where}.metadata.labels")
    annotations = _str_map(meta.get("annotations"), f"{where}.metadata.annotations")
    spec = obj.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping):
        raise ValueError(f"{where}.spec={spec!r:.80}: expected an object")
    parent = labels.get(LABEL_PARENT, "")
    if not parent and name != ROOT_QUOTA:
        parent = ROOT_QUOTA
    if name == ROOT_QUOTA:
        parent = ""
    return ElasticQuota(
        name=name,
        namespace=namespace,
        min=_resources(spec.get("min"), f"{where}.spec.min"),
        max=_resources(spec.get("max"), f"{where}.spec.max"),
        parent=parent,
        is_parent=labels.get(LABEL_IS_PARENT) == "true",
        allow_lent_resource=labels.get(LABEL_ALLOW_LENT_RESOURCE) != "false",
        tree_id=labels.get(LABEL_TREE_ID, ""),
        is_root=labels.get(LABEL_IS_ROOT) == "true",
        shared_weight=parse_shared_weight(annotations.get(ANNOTATION_SHARED_WEIGHT)),
        namespaces=parse_namespaces(annotations.get(ANNOTATION_NAMESPACES)),
    )


def pod_quota_label(pod: Mapping[str, Any]) -> str:
    """The pod's ``quota.scheduling.koordinator.sh/name`` label ("" when absent or not a string)."""
    value = pod_labels(pod).get(LABEL_QUOTA_NAME)
    return value if isinstance(value, str) else ""


def is_pod_non_preemptible(pod: Mapping[str, Any]) -> bool:
    """Labelled ``quota.scheduling.koordinator.sh/preemptible: "false"`` exactly."""
    return pod_labels(pod).get(LABEL_PREEMPTIBLE) == "false"
