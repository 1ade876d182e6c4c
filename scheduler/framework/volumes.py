"""VolumeObjects: the storage objects the volume plugins read — PersistentVolumes, PersistentVolumeClaims,
StorageClasses and CSINodes (storage.k8s.io/v1) — kept from the informers' events, plus the scheduler's
*assumed* PV and PVC versions (kube-scheduler's AssumeCache, docs/rules/scheduler-volumes.md#assume-cache):
an assumed object hides the informer's version until the informer delivers a version at least as new
(by ``metadata.resourceVersion``) or the assumption is reverted.

Thread-safe: informer threads write, scheduling cycles read, under one lock. Objects are Kubernetes
JSON mappings and are never modified here (an assumed object is a new mapping).
Imports: the standard library, apis.jsonfields.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Final

from apis.jsonfields import as_mapping

Obj = Mapping[str, Any]

PV: Final = "PersistentVolume"
PVC: Final = "PersistentVolumeClaim"
STORAGE_CLASS: Final = "StorageClass"
CSI_NODE: Final = "CSINode"
KINDS: Final = (PV, PVC, STORAGE_CLASS, CSI_NODE)
_NAMESPACED: Final = frozenset({PVC})
_ASSUMABLE: Final = frozenset({PV, PVC})


def object_key(kind: str, obj: Obj) -> str:
    """``namespace/name`` for claims, ``name`` for the cluster-scoped kinds."""
    meta = as_mapping(obj.get("metadata"))
    name = str(meta.get("name") or "")
    return f"{meta.get('namespace') or ''}/{name}" if kind in _NAMESPACED else name


def resource_version(obj: Obj) -> int:
    """``metadata.resourceVersion`` as an integer (kube's AssumeCache parses it so; unparsable is 0)."""
    raw = as_mapping(obj.get("metadata")).get("resourceVersion")
    try:
        return int(str(raw))
    except ValueError:
        return 0


class VolumeObjects:
    """The store; see the module docstring. `version` grows on every change a reader could see, and
    `kind_versions[kind]` on every change of that kind."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[str, dict[str, Obj]] = {k: {} for k in KINDS}
        self._assumed: dict[str, dict[str, Obj]] = {k: {} for k in _ASSUMABLE}
        self.version = 0
        self.kind_versions: dict[str, int] = dict.fromkeys(KINDS, 0)  # per kind, for caches of one kind
        self._by_class: tuple[int, dict[str, list[Obj]]] | None = None  # PVs by class at a PV version

    def _check(self, kind: str) -> None:
        if kind not in self._objects:
            raise ValueError(f"kind={kind!r}: must be one of {', '.join(KINDS)}")

    # --- informer events ----------------------------------------------------------------------------
    def on_add(self, kind: str, obj: Obj) -> None:
        self._check(kind)
        key = object_key(kind, obj)
        with self._lock:
            self._objects[kind][key] = obj
            assumed = self._assumed.get(kind)
            # An informer version older than the assumed one leaves the assumption in place.
            if (
                assumed is not None
                and key in assumed
                and resource_version(obj) >= resource_version(assumed[key])
            ):
                del assumed[key]
            self.version += 1
            self.kind_versions[kind] += 1

    def on_update(self, kind: str, old: Obj, new: Obj) -> None:
        self.on_add(kind, new)

    def on_delete(self, kind: str, obj: Obj) -> None:
        self._check(kind)
        key = object_key(kind, obj)
        with self._lock:
            self._objects[kind].pop(key, None)
            assumed = self._assumed.get(kind)
            if assumed is not None:
                assumed.pop(key, None)
            self.version += 1
            self.kind_versions[kind] += 1

    # --- assumptions --------------------------------------------------------------------------------
    def assume(self, kind: str, obj: Obj) -> None:
        """Makes `obj` the visible version of its object until the informer catches up or `restore`.
        Raises ValueError for an unknown object or one older than the visible version, as
        AssumeCache.Assume does."""
        if kind not in _ASSUMABLE:
            raise ValueError(f"kind={kind!r}: only {PV} and {PVC} can be assumed")
        key = object_key(kind, obj)
        with self._lock:
            current = self._assumed[kind].get(key) or self._objects[kind].get(key)
            if current is None:
                raise ValueError(f"{kind} {key!r} not found")
            if resource_version(obj) < resource_version(current):
                raise ValueError(
                    f"{kind} {key!r} is out of sync (stored: {resource_version(current)}, "
                    f"assume: {resource_version(obj)})"
                )
            self._assumed[kind][key] = obj
            self.version += 1
            self.kind_versions[kind] += 1

    def restore(self, kind: str, key: str) -> None:
        """Reverts an assumption: the informer's version is visible again."""
        with self._lock:
            if self._assumed.get(kind, {}).pop(key, None) is not None:
                self.version += 1
                self.kind_versions[kind] += 1

    def is_assumed(self, kind: str, key: str) -> bool:
        with self._lock:
            return key in self._assumed.get(kind, {})

    # --- lookups ------------------------------------------------------------------------------------
    def get(self, kind: str, key: str) -> Obj | None:
        """The visible version (assumed, else the informer's)."""
        self._check(kind)
        with self._lock:
            found = self._assumed.get(kind, {}).get(key)
            return found if found is not None else self._objects[kind].get(key)

    def api_object(self, kind: str, key: str) -> Obj | None:
        """The informer's version, ignoring assumptions."""
        self._check(kind)
        with self._lock:
            return self._objects[kind].get(key)

    def pvc(self, namespace: str, name: str) -> Obj | None:
        return self.get(PVC, f"{namespace}/{name}")

    def pv(self, name: str) -> Obj | None:
        return self.get(PV, name)

    def storage_class(self, name: str) -> Obj | None:
        return self.get(STORAGE_CLASS, name)

    def csi_node(self, node_name: str) -> Obj | None:
        return self.get(CSI_NODE, node_name)

    def objects(self, kind: str) -> dict[str, Obj]:
        """Every visible object of a kind by key (a copy of the index)."""
        self._check(kind)
        with self._lock:
            return {**self._objects[kind], **self._assumed.get(kind, {})}

    def pvs(self) -> list[Obj]:
        """Every visible PV, in name order."""
        with self._lock:
            merged = {**self._objects[PV], **self._assumed[PV]}
        return [merged[k] for k in sorted(merged)]

    def pvs_of_class(self, class_name: str) -> list[Obj]:
        """The visible PVs of a storage class (``spec.storageClassName``, or the beta annotation), the
        candidates kube's binder matches a claim of that class against (PVCache.ListPVs)."""
        version = self.kind_versions[PV]
        cached = self._by_class
        if cached is None or cached[0] != version:
            by_class: dict[str, list[Obj]] = {}
            for pv in self.pvs():
                by_class.setdefault(pv_class(pv), []).append(pv)
            cached = self._by_class = (version, by_class)
        return list(cached[1].get(class_name, ()))


BETA_STORAGE_CLASS_ANNOTATION: Final = "volume.beta.kubernetes.io/storage-class"


def pvc_class(pvc: Obj) -> str:
    """v1helper.GetPersistentVolumeClaimClass: the beta annotation wins over ``spec.storageClassName``."""
    ann = as_mapping(as_mapping(pvc.get("metadata")).get("annotations"))
    if BETA_STORAGE_CLASS_ANNOTATION in ann:
        return str(ann[BETA_STORAGE_CLASS_ANNOTATION] or "")
    return str(as_mapping(pvc.get("spec")).get("storageClassName") or "")


def pv_class(pv: Obj) -> str:
    """v1helper.GetPersistentVolumeClass, as `pvc_class`."""
    return pvc_class(pv)
