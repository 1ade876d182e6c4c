"""VolumeZone filter as kube-scheduler v1.20.2 (docs/rules/scheduler-volumes.md#volumezone): for a node
carrying any of the zone/region labels (``failure-domain.beta.kubernetes.io/{zone,region}``,
``topology.kubernetes.io/{zone,region}``), each PVC volume of the pod whose claim is bound must have
its PV's zone/region labels (a ``__``-separated set) contain the node's value of that label (absent:
""); a mismatch is UNSCHEDULABLE_AND_UNRESOLVABLE ``node(s) had no available volume zone``. Unbound
claims of a WaitForFirstConsumer class are skipped; lookup failures are ERROR statuses with kube's
messages, on the nodes with zone labels only, in the order of the pod's volumes.

Vectorised: the pod's volumes resolve once per cycle into steps (label checks or an error); each step
is one mask over per-label value codes of the rows (a snapshot view shared with VolumeBinding).
Imports: numpy, scheduler.framework, scheduler.plugins.volume (common, matching, binding_filter).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterResult, Pod
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.framework.volumes import VolumeObjects, pvc_class
from scheduler.plugins.volume.binding_filter import label_index
from scheduler.plugins.volume.common import claim_name, labels_of, not_found, pod_namespace, pod_volumes
from scheduler.plugins.volume.matching import IN, Req

NAME: Final = "VolumeZone"
ERR_REASON_CONFLICT: Final = "node(s) had no available volume zone"
ZONE_LABELS: Final = (
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
)
WAIT_FOR_FIRST_CONSUMER: Final = "WaitForFirstConsumer"


def label_zones_to_set(value: str) -> frozenset[str] | None:
    """volumehelpers.LabelZonesToSet: split on ``__``, trimmed; None when an element is empty."""
    zones = [z.strip() for z in value.split("__")]
    return None if any(not z for z in zones) else frozenset(zones)


@dataclass(frozen=True, slots=True)
class Step:
    """One PV's constraints (label -> allowed node values), or an error status."""

    checks: tuple[tuple[str, frozenset[str]], ...] = ()
    error: Status | None = None


def zone_steps(volumes: VolumeObjects, pod: Pod) -> list[Step]:
    """The pod's volumes resolved in order; resolution stops at the first error, as Filter returns."""
    steps: list[Step] = []
    ns = pod_namespace(pod)
    for vol in pod_volumes(pod):
        name = claim_name(vol)
        if name is None:
            continue
        err = _resolve(volumes, ns, name, steps)
        if err is not None:
            steps.append(Step(error=Status.error(err, plugin=NAME)))
            break
    return steps


def _resolve(volumes: VolumeObjects, ns: str, name: str, steps: list[Step]) -> str | None:
    if not name:
        return "PersistentVolumeClaim had no name"
    pvc = volumes.pvc(ns, name)
    if pvc is None:
        return not_found("persistentvolumeclaim", name)
    pv_name = str(_spec(pvc).get("volumeName") or "")
    if not pv_name:
        sc_name = pvc_class(pvc)
        if not sc_name:
            return "PersistentVolumeClaim had no pv name and storageClass name"
        sc = volumes.storage_class(sc_name)
        if sc is None:
            return f'StorageClass "{sc_name}" claimed by PersistentVolumeClaim "{name}" not found'
        mode = sc.get("volumeBindingMode")
        if not isinstance(mode, str):
            return f'VolumeBindingMode not set for StorageClass "{sc_name}"'
        return None if mode == WAIT_FOR_FIRST_CONSUMER else "PersistentVolume had no name"
    pv = volumes.pv(pv_name)
    if pv is None:
        return not_found("persistentvolume", pv_name)
    checks = []
    for k, v in labels_of(pv).items():
        if k in ZONE_LABELS:
            zones = label_zones_to_set(v)
            if zones is not None:  # an unparsable label is ignored, as kube logs and skips it
                checks.append((k, zones))
    steps.append(Step(tuple(checks)))
    return None


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


class VolumeZone:
    """Filter plugin; see the module docstring."""

    def __init__(self, volumes: VolumeObjects) -> None:
        self.volumes = volumes
        self._conflict = Status.unresolvable(ERR_REASON_CONFLICT, plugin=NAME)

    @property
    def name(self) -> str:
        return NAME

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        steps = zone_steps(self.volumes, pod) if pod_volumes(pod) else []
        if not steps:
            return FilterResult.all_pass(snapshot.n)
        index = {k: label_index(snapshot, k) for k in ZONE_LABELS}
        undecided = np.logical_or.reduce([ix.codes >= 0 for ix in index.values()])
        which = np.full(snapshot.n, -1, np.int32)
        statuses: list[Status] = []
        for step in steps:
            if step.error is not None:
                if undecided.any():
                    which[undecided] = len(statuses)
                    statuses.append(step.error)
                break
            for key, zones in step.checks:
                fits = index[key].mask(Req(key, IN, zones))
                if "" in zones:  # a node without the label reads as ""
                    fits |= index[key].codes < 0
                failed = undecided & ~fits
                if failed.any():
                    if self._conflict not in statuses:
                        statuses.append(self._conflict)
                    which[failed] = statuses.index(self._conflict)
                    undecided &= ~failed
        if not statuses:
            return FilterResult.all_pass(snapshot.n)
        return FilterResult(which, tuple(statuses))
