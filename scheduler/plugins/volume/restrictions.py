"""VolumeRestrictions filter as kube-scheduler v1.20.2 (docs/rules/scheduler-volumes.md#volumerestrictions):
a pod's GCE PD, AWS EBS, iSCSI or RBD volume conflicts with the same disk used by a pod already on
the node — GCE PD: same ``pdName`` unless both read-only; EBS: same ``volumeID``; iSCSI: same ``iqn``
unless both read-only; RBD: a shared monitor, same pool and image, unless both read-only. A conflict
is UNSCHEDULABLE with ``node(s) had no available disk``.

Vectorised: a pod without such volumes passes every row at once; otherwise only the rows whose pods
have volumes (a snapshot view) are examined.
Imports: numpy, apis.jsonfields, scheduler.framework, scheduler.plugins.volume.common.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import numpy as np

from apis.jsonfields import as_mapping
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterResult, Pod
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.volume.common import as_list, pod_volumes, pod_volumes_view

NAME: Final = "VolumeRestrictions"
ERR_REASON_DISK_CONFLICT: Final = "node(s) had no available disk"
_DISKS: Final = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi")


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _ro(src: Mapping[str, Any]) -> bool:
    return src.get("readOnly") is True


def is_volume_conflict(volume: Mapping[str, Any], existing: Mapping[str, Any]) -> bool:
    """Whether `volume` (of the incoming pod) conflicts with `existing` (a volume of a pod on the node)."""
    for kind, ident in (("gcePersistentDisk", "pdName"), ("iscsi", "iqn")):
        a, b = volume.get(kind), existing.get(kind)
        if (
            isinstance(a, Mapping)
            and isinstance(b, Mapping)
            and _str(a.get(ident)) == _str(b.get(ident))
            and not (_ro(a) and _ro(b))
        ):
            return True
    a, b = volume.get("awsElasticBlockStore"), existing.get("awsElasticBlockStore")
    if (
        isinstance(a, Mapping)
        and isinstance(b, Mapping)
        and _str(a.get("volumeID")) == _str(b.get("volumeID"))
    ):
        return True
    a, b = volume.get("rbd"), existing.get("rbd")
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        shared = {_str(m) for m in as_list(a.get("monitors"))} & {_str(m) for m in as_list(b.get("monitors"))}
        same = _str(a.get("pool")) == _str(b.get("pool")) and _str(a.get("image")) == _str(b.get("image"))
        if shared and same and not (_ro(a) and _ro(b)):
            return True
    return False


def disk_volumes(pod: Pod) -> list[Mapping[str, Any]]:
    """The pod's volumes that can conflict."""
    return [v for v in pod_volumes(pod) if any(isinstance(v.get(k), Mapping) for k in _DISKS)]


class VolumeRestrictions:
    """Filter plugin; see the module docstring."""

    def __init__(self) -> None:
        self._status = Status.unschedulable(ERR_REASON_DISK_CONFLICT, plugin=NAME)

    @property
    def name(self) -> str:
        return NAME

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        disks = disk_volumes(pod)
        if not disks:
            return FilterResult.all_pass(snapshot.n)
        view = pod_volumes_view(snapshot)
        failed = np.zeros(snapshot.n, np.bool_)
        for i in view.with_volumes:
            existing = [as_mapping(v) for _, v in view.rows[i]]
            failed[i] = any(is_volume_conflict(v, e) for v in disks for e in existing)
        return FilterResult.from_mask(failed, self._status)
