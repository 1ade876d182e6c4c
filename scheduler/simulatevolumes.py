"""The storage half of ``koord simulate`` kind ``Schedule`` (docs/simulate.md#schedule-volumes): the
scenario's PersistentVolumes and PersistentVolumeClaims (checked by scheduler.simulatevolumes_input) are
kept in `ScenarioVolumeAPI` — the VolumeBinderAPI that VolumeBinding's PreBind writes through, in place
of the API server — and every object reaches the scheduler's VolumeObjects as its informers would
deliver it. The API also plays, at once, the two controllers a cluster runs beside the scheduler: the
PV controller (a PV whose ``spec.claimRef`` names a claim gets it bound: the claim's
``spec.volumeName``) and a dynamic provisioner (a claim annotated with its selected node gets a new PV,
bound to it). The binding rule itself is only VolumeBinding's; nothing here chooses a PV.
Imports: the standard library, scheduler.framework.volumes, scheduler.plugins.volume (binderapi,
binding_bind).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from scheduler.framework.volumes import PV, PVC, VolumeObjects, object_key, pvc_class, resource_version
from scheduler.plugins.volume.binderapi import VolumeAPIError
from scheduler.plugins.volume.binding_bind import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
)

Obj = Mapping[str, Any]
ANN_PROVISIONED_BY: Final = "pv.kubernetes.io/provisioned-by"
NO_PROVISIONER: Final = "kubernetes.io/no-provisioner"


def _meta(obj: Obj) -> dict[str, Any]:
    meta = obj.get("metadata")
    return dict(meta) if isinstance(meta, Mapping) else {}


def _bumped(obj: Obj, version: int) -> dict[str, Any]:
    return {**copy.deepcopy(dict(obj)), "metadata": {**_meta(obj), "resourceVersion": str(version)}}


class ScenarioVolumeAPI:
    """The VolumeBinderAPI of a simulation (see the module docstring). Every stored object gets a new
    ``metadata.resourceVersion`` (a write with a stale one is a conflict, as on the API server) and
    reaches `volumes` as an informer update. `provisioned` maps each PV it provisioned to its node."""

    def __init__(self, volumes: VolumeObjects) -> None:
        self.volumes = volumes
        self.store: dict[str, dict[str, dict[str, Any]]] = {PV: {}, PVC: {}}
        self.provisioned: dict[str, str] = {}
        self._version = 0

    def load(self, kind: str, obj: dict[str, Any], where: str) -> None:
        """A scenario object, as the informers' initial list delivers it."""
        key = object_key(kind, obj)
        self._version = max(self._version, resource_version(obj))  # every write gets a newer one
        if kind in self.store:
            if key in self.store[kind]:
                raise ValueError(f"{where}: {kind} {key} given twice")
            self.store[kind][key] = obj
        self.volumes.on_add(kind, obj)

    def _write(self, kind: str, obj: Obj, create: bool = False) -> dict[str, Any]:
        key = object_key(kind, obj)
        current = self.store[kind].get(key)
        resource = "persistentvolumes" if kind == PV else "persistentvolumeclaims"
        name = _meta(obj).get("name")
        if current is None and not create:
            raise VolumeAPIError(f'{resource} "{name}" not found')
        if current is not None and (
            create
            or str(_meta(obj).get("resourceVersion") or "")
            != str(_meta(current).get("resourceVersion") or "")
        ):
            raise VolumeAPIError(
                f'Operation cannot be fulfilled on {resource} "{name}": the object has been modified; '
                "please apply your changes to the latest version and try again"
            )
        self._version += 1
        stored = self.store[kind][key] = _bumped(obj, self._version)
        if current is None:
            self.volumes.on_add(kind, stored)
        else:
            self.volumes.on_update(kind, current, stored)
        return stored

    # --- VolumeBinderAPI ------------------------------------------------------------------------------
    def update_pv(self, pv: Obj) -> Obj:
        stored = self._write(PV, pv)
        return self._pv_controller(stored)

    def update_pvc(self, pvc: Obj) -> Obj:
        stored = self._write(PVC, pvc)
        self._provisioner(stored)
        return copy.deepcopy(self.store[PVC][object_key(PVC, stored)])

    def get_pvc(self, namespace: str, name: str) -> Obj | None:
        found = self.store[PVC].get(f"{namespace}/{name}")
        return copy.deepcopy(found) if found is not None else None

    # --- the controllers ----------------------------------------------------------------------------
    def _pv_controller(self, pv: dict[str, Any]) -> dict[str, Any]:
        """The PV controller's bind of a claim whose PV names it (syncUnboundClaim finds the PV pre-bound
        to it): the claim gets ``spec.volumeName`` and the bind-completed annotations, both turn Bound.
        Returns the PV as stored afterwards."""
        ref = pv.get("spec", {}).get("claimRef")
        if not isinstance(ref, Mapping):
            return pv
        claim = self.store[PVC].get(f"{ref.get('namespace') or ''}/{ref.get('name') or ''}")
        if claim is None or (ref.get("uid") and ref.get("uid") != _meta(claim).get("uid")):
            return pv
        spec = dict(claim.get("spec") or {})
        name = _meta(pv)["name"]
        if spec.get("volumeName") not in (None, "", name):
            return pv  # bound to another PV: the controller leaves this one
        annotations = dict(_meta(claim).get("annotations") or {})
        if not spec.get("volumeName"):
            annotations[ANN_BOUND_BY_CONTROLLER] = "yes"
        annotations[ANN_BIND_COMPLETED] = "yes"
        spec["volumeName"] = name
        status = {**dict(claim.get("status") or {}), "phase": "Bound"}
        capacity = pv.get("spec", {}).get("capacity")
        if capacity is not None:
            status["capacity"] = capacity
        self._write(PVC, {**claim, "metadata": {**_meta(claim), "annotations": annotations}, "spec": spec,
                          "status": status})  # fmt: skip
        if (pv.get("status") or {}).get("phase") == "Bound":
            return pv
        return self._write(PV, {**pv, "status": {**dict(pv.get("status") or {}), "phase": "Bound"}})

    def _provisioner(self, claim: dict[str, Any]) -> None:
        """A dynamic provisioner answering a claim annotated with its selected node: a PV ``pvc-<uid>``
        of the requested size, pre-bound to the claim, which the PV controller then binds."""
        annotations = _meta(claim).get("annotations") or {}
        node = annotations.get(ANN_SELECTED_NODE)
        spec = claim.get("spec") or {}
        if not node or spec.get("volumeName"):
            return
        cls = self.volumes.storage_class(pvc_class(claim))
        provisioner = str((cls or {}).get("provisioner") or "")
        if not provisioner or provisioner == NO_PROVISIONER:
            return
        meta = _meta(claim)
        name = f"pvc-{meta.get('uid') or meta.get('namespace', '') + '-' + meta['name']}"
        pv_spec: dict[str, Any] = {
            "capacity": {"storage": spec["resources"]["requests"]["storage"]},
            "accessModes": list(spec.get("accessModes") or []),
            "storageClassName": pvc_class(claim),
            "volumeMode": spec.get("volumeMode") or "Filesystem",
            "persistentVolumeReclaimPolicy": (cls or {}).get("reclaimPolicy") or "Delete",
            "claimRef": {k: v for k, v in (("kind", "PersistentVolumeClaim"), ("apiVersion", "v1"),
                         ("namespace", meta.get("namespace")), ("name", meta["name"]),
                         ("uid", meta.get("uid"))) if v},
        }  # fmt: skip
        if not provisioner.startswith("kubernetes.io/"):  # a CSI driver: NodeVolumeLimits counts it
            pv_spec["csi"] = {"driver": provisioner, "volumeHandle": name}
        pv = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {ANN_PROVISIONED_BY: provisioner}},
            "spec": pv_spec,
            "status": {"phase": "Available"},
        }
        self.provisioned[name] = str(node)
        self._pv_controller(self._write(PV, pv, create=True))

    # --- the result ---------------------------------------------------------------------------------
    def claims_of(self, namespace: str, names: list[str]) -> dict[str, Any]:
        """Each claim's binding: ``{"pv": …}``, with ``"provisionedOn": <node>`` for a PV provisioned
        here; ``{}`` for a claim still unbound."""
        out: dict[str, Any] = {}
        for name in names:
            claim = self.store[PVC].get(f"{namespace}/{name}")
            volume = (claim or {}).get("spec", {}).get("volumeName")
            if not volume:
                out[name] = {}
            elif volume in self.provisioned:
                out[name] = {"pv": volume, "provisionedOn": self.provisioned[volume]}
            else:
                out[name] = {"pv": volume}
        return out


class ScenarioClock:
    """The scenario's monotonic clock: PreBind's wait for its claims sleeps on it without real waiting."""

    def __init__(self, start: float) -> None:
        self.now = start

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.0)

    def monotonic(self) -> float:
        return self.now
