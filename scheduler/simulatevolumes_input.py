"""The storage objects of a ``koord simulate`` Schedule scenario checked as the API server would have
shaped them (docs/simulate.md#schedule-volumes): every field the volume plugins read has its JSON type
(``apis.objectcheck``), quantities parse, enumerations hold a value Kubernetes v1.20 allows, and the
API server's defaults are applied. A ValueError names the field's path and its value.
Imports: the standard library, apis (kubeobjects, objectcheck, quantity), scheduler.framework.volumes.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final, TypedDict

from apis.kubeobjects import KubeObject, ResourceRequirements
from apis.objectcheck import check_object, show
from apis.quantity import Quantity, QuantityError
from scheduler.framework.volumes import CSI_NODE, PV, PVC, STORAGE_CLASS

Obj = Mapping[str, Any]


# --- the shapes checked (the fields the volume plugins read) ------------------------------------------
class _Requirement(TypedDict, total=False):
    key: str
    operator: str
    values: list[str]


class _NodeSelectorTerm(TypedDict, total=False):
    matchExpressions: list[_Requirement]
    matchFields: list[_Requirement]


class _NodeSelector(TypedDict, total=False):
    nodeSelectorTerms: list[_NodeSelectorTerm]


class _VolumeNodeAffinity(TypedDict, total=False):
    required: _NodeSelector


class _ObjectReference(TypedDict, total=False):
    kind: str
    apiVersion: str
    namespace: str
    name: str
    uid: str
    resourceVersion: str


class _CSISource(TypedDict, total=False):
    driver: str
    volumeHandle: str
    readOnly: bool


class _PVSpec(TypedDict, total=False):
    capacity: dict[str, Any]  # quantities, checked by _quantities
    accessModes: list[str]
    storageClassName: str
    volumeMode: str
    claimRef: _ObjectReference
    nodeAffinity: _VolumeNodeAffinity
    persistentVolumeReclaimPolicy: str
    csi: _CSISource


class _Phase(TypedDict, total=False):
    phase: str


class _PersistentVolume(KubeObject, total=False):
    spec: _PVSpec
    status: _Phase


class _LabelSelector(TypedDict, total=False):
    matchLabels: dict[str, str]
    matchExpressions: list[_Requirement]


class _PVCSpec(TypedDict, total=False):
    accessModes: list[str]
    resources: ResourceRequirements
    storageClassName: str
    volumeName: str
    volumeMode: str
    selector: _LabelSelector


class _PersistentVolumeClaim(KubeObject, total=False):
    spec: _PVCSpec
    status: _Phase


class _TopologyRequirement(TypedDict, total=False):
    key: str
    values: list[str]


class _TopologyTerm(TypedDict, total=False):
    matchLabelExpressions: list[_TopologyRequirement]


class _StorageClassFields(TypedDict, total=False):
    provisioner: str
    volumeBindingMode: str
    reclaimPolicy: str
    allowedTopologies: list[_TopologyTerm]
    parameters: dict[str, str]


class _StorageClass(KubeObject, _StorageClassFields, total=False):
    """storage.k8s.io/v1 StorageClass: its fields sit beside ``metadata``."""


class _Allocatable(TypedDict, total=False):
    count: int


class _CSINodeDriver(TypedDict, total=False):
    name: str
    nodeID: str
    topologyKeys: list[str]
    allocatable: _Allocatable


class _CSINodeSpec(TypedDict, total=False):
    drivers: list[_CSINodeDriver]


class _CSINode(KubeObject, total=False):
    spec: _CSINodeSpec


_SHAPES: Final[dict[str, type]] = {
    PV: _PersistentVolume, PVC: _PersistentVolumeClaim, STORAGE_CLASS: _StorageClass, CSI_NODE: _CSINode,
}  # fmt: skip
# Values the API server's validation allows (v1.20): a scenario holding another is refused.
_ENUMS: Final[dict[str, dict[tuple[str, ...], tuple[str, ...]]]] = {
    PV: {
        ("spec", "accessModes", "[]"): ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"),
        ("spec", "volumeMode"): ("Filesystem", "Block"),
        ("status", "phase"): ("Pending", "Available", "Bound", "Released", "Failed"),
        ("spec", "persistentVolumeReclaimPolicy"): ("Retain", "Delete", "Recycle"),
        (
            "spec",
            "nodeAffinity",
            "required",
            "nodeSelectorTerms",
            "[]",
            "matchExpressions",
            "[]",
            "operator",
        ): (
            "In",
            "NotIn",
            "Exists",
            "DoesNotExist",
            "Gt",
            "Lt",
        ),
    },
    PVC: {
        ("spec", "accessModes", "[]"): ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"),
        ("spec", "volumeMode"): ("Filesystem", "Block"),
        ("status", "phase"): ("Pending", "Bound", "Lost"),
        ("spec", "selector", "matchExpressions", "[]", "operator"): ("In", "NotIn", "Exists", "DoesNotExist"),
    },
    STORAGE_CLASS: {
        ("volumeBindingMode",): ("Immediate", "WaitForFirstConsumer"),
        ("reclaimPolicy",): ("Retain", "Delete"),
    },
}


def _walk(value: Any, path: tuple[str, ...], where: str) -> list[tuple[str, Any]]:
    """The values at `path` ("[]" steps into every item of a list), each with its own path."""
    if not path:
        return [(where, value)]
    step, rest = path[0], path[1:]
    if step == "[]":
        items = value if isinstance(value, list) else []
        return [hit for i, item in enumerate(items) for hit in _walk(item, rest, f"{where}[{i}]")]
    if not isinstance(value, Mapping) or step not in value:
        return []
    return _walk(value[step], rest, f"{where}.{step}")


def _quantities(obj: Obj, path: tuple[str, ...], where: str, required: bool) -> None:
    found = _walk(obj, path, where)
    if required and not found:
        raise ValueError(f"{where}.{'.'.join(path)}: required")
    for at, raw in found:
        try:
            Quantity.from_json(raw)
        except QuantityError as e:
            raise ValueError(f"{at}: {e}") from None


def check_storage_object(kind: str, raw: Obj, where: str) -> dict[str, Any]:
    """`raw` checked as the API server would have shaped a `kind` object (every field the volume
    plugins read has its type; quantities parse; enumerations hold a value v1.20 allows; a claim's
    namespace defaults to ``default`` and a class' ``volumeBindingMode`` to ``Immediate``, as the
    API server defaults them). A copy; ValueError names the field and value."""
    obj: dict[str, Any] = copy.deepcopy(dict(check_object(raw, _SHAPES[kind], where)))
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise ValueError(f"{where}.metadata.name: required")
    if kind == PVC:
        obj["metadata"] = {"namespace": "default", **meta}
    if kind == STORAGE_CLASS:
        obj.setdefault("volumeBindingMode", "Immediate")
        if not isinstance(obj.get("provisioner"), str) or not obj["provisioner"]:
            raise ValueError(f"{where}.provisioner: required")
    for path, allowed in _ENUMS.get(kind, {}).items():
        for at, value in _walk(obj, path, where):
            if value not in allowed:
                raise ValueError(f"{at}={show(value)}: must be one of {', '.join(allowed)}")
    if kind == PV:
        _quantities(obj, ("spec", "capacity", "storage"), where, required=True)
        _quantities(obj, ("spec", "capacity", "[]"), where, required=False)
    if kind == PVC:
        _quantities(obj, ("spec", "resources", "requests", "storage"), where, required=True)
    return obj
