"""VolumeBinding's PreBind (docs/rules/scheduler-volumes.md#prebind): the assumed PVs (``spec.claimRef``
set) and claims (``volume.kubernetes.io/selected-node`` set) are written through the VolumeBinderAPI,
then the claims are polled until bound, up to the bind timeout, as kube's BindPodVolumes does. With
`complete_claims`, the scheduler also does the PV controller's half of a static binding (the claim's
``spec.volumeName`` and its bind-completed and bound-by-controller annotations), for clusters without
kube-controller-manager.
Imports: the standard library, apis.jsonfields, scheduler.plugins.volume (binderapi, matching).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from apis.jsonfields import as_mapping
from scheduler.plugins.volume.binderapi import VolumeAPIError, VolumeBinderAPI
from scheduler.plugins.volume.matching import is_bound_to_claim

ANN_SELECTED_NODE: Final = "volume.kubernetes.io/selected-node"
ANN_BIND_COMPLETED: Final = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER: Final = "pv.kubernetes.io/bound-by-controller"
Obj = Mapping[str, Any]


@dataclass
class PodVolumes:
    """kube's PodVolumes: the (PV, claim) pairs to bind and the claims to provision on one node."""

    static_bindings: list[tuple[Obj, Obj]] = field(default_factory=list)
    dynamic_provisions: list[Obj] = field(default_factory=list)


@dataclass(frozen=True)
class BindSettings:
    bind_timeout: float
    poll_interval: float
    complete_claims: bool


def claim_key(pvc: Obj) -> str:
    meta = as_mapping(pvc.get("metadata"))
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def _split(pvc: Obj) -> tuple[str, str]:
    meta = as_mapping(pvc.get("metadata"))
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _fully_bound(pvc: Obj) -> bool:
    ann = as_mapping(as_mapping(pvc.get("metadata")).get("annotations"))
    return bool(as_mapping(pvc.get("spec")).get("volumeName")) and ANN_BIND_COMPLETED in ann


def _complete_claim(api: VolumeBinderAPI, pv: Obj, pvc: Obj) -> None:
    """The PV controller's bindClaimToVolume on the claim as the API server has it now."""
    current = api.get_pvc(*_split(pvc))
    if current is None:
        raise VolumeAPIError(f'persistentvolumeclaim "{_split(pvc)[1]}" not found')
    meta = dict(as_mapping(current.get("metadata")))
    meta["annotations"] = {
        **as_mapping(meta.get("annotations")),
        ANN_BIND_COMPLETED: "yes",
        ANN_BOUND_BY_CONTROLLER: "yes",
    }
    spec = {**as_mapping(current.get("spec")), "volumeName": as_mapping(pv.get("metadata")).get("name")}
    api.update_pvc({**current, "metadata": meta, "spec": spec})


def _check(api: VolumeBinderAPI, node: str, volumes: PodVolumes) -> bool:
    """checkBindings: True when every claim is fully bound; raises VolumeAPIError on a lost binding."""
    for _, pvc in volumes.static_bindings:
        current = api.get_pvc(*_split(pvc))
        if current is None:
            raise VolumeAPIError(
                f'failed to check binding: persistentvolumeclaim "{_split(pvc)[1]}" not found'
            )
        if not _fully_bound(current):
            return False
    for pvc in volumes.dynamic_provisions:
        name = _split(pvc)[1]
        current = api.get_pvc(*_split(pvc))
        if current is None:
            raise VolumeAPIError(
                f'failed to check provisioning pvc: persistentvolumeclaim "{name}" not found'
            )
        ann = as_mapping(as_mapping(current.get("metadata")).get("annotations"))
        if not ann:
            raise VolumeAPIError(f'selectedNode annotation reset for PVC "{name}"')
        if ann.get(ANN_SELECTED_NODE) != node:
            raise VolumeAPIError(f'provisioning failed for PVC "{name}"')
        if not _fully_bound(current):
            return False
    return True


def bind_pod_volumes(
    api: VolumeBinderAPI,
    node: str,
    volumes: PodVolumes,
    settings: BindSettings,
    revert: Callable[[PodVolumes], None],
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> str | None:
    """BindPodVolumes: None on success, else the error message. Objects not yet written when a write
    fails have their assumptions reverted (`revert`), as bindAPIUpdate does."""
    bindings, provisions = list(volumes.static_bindings), list(volumes.dynamic_provisions)
    done_b = done_p = 0
    try:
        for pv, pvc in bindings:
            bindings[done_b] = (api.update_pv(pv), pvc)
            done_b += 1
        for pvc in provisions:
            provisions[done_p] = api.update_pvc(pvc)
            done_p += 1
        if settings.complete_claims:
            for pv, pvc in bindings:
                _complete_claim(api, pv, pvc)
    except VolumeAPIError as e:
        revert(PodVolumes(volumes.static_bindings[done_b:], volumes.dynamic_provisions[done_p:]))
        return str(e)
    deadline = clock() + settings.bind_timeout
    while True:  # wait.Poll: the first check comes one interval in
        sleep(settings.poll_interval)
        try:
            if _check(api, node, volumes):
                return None
        except VolumeAPIError as e:
            return f"binding volumes: {e}"
        if clock() >= deadline:
            return "binding volumes: timed out waiting for the condition"


def bind_volume_to_claim(pv: Mapping[str, Any], pvc: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool]:
    """GetBindVolumeToClaim: the PV with ``spec.claimRef`` naming the claim and, when it was not bound
    to it before, the bound-by-controller annotation; and whether anything changed."""
    meta = as_mapping(pvc.get("metadata"))
    spec = dict(as_mapping(pv.get("spec")))
    pv_meta = dict(as_mapping(pv.get("metadata")))
    ref = as_mapping(spec.get("claimRef"))
    dirty = False
    was_bound = is_bound_to_claim(pv, pvc)
    if (
        not ref
        or ref.get("name") != meta.get("name")
        or ref.get("namespace") != meta.get("namespace")
        or (ref.get("uid") or "") != (meta.get("uid") or "")
    ):
        new_ref = {
            "kind": "PersistentVolumeClaim",
            "namespace": meta.get("namespace"),
            "name": meta.get("name"),
        }
        new_ref |= {
            "uid": meta.get("uid"),
            "apiVersion": "v1",
            "resourceVersion": meta.get("resourceVersion"),
        }
        spec["claimRef"] = {k: v for k, v in new_ref.items() if v}
        dirty = True
    annotations = dict(as_mapping(pv_meta.get("annotations")))
    if not was_bound and ANN_BOUND_BY_CONTROLLER not in annotations:
        annotations[ANN_BOUND_BY_CONTROLLER] = "yes"
        pv_meta["annotations"] = annotations
        dirty = True
    return {**pv, "metadata": pv_meta, "spec": spec}, dirty
