"""Oracles for the volume filters (docs/rules/scheduler-volumes.md): each rule node by node, as
kube-scheduler v1.20.2's Filter reads it — the node's pods' volumes resolved on every call, no views.
Parsing helpers that are not per-node rules (the CSI limit key, the zone label set, a claim's driver)
are the production code's; their own tests pin them. `volume_oracle_for` maps a production plugin to
its oracle over the same store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apis.labelselector import LabelSelectorError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Plugin, Pod
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.framework.volumes import VolumeObjects, pvc_class
from scheduler.plugins.volume import limits, limits_intree, matching, restrictions, zone
from scheduler.plugins.volume.limits import csi_attach_limit_key, csi_driver_info


def _map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _vols(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    raw = _map(pod.get("spec")).get("volumes")
    return [_map(v) for v in raw] if isinstance(raw, list) else []


def _ns(pod: Mapping[str, Any]) -> str:
    return str(_map(pod.get("metadata")).get("namespace") or "")


class VolumeRestrictionsOracle:
    name = restrictions.NAME

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> Status:
        for v in _vols(pod):
            if not any(isinstance(v.get(k), Mapping) for k in restrictions._DISKS):
                continue
            for p in snapshot.infos[i].pods.values():
                for e in _vols(p.pod):
                    if restrictions.is_volume_conflict(v, e):
                        return Status.unschedulable(restrictions.ERR_REASON_DISK_CONFLICT, plugin=self.name)
        return Status.success()


def err(message: str) -> Status:
    return Status.error(message, plugin=zone.NAME)


class VolumeZoneOracle:
    name = zone.NAME

    def __init__(self, volumes: VolumeObjects) -> None:
        self.volumes = volumes

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> Status:
        if not _vols(pod):
            return Status.success()
        labels = _map(_map(snapshot.infos[i].node.get("metadata")).get("labels"))
        constraints = {k: v for k, v in labels.items() if k in zone.ZONE_LABELS}
        if not constraints:
            return Status.success()
        for v in _vols(pod):
            src = v.get("persistentVolumeClaim")
            if not isinstance(src, Mapping):
                continue
            name = str(src.get("claimName") or "")
            if not name:
                return err("PersistentVolumeClaim had no name")
            pvc = self.volumes.pvc(_ns(pod), name)
            if pvc is None:
                return err(f'persistentvolumeclaim "{name}" not found')
            pv_name = str(_map(pvc.get("spec")).get("volumeName") or "")
            if not pv_name:
                ann = _map(_map(pvc.get("metadata")).get("annotations"))
                sc_name = str(
                    ann.get("volume.beta.kubernetes.io/storage-class")
                    if "volume.beta.kubernetes.io/storage-class" in ann
                    else _map(pvc.get("spec")).get("storageClassName") or ""
                )
                if not sc_name:
                    return err("PersistentVolumeClaim had no pv name and storageClass name")
                sc = self.volumes.storage_class(sc_name)
                if sc is None:
                    return err(
                        f'StorageClass "{sc_name}" claimed by PersistentVolumeClaim "{name}" not found'
                    )
                if not isinstance(sc.get("volumeBindingMode"), str):
                    return err(f'VolumeBindingMode not set for StorageClass "{sc_name}"')
                if sc["volumeBindingMode"] == "WaitForFirstConsumer":
                    continue
                return err("PersistentVolume had no name")
            pv = self.volumes.pv(pv_name)
            if pv is None:
                return err(f'persistentvolume "{pv_name}" not found')
            for k, val in _map(_map(pv.get("metadata")).get("labels")).items():
                if k not in zone.ZONE_LABELS:
                    continue
                zones = zone.label_zones_to_set(str(val))
                if zones is None:
                    continue
                if str(constraints.get(k, "")) not in zones:
                    return Status.unresolvable(zone.ERR_REASON_CONFLICT, plugin=self.name)
        return Status.success()


class NodeVolumeLimitsOracle:
    name = limits.NAME

    def __init__(self, volumes: VolumeObjects) -> None:
        self.volumes = volumes

    def _attachable(self, ns: str, vols: list[Mapping[str, Any]], into: dict[str, str]) -> bool:
        for v in vols:
            src = v.get("persistentVolumeClaim")
            if not isinstance(src, Mapping):
                continue
            name = str(src.get("claimName") or "")
            if not name:
                return False
            pvc = self.volumes.pvc(ns, name)
            if pvc is None:
                continue
            driver, handle = csi_driver_info(self.volumes, pvc, ns, name)
            if driver and handle:
                into[f"{driver}/{handle}"] = csi_attach_limit_key(driver)
        return True

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> Status:
        if not _vols(pod):
            return Status.success()
        info = snapshot.infos[i]
        no_name = Status.error("PersistentVolumeClaim had no name", plugin=self.name)
        new: dict[str, str] = {}
        if not self._attachable(_ns(pod), _vols(pod), new):
            return no_name
        if not new:
            return Status.success()
        node_limits = limits.node_volume_limits(info.node, info.allocatable, self.volumes.csi_node(info.name))
        if not node_limits:
            return Status.success()
        attached: dict[str, str] = {}
        for p in info.pods.values():
            if not self._attachable(_ns(p.pod), _vols(p.pod), attached):
                return no_name
        attached_count: dict[str, int] = {}
        for unique, key in attached.items():
            new.pop(unique, None)
            attached_count[key] = attached_count.get(key, 0) + 1
        new_count: dict[str, int] = {}
        for key in new.values():
            new_count[key] = new_count.get(key, 0) + 1
        for key, count in new_count.items():
            if key in node_limits and attached_count.get(key, 0) + count > node_limits[key]:
                return Status.unschedulable(limits.ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, plugin=self.name)
        return Status.success()


class InTreeLimitsOracle:
    def __init__(self, volumes: VolumeObjects, kind: limits_intree.Kind) -> None:
        self.volumes = volumes
        self.kind = kind
        self.name = kind.name

    def _ids(self, ns: str, vols: list[Mapping[str, Any]], into: set[str]) -> bool:
        try:
            limits_intree.filter_volumes(self.kind, self.volumes, [(ns, v) for v in vols], into)
        except limits.NoClaimNameError:
            return False
        return True

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> Status:
        if not _vols(pod):
            return Status.success()
        no_name = Status.error("PersistentVolumeClaim had no name", plugin=self.name)
        new: set[str] = set()
        if not self._ids(_ns(pod), _vols(pod), new):
            return no_name
        if not new:
            return Status.success()
        info = snapshot.infos[i]
        existing: set[str] = set()
        for p in info.pods.values():
            if not self._ids(_ns(p.pod), _vols(p.pod), existing):
                return no_name
        limit = info.allocatable.get(self.kind.limit_key)
        if limit is None:
            env = limits_intree.max_pd_vols_from_env()
            limit = env if env > 0 else limits_intree.default_limit(self.kind, info.node)
        if len(existing) + len(new - existing) > limit:
            return Status.unschedulable(limits.ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, plugin=self.name)
        return Status.success()


def volume_oracle_for(plugin: Plugin) -> Any:
    """The oracle of a production volume filter, over the same store."""
    if isinstance(plugin, restrictions.VolumeRestrictions):
        return VolumeRestrictionsOracle()
    if isinstance(plugin, zone.VolumeZone):
        return VolumeZoneOracle(plugin.volumes)
    if isinstance(plugin, limits.NodeVolumeLimits):
        return NodeVolumeLimitsOracle(plugin.volumes)
    if isinstance(plugin, limits_intree.InTreeVolumeLimits):
        return InTreeLimitsOracle(plugin.volumes, plugin.kind)
    raise TypeError(f"no volume oracle for {plugin.name}")


class VolumeBindingOracle:
    """VolumeBinding's PreFilter and Filter as kube's volume binder reads them: claims looked up on every
    call, FindPodVolumes node by node with kube's order of checks and reasons."""

    name = "VolumeBinding"

    def __init__(self, volumes: VolumeObjects) -> None:
        self.volumes = volumes
        # per node that passed: the PVs chosen (by claim, in claim order) and the claims to provision
        self.chosen: dict[str, tuple[list[tuple[str, str]], list[str]]] = {}

    def _claims(self, pod: Pod) -> list[Mapping[str, Any]] | Status:
        out = []
        for v in _vols(pod):
            src = v.get("persistentVolumeClaim")
            if not isinstance(src, Mapping):
                continue
            name = str(src.get("claimName") or "")
            c = self.volumes.pvc(_ns(pod), name)
            if c is None:
                return Status.unresolvable(f'persistentvolumeclaim "{name}" not found', plugin=self.name)
            if _map(c.get("metadata")).get("deletionTimestamp") is not None:
                return Status.unresolvable(
                    f'persistentvolumeclaim "{name}" is being deleted', plugin=self.name
                )
            out.append(c)
        return out

    @staticmethod
    def _bound(c: Mapping[str, Any]) -> bool:
        ann = _map(_map(c.get("metadata")).get("annotations"))
        return bool(_map(c.get("spec")).get("volumeName")) and "pv.kubernetes.io/bind-completed" in ann

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        claims = self._claims(pod)
        if isinstance(claims, Status):
            return claims
        immediate = False
        for c in claims:
            if self._bound(c):
                continue
            cls = pvc_class(c)
            sc = self.volumes.storage_class(cls) if cls else None
            if sc is not None and not isinstance(sc.get("volumeBindingMode"), str):
                return Status.error(f'VolumeBindingMode not set for StorageClass "{cls}"', plugin=self.name)
            delay = sc is not None and sc.get("volumeBindingMode") == "WaitForFirstConsumer"
            if not (delay and not _map(c.get("spec")).get("volumeName")):
                immediate = True
        if immediate:
            return Status.unresolvable("pod has unbound immediate PersistentVolumeClaims", plugin=self.name)
        return Status.success()

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> Status:
        claims = self._claims(pod)
        assert not isinstance(claims, Status)
        info = snapshot.infos[i]
        labels = {str(k): str(v) for k, v in _map(_map(info.node.get("metadata")).get("labels")).items()}
        bound_ok = unbound_ok = pv_ok = True
        for c in (c for c in claims if self._bound(c)):
            pv = self.volumes.pv(str(_map(c.get("spec")).get("volumeName")))
            if pv is None:
                pv_ok = False
                break
            if not matching.terms_match(matching.pv_node_affinity_terms(pv), labels):
                bound_ok = False
                break
        to_bind = sorted(
            (c for c in claims if not self._bound(c)),
            key=lambda c: matching.storage_of(c, "requests").as_fraction(),
        )
        provision: list[Mapping[str, Any]] = []
        find: list[Mapping[str, Any]] = []
        static: list[tuple[str, str]] = []
        for c in to_bind:
            ann = _map(_map(c.get("metadata")).get("annotations"))
            if "volume.kubernetes.io/selected-node" in ann:
                if ann["volume.kubernetes.io/selected-node"] != info.name:
                    unbound_ok = False
                    break
                provision.append(c)
            else:
                find.append(c)
        else:
            chosen: set[str] = set()
            for c in find:
                try:
                    selector = matching.claim_selector(c)
                except LabelSelectorError as e:
                    meta = _map(c.get("metadata"))
                    key = f"{meta.get('namespace')}/{meta.get('name')}"
                    return Status.error(
                        f"error creating internal label selector for claim: {key}: {e}", plugin=self.name
                    )
                pvs = [matching.CompiledPV(p) for p in self.volumes.pvs_of_class(pvc_class(c))]
                found = matching.find_matching_volume(c, pvs, labels, chosen, selector)
                if found is None:
                    provision.append(c)
                    unbound_ok = False
                else:
                    chosen.add(found.name)
                    static.append((found.name, str(_map(c.get("metadata")).get("name"))))
            if provision:
                unbound_ok = True
                for c in provision:
                    cls = pvc_class(c)
                    if not cls:
                        meta = _map(c.get("metadata"))
                        return Status.error(
                            f'no class for claim "{meta.get("namespace")}/{meta.get("name")}"',
                            plugin=self.name,
                        )
                    sc = self.volumes.storage_class(cls)
                    if sc is None:
                        return Status.error(f'failed to find storage class "{cls}"', plugin=self.name)
                    prov = str(sc.get("provisioner") or "")
                    if prov in ("", "kubernetes.io/no-provisioner") or not matching.topologies_match(
                        matching.compile_topologies(sc), labels
                    ):
                        unbound_ok = False
                        break
        reasons = []
        if not bound_ok:
            reasons.append("node(s) had volume node affinity conflict")
        if not unbound_ok:
            reasons.append("node(s) didn't find available persistent volumes to bind")
        if not pv_ok:
            reasons.append("pvc(s) bound to non-existent pv(s)")
        if reasons:
            return Status.unresolvable(*reasons, plugin=self.name)
        self.chosen[info.name] = (static, [str(_map(c.get("metadata")).get("name")) for c in provision])
        return Status.success()
