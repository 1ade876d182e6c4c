"""The in-tree volume limit filters of kube-scheduler v1.20.2
(docs/rules/scheduler-volumes.md#in-tree-limits):
EBSLimits, GCEPDLimits, AzureDiskLimits and CinderLimits. Each counts the unique volumes of its kind —
inline (``awsElasticBlockStore.volumeID``, ``gcePersistentDisk.pdName``, ``azureDisk.diskName``,
``cinder.volumeID``), a bound claim's PV of that kind, or an unbound claim (or one whose PV is missing)
whose ``spec.storageClassName`` names a class with the kind's in-tree provisioner — on the node plus
the pod's new ones; over the limit is UNSCHEDULABLE ``node(s) exceed max volume count``. The limit is
the node's allocatable ``attachable-volumes-<kind>``, else ``KUBE_MAX_PD_VOLS`` (read when the plugin is
made), else the default: EBS 25 on instance types matching ``^[cmr]5.*|t3|z1d``, else 39; GCE PD 16;
Azure Disk 16; Cinder 256. CSI migration (off by default in 1.20.2) is not modelled.

Vectorised: the counts of rows without volumes are 0 and the limits are a snapshot column, so one
comparison covers them; only rows whose pods have volumes are resolved against the store.
Imports: os, re, numpy, scheduler.framework, scheduler.plugins.volume.common.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterResult, Pod
from scheduler.framework.rows import RowChange
from scheduler.framework.snapshot import NodeInfo, Snapshot
from scheduler.framework.status import Status
from scheduler.framework.volumes import PV, PVC, STORAGE_CLASS, VolumeObjects
from scheduler.plugins.volume.common import (
    labels_of,
    pod_namespace,
    pod_volumes,
    pod_volumes_view,
)
from scheduler.plugins.volume.limits import (
    ERR_NO_CLAIM_NAME,
    ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,
    NoClaimNameError,
    volume_claim,
)

KUBE_MAX_PD_VOLS: Final = "KUBE_MAX_PD_VOLS"
EBS_NITRO_LIMIT_REGEX: Final = re.compile(r"^[cmr]5.*|t3|z1d")
INSTANCE_TYPE_LABELS: Final = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")


@dataclass(frozen=True, slots=True)
class Kind:
    name: str  # the plugin's name
    source: str  # the volume source field, in pod volumes and PV specs
    ident: str  # its id field
    provisioner: str
    limit_key: str
    default_limit: int


EBS: Final = Kind(
    "EBSLimits", "awsElasticBlockStore", "volumeID", "kubernetes.io/aws-ebs", "attachable-volumes-aws-ebs", 39
)
GCE_PD: Final = Kind(
    "GCEPDLimits", "gcePersistentDisk", "pdName", "kubernetes.io/gce-pd", "attachable-volumes-gce-pd", 16
)
AZURE_DISK: Final = Kind(
    "AzureDiskLimits",
    "azureDisk",
    "diskName",
    "kubernetes.io/azure-disk",
    "attachable-volumes-azure-disk",
    16,
)
CINDER: Final = Kind(
    "CinderLimits", "cinder", "volumeID", "kubernetes.io/cinder", "attachable-volumes-cinder", 256
)


def max_pd_vols_from_env() -> int:
    """getMaxVolLimitFromEnv: a positive integer, else -1."""
    raw = os.environ.get(KUBE_MAX_PD_VOLS, "")
    try:
        value = int(raw) if re.fullmatch(r"[+-]?[0-9]+", raw) else -1
    except ValueError:
        return -1
    return value if value > 0 else -1


def default_limit(kind: Kind, node: Mapping[str, Any]) -> int:
    """The default limit of a node. Go reads the first instance-type label in map order; with both
    labels set (they agree on real nodes) the stable one is read here."""
    if kind is not EBS:
        return kind.default_limit
    labels = labels_of(node)
    instance = next((labels[k] for k in INSTANCE_TYPE_LABELS if k in labels), "")
    return 25 if EBS_NITRO_LIMIT_REGEX.search(instance) else 39


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _source_id(kind: Kind, holder: Mapping[str, Any]) -> str | None:
    src = holder.get(kind.source)
    if not isinstance(src, Mapping):
        return None
    return str(src.get(kind.ident) or "")


def filter_volumes(
    kind: Kind, volumes: VolumeObjects, pairs: list[tuple[str, Mapping[str, Any]]], into: set[str]
) -> None:
    """nonCSILimits.filterVolumes over (namespace, volume) pairs."""
    for ns, vol in pairs:
        ident = _source_id(kind, vol)
        if ident is not None:
            into.add(ident)
            continue
        found = volume_claim(volumes, ns, vol)
        if found is None:
            continue
        name, pvc = found
        claim_id = f"\x00claim-{ns}/{name}"  # kube: a random per-plugin prefix, never a real disk id
        pv_name = str(_spec(pvc).get("volumeName") or "")
        pv = volumes.pv(pv_name) if pv_name else None
        if pv is None:
            sc_name = _spec(pvc).get("storageClassName")
            sc = volumes.storage_class(sc_name) if isinstance(sc_name, str) else None
            if sc is not None and sc.get("provisioner") == kind.provisioner:
                into.add(claim_id)
            continue
        ident = _source_id(kind, _spec(pv))
        if ident is not None:
            into.add(ident)


class InTreeVolumeLimits:
    """Filter plugin of one in-tree kind; see the module docstring."""

    def __init__(self, volumes: VolumeObjects, kind: Kind) -> None:
        self.volumes = volumes
        self.kind = kind
        self.env_limit = max_pd_vols_from_env()
        self._exceeded = Status.unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, plugin=kind.name)
        self._no_name = Status.error(ERR_NO_CLAIM_NAME, plugin=kind.name)

    @property
    def name(self) -> str:
        return self.kind.name

    def limit(self, info: NodeInfo) -> int:
        found = info.allocatable.get(self.kind.limit_key)
        if found is not None:
            return found
        return self.env_limit if self.env_limit > 0 else default_limit(self.kind, info.node)

    def _existing(self, pairs: list[tuple[str, Mapping[str, Any]]]) -> frozenset[str] | None:
        """The unique volumes of the kind of a row's pods; None when one has a claim without a name."""
        out: set[str] = set()
        try:
            filter_volumes(self.kind, self.volumes, pairs, out)
        except NoClaimNameError:
            return None
        return frozenset(out)

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        if not pod_volumes(pod):
            return FilterResult.all_pass(snapshot.n)
        new: set[str] = set()
        try:
            filter_volumes(self.kind, self.volumes, [(pod_namespace(pod), v) for v in pod_volumes(pod)], new)
        except NoClaimNameError:
            return FilterResult(np.zeros(snapshot.n, np.int32), (self._no_name,))
        if not new:
            return FilterResult.all_pass(snapshot.n)
        limits = snapshot.view((self.kind.name, self.env_limit), lambda: _LimitColumn(self)).values
        total = np.full(snapshot.n, len(new), np.int64)
        which = np.full(snapshot.n, -1, np.int32)
        view = pod_volumes_view(snapshot)
        versions = self.volumes.kind_versions
        token = (versions[PV], versions[PVC], versions[STORAGE_CLASS])
        for i in view.with_volumes:
            existing = view.derive(i, self.kind.name, token, partial(self._existing, view.rows[i]))
            if existing is None:
                which[i] = 1
                continue
            total[i] = len(existing | new)
        which[(total > limits) & (which < 0)] = 0
        if not (which >= 0).any():
            return FilterResult.all_pass(snapshot.n)
        return FilterResult(which, (self._exceeded, self._no_name))


class _LimitColumn:
    """Each row's limit (allocatable, environment or default)."""

    reads_pods = False

    def __init__(self, plugin: InTreeVolumeLimits) -> None:
        self.plugin = plugin
        self.values = np.zeros(0, np.int64)

    def rebuild(self, snapshot: Snapshot) -> None:
        self.values = np.fromiter((self.plugin.limit(info) for info in snapshot.infos), np.int64, snapshot.n)

    def refresh(self, snapshot: Snapshot, rows: Any) -> None:
        for i in rows:
            self.values[i] = self.plugin.limit(snapshot.infos[i])

    def resize(self, snapshot: Snapshot, change: RowChange) -> None:
        self.values = change.array(self.values, 0)


class EBSLimits(InTreeVolumeLimits):
    def __init__(self, volumes: VolumeObjects) -> None:
        super().__init__(volumes, EBS)


class GCEPDLimits(InTreeVolumeLimits):
    def __init__(self, volumes: VolumeObjects) -> None:
        super().__init__(volumes, GCE_PD)


class AzureDiskLimits(InTreeVolumeLimits):
    def __init__(self, volumes: VolumeObjects) -> None:
        super().__init__(volumes, AZURE_DISK)


class CinderLimits(InTreeVolumeLimits):
    def __init__(self, volumes: VolumeObjects) -> None:
        super().__init__(volumes, CINDER)
