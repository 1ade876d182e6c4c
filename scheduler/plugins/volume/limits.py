"""NodeVolumeLimits (CSI) filter as kube-scheduler v1.20.2 (docs/rules/scheduler-volumes.md#nodevolumelimits):
the pod's PVC volumes resolve to CSI volumes (driver, handle): a bound claim through its PV's
``spec.csi``, an unbound one (or one whose PV is missing) through its StorageClass' provisioner with a
per-claim handle. Each driver's limit key ``attachable-volumes-csi-<driver>`` (hashed past 63
characters) is limited by the node's allocatable of that key, overridden by the CSINode's
``drivers[].allocatable.count``; the unique volumes of the node's pods plus the pod's new ones over a
limit is UNSCHEDULABLE ``node(s) exceed max volume count``. In-tree volumes are not counted here: kube
1.20.2 counts them as CSI only under CSI migration, whose per-plugin feature gates are off by default
(docs/rules/scheduler-volumes.md#csi-migration).

Vectorised: a pod without new CSI volumes passes every row at once; otherwise each limit key is one
array over the rows, and only rows whose pods have volumes are resolved against the store.
Imports: hashlib, numpy, scheduler.framework, scheduler.plugins.volume.common.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterResult, Pod
from scheduler.framework.rows import RowChange
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.framework.volumes import CSI_NODE, PV, PVC, STORAGE_CLASS, VolumeObjects, pvc_class
from scheduler.plugins.volume.common import as_list, claim_name, pod_namespace, pod_volumes, pod_volumes_view

NAME: Final = "NodeVolumeLimits"
ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED: Final = "node(s) exceed max volume count"
ERR_NO_CLAIM_NAME: Final = "PersistentVolumeClaim had no name"
ATTACHABLE_PREFIX: Final = "attachable-volumes-"
CSI_ATTACH_LIMIT_PREFIX: Final = "attachable-volumes-csi-"
RESOURCE_NAME_LENGTH_LIMIT: Final = 63
# csi-translation-lib's in-tree plugins: their provisioners count as CSI only under migration.
MIGRATABLE_PROVISIONERS: Final = frozenset(
    {
        "kubernetes.io/gce-pd",
        "kubernetes.io/aws-ebs",
        "kubernetes.io/cinder",
        "kubernetes.io/azure-disk",
        "kubernetes.io/azure-file",
        "kubernetes.io/vsphere-volume",
    }
)


class NoClaimNameError(Exception):
    """A PVC volume without a claim name: Filter's ERROR."""


def volume_claim(
    volumes: VolumeObjects, ns: str, vol: Mapping[str, Any]
) -> tuple[str, Mapping[str, Any]] | None:
    """The claim a pod volume names and its PVC, as both limit filters look it up: None for a volume that
    is not a claim or a claim not found; NoClaimNameError for a claim without a name."""
    name = claim_name(vol)
    if name is None:
        return None
    if not name:
        raise NoClaimNameError
    pvc = volumes.pvc(ns, name)
    return None if pvc is None else (name, pvc)


def csi_attach_limit_key(driver: str) -> str:
    """volumeutil.GetCSIAttachLimitKey."""
    if len(CSI_ATTACH_LIMIT_PREFIX) + len(driver) >= RESOURCE_NAME_LENGTH_LIMIT:
        return CSI_ATTACH_LIMIT_PREFIX + driver[:23] + hashlib.sha1(driver.encode()).hexdigest()[:16]
    return CSI_ATTACH_LIMIT_PREFIX + driver


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def csi_driver_info(volumes: VolumeObjects, pvc: Mapping[str, Any], ns: str, name: str) -> tuple[str, str]:
    """(driver, volume handle) of a claim, ("", "") when it does not count."""
    pv_name = str(_spec(pvc).get("volumeName") or "")
    pv = volumes.pv(pv_name) if pv_name else None
    if pv is not None:
        csi = _spec(pv).get("csi")
        if not isinstance(csi, Mapping):
            return "", ""  # an in-tree PV: CSI migration off
        return str(csi.get("driver") or ""), str(csi.get("volumeHandle") or "")
    sc_name = pvc_class(pvc)
    sc = volumes.storage_class(sc_name) if sc_name else None
    if sc is None:
        return "", ""
    provisioner = str(sc.get("provisioner") or "")
    if provisioner in MIGRATABLE_PROVISIONERS:
        return "", ""
    # kube prefixes a random string per plugin instance; any fixed prefix keeps claims distinct.
    return provisioner, f"\x00claim-{ns}/{name}"


def csi_volumes(
    volumes: VolumeObjects, pairs: list[tuple[str, Mapping[str, Any]]], into: dict[str, str]
) -> None:
    """filterAttachableVolumes over (namespace, volume) pairs: unique name -> limit key."""
    for ns, vol in pairs:
        found = volume_claim(volumes, ns, vol)
        if found is None:
            continue
        name, pvc = found
        driver, handle = csi_driver_info(volumes, pvc, ns, name)
        if driver and handle:
            into[f"{driver}/{handle}"] = csi_attach_limit_key(driver)


def node_volume_limits(
    node: Mapping[str, Any], allocatable: Mapping[str, int], csi_node: Mapping[str, Any] | None
) -> dict[str, int]:
    """getVolumeLimits: the node's attachable-volumes-* allocatable, then the CSINode's driver counts."""
    limits = {k: v for k, v in allocatable.items() if k.startswith(ATTACHABLE_PREFIX)}
    for d in as_list(_spec(csi_node).get("drivers")) if csi_node is not None else []:
        if not isinstance(d, Mapping):
            continue
        count = d.get("allocatable", {}).get("count") if isinstance(d.get("allocatable"), Mapping) else None
        if isinstance(count, int) and not isinstance(count, bool):
            limits[csi_attach_limit_key(str(d.get("name") or ""))] = count
    return limits


class _LimitsView:
    """Per row the node's volume limits (allocatable ``attachable-volumes-*`` overridden by its CSINode),
    and per limit key asked for so far one array over the rows (-1: no limit). Rows are re-derived
    when their Node object changes, everything when a CSINode changes."""

    reads_pods = False

    def __init__(self, volumes: VolumeObjects) -> None:
        self.volumes = volumes
        self.csi_version = -1
        self.rows: list[dict[str, int]] = []
        self.has_limits = np.zeros(0, np.bool_)
        self.arrays: dict[str, npt.NDArray[np.int64]] = {}

    def _row(self, snapshot: Snapshot, i: int, csi_nodes: Mapping[str, Any]) -> None:
        info = snapshot.infos[i]
        self.rows[i] = node_volume_limits(info.node, info.allocatable, csi_nodes.get(info.name))
        self.has_limits[i] = bool(self.rows[i])
        for key, arr in self.arrays.items():
            arr[i] = self.rows[i].get(key, -1)

    def rebuild(self, snapshot: Snapshot) -> None:
        self.csi_version = self.volumes.kind_versions[CSI_NODE]
        csi_nodes = self.volumes.objects(CSI_NODE)
        self.rows = [{} for _ in range(snapshot.n)]
        self.has_limits = np.zeros(snapshot.n, np.bool_)
        self.arrays = {}
        for i in range(snapshot.n):
            self._row(snapshot, i, csi_nodes)

    def refresh(self, snapshot: Snapshot, rows: Sequence[int]) -> None:
        csi_nodes = self.volumes.objects(CSI_NODE)
        for i in rows:
            self._row(snapshot, i, csi_nodes)

    def resize(self, snapshot: Snapshot, change: RowChange) -> None:
        """Rows follow nodes joining and leaving; new rows come by `refresh`."""
        change.list(self.rows)
        for i in change.added:
            self.rows[i] = {}
        self.has_limits = change.array(self.has_limits, False)
        self.arrays = {key: change.array(arr, -1) for key, arr in self.arrays.items()}

    def current(self, snapshot: Snapshot) -> _LimitsView:
        if self.csi_version != self.volumes.kind_versions[CSI_NODE]:
            self.rebuild(snapshot)
        return self

    def array(self, key: str) -> npt.NDArray[np.int64]:
        arr = self.arrays.get(key)
        if arr is None:
            arr = np.fromiter((r.get(key, -1) for r in self.rows), np.int64, len(self.rows))
            self.arrays[key] = arr
        return arr


class NodeVolumeLimits:
    """Filter plugin; see the module docstring."""

    def __init__(self, volumes: VolumeObjects) -> None:
        self.volumes = volumes
        self._exceeded = Status.unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, plugin=NAME)
        self._no_name = Status.error(ERR_NO_CLAIM_NAME, plugin=NAME)

    @property
    def name(self) -> str:
        return NAME

    def _attached(self, pairs: list[tuple[str, Mapping[str, Any]]]) -> dict[str, str] | None:
        """The unique CSI volumes of a row's pods; None when one has a claim without a name."""
        out: dict[str, str] = {}
        try:
            csi_volumes(self.volumes, pairs, out)
        except NoClaimNameError:
            return None
        return out

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        if not pod_volumes(pod):
            return FilterResult.all_pass(snapshot.n)
        new: dict[str, str] = {}
        try:
            csi_volumes(self.volumes, [(pod_namespace(pod), v) for v in pod_volumes(pod)], new)
        except NoClaimNameError:
            return FilterResult(np.zeros(snapshot.n, np.int32), (self._no_name,))
        if not new:
            return FilterResult.all_pass(snapshot.n)
        keys = sorted(set(new.values()))
        view = snapshot.view((NAME, "limits", id(self.volumes)), lambda: _LimitsView(self.volumes)).current(
            snapshot
        )
        limits = np.stack([view.array(k) for k in keys])  # -1: no limit for that key
        has_limits = view.has_limits
        new_count = np.array([sum(1 for v in new.values() if v == k) for k in keys], np.int64)
        attached = np.zeros((len(keys), snapshot.n), np.int64)
        extra = np.broadcast_to(new_count[:, None], attached.shape).copy()
        which = np.full(snapshot.n, -1, np.int32)
        pods = pod_volumes_view(snapshot)
        versions = self.volumes.kind_versions
        token = (versions[PV], versions[PVC], versions[STORAGE_CLASS])
        for i in pods.with_volumes:
            if not has_limits[i]:
                continue
            existing = pods.derive(i, NAME, token, partial(self._attached, pods.rows[i]))
            if existing is None:
                which[i] = 1
                continue
            for unique, key in existing.items():
                if key in keys:
                    attached[keys.index(key), i] += 1
                if unique in new:  # already attached: not new on this node
                    extra[keys.index(new[unique]), i] -= 1
        over = (
            has_limits & ((limits >= 0) & (extra > 0) & (attached + extra > limits)).any(axis=0) & (which < 0)
        )
        which[over] = 0
        if not (which >= 0).any():
            return FilterResult.all_pass(snapshot.n)
        return FilterResult(which, (self._exceeded, self._no_name))
