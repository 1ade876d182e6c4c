"""VolumeBinding as kube-scheduler v1.20.2 (docs/rules/scheduler-volumes.md#volumebinding): PreFilter
sorts the pod's claims (bound, delayed-binding, immediate), Filter checks each node (bound PVs' node
affinity; for each delayed claim an available PV that fits the node, else dynamic provisioning the
StorageClass' allowedTopologies allow there), Reserve assumes the chosen bindings in VolumeObjects,
PreBind writes them through a VolumeBinderAPI and waits until the claims are bound, Unreserve reverts.
No Score.

Filter is vectorised in form (`filter_all`): a pod without claims passes every row at once; otherwise
the per-pod work (claims, their PVs, the candidate PVs of each class with their node affinity parsed)
is done once in PreFilter and each row costs the checks against its labels only.
Imports: the standard library, numpy, apis.jsonfields, apis.labelselector, scheduler.framework,
scheduler.plugins.volume.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Self

import numpy as np

from apis.jsonfields import as_mapping
from apis.labelselector import LabelSelector, LabelSelectorError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import ClusterEvent, FilterResult, Pod
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.framework.volumes import PV, PVC, VolumeObjects, pvc_class
from scheduler.plugins.volume.binderapi import VolumeBinderAPI
from scheduler.plugins.volume.binding_bind import (
    ANN_BIND_COMPLETED,
    ANN_SELECTED_NODE,
    BindSettings,
    PodVolumes,
    bind_pod_volumes,
    bind_volume_to_claim,
    claim_key,
)
from scheduler.plugins.volume.common import claim_name, labels_of, not_found, pod_namespace, pod_volumes
from scheduler.plugins.volume.matching import (
    CompiledPV,
    claim_selector,
    compile_topologies,
    find_matching_volume,
    storage_of,
    terms_match,
    topologies_match,
)

NAME: Final = "VolumeBinding"
STATE_KEY: Final = "PreFilter" + NAME
DEFAULT_BIND_TIMEOUT_SECONDS: Final = 600
ERR_REASON_UNBOUND_IMMEDIATE: Final = "pod has unbound immediate PersistentVolumeClaims"
ERR_REASON_BIND_CONFLICT: Final = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NODE_CONFLICT: Final = "node(s) had volume node affinity conflict"
ERR_REASON_NOT_ENOUGH_SPACE: Final = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST: Final = "pvc(s) bound to non-existent pv(s)"
NOT_SUPPORTED_PROVISIONER: Final = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER: Final = "WaitForFirstConsumer"


class _CycleError(Exception):
    """An error status of the cycle (kube's `err`)."""


class _UnresolvableError(Exception):
    """PreFilter's UNSCHEDULABLE_AND_UNRESOLVABLE."""


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_mapping(as_mapping(obj.get("metadata")).get("annotations"))


def is_fully_bound(pvc: Mapping[str, Any]) -> bool:
    """isPVCFullyBound: a volume name and the bind-completed annotation."""
    return bool(as_mapping(pvc.get("spec")).get("volumeName")) and ANN_BIND_COMPLETED in _annotations(pvc)


@dataclass
class _Claim:
    """A delayed-binding claim with what matching needs."""

    pvc: Mapping[str, Any]
    selected_node: str | None
    selector: LabelSelector | None = None
    selector_error: str = ""


@dataclass
class BindingState:
    """The cycle's state (kube's stateData; shared by clones, as kube's Clone returns itself)."""

    skip: bool = False
    bound: list[tuple[Mapping[str, Any], CompiledPV | None]] = field(default_factory=list)
    to_bind: list[_Claim] = field(default_factory=list)
    candidates: dict[str, list[CompiledPV]] = field(default_factory=dict)
    by_node: dict[str, PodVolumes] = field(default_factory=dict)
    all_bound: bool = False

    def __copy__(self) -> BindingState:
        return self


def _is_delay_binding(volumes: VolumeObjects, pvc: Mapping[str, Any]) -> bool:
    """IsDelayBindingMode (a class that does not exist is immediate binding)."""
    name = pvc_class(pvc)
    sc = volumes.storage_class(name) if name else None
    if sc is None:
        return False
    mode = sc.get("volumeBindingMode")
    if not isinstance(mode, str):
        raise _CycleError(f'VolumeBindingMode not set for StorageClass "{name}"')
    return mode == WAIT_FOR_FIRST_CONSUMER


class VolumeBinding:
    """PreFilter, Filter, Reserve, PreBind plugin; see the module docstring."""

    def __init__(
        self,
        volumes: VolumeObjects,
        api: VolumeBinderAPI | None = None,
        *,
        bind_timeout: float = DEFAULT_BIND_TIMEOUT_SECONDS,
        poll_interval: float = 1.0,
        complete_claims: bool = False,
    ) -> None:
        if bind_timeout <= 0:
            raise ValueError(
                f"bindTimeoutSeconds={bind_timeout}: invalid BindTimeoutSeconds, must be positive integer"
            )
        self.volumes = volumes
        self.api = api
        self.settings = BindSettings(bind_timeout, poll_interval, complete_claims)

    @classmethod
    def from_args(
        cls, args: Mapping[str, Any], volumes: VolumeObjects, api: VolumeBinderAPI | None = None
    ) -> Self:
        """VolumeBindingArgs (v1beta1 and v1 spell it alike): ``bindTimeoutSeconds``, default 600, must
        be a positive integer."""
        raw = args.get("bindTimeoutSeconds")
        timeout = DEFAULT_BIND_TIMEOUT_SECONDS if raw is None else raw
        if isinstance(timeout, bool) or not isinstance(timeout, int):
            raise ValueError(f"bindTimeoutSeconds={timeout!r}: must be an integer")
        if timeout <= 0:
            raise ValueError(
                f"bindTimeoutSeconds={timeout}: invalid BindTimeoutSeconds, must be positive integer"
            )
        return cls(volumes, api, bind_timeout=float(timeout))

    @property
    def name(self) -> str:
        return NAME

    def events_to_register(self) -> list[ClusterEvent]:
        kinds = ("PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode", "Node")
        return [ClusterEvent(k, a) for k in kinds for a in ("Add", "Update")]

    # --- PreFilter ------------------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        try:
            s = self._pre_filter(pod)
        except _CycleError as e:
            return Status.error(str(e), plugin=NAME)
        except _UnresolvableError as e:
            return Status.unresolvable(str(e), plugin=NAME)
        state.write(STATE_KEY, s)
        return Status.success()

    def _pre_filter(self, pod: Pod) -> BindingState:
        ns = pod_namespace(pod)
        claims: list[Mapping[str, Any]] = []
        for vol in pod_volumes(pod):
            name = claim_name(vol)
            if name is None:
                continue  # generic ephemeral volumes are off by default in 1.20.2
            pvc = self.volumes.pvc(ns, name)
            if pvc is None:
                raise _UnresolvableError(not_found("persistentvolumeclaim", name))
            if as_mapping(pvc.get("metadata")).get("deletionTimestamp") is not None:
                raise _UnresolvableError(f'persistentvolumeclaim "{name}" is being deleted')
            claims.append(pvc)
        if not claims:
            return BindingState(skip=True)
        s = BindingState()
        immediate = False
        for pvc in claims:
            if is_fully_bound(pvc):
                pv = self.volumes.pv(str(pvc["spec"]["volumeName"]))
                s.bound.append((pvc, CompiledPV(pv) if pv is not None else None))
            elif _is_delay_binding(self.volumes, pvc) and not as_mapping(pvc.get("spec")).get("volumeName"):
                s.to_bind.append(self._claim(pvc))
            else:
                immediate = True
        if immediate:
            raise _UnresolvableError(ERR_REASON_UNBOUND_IMMEDIATE)
        # byPVCSize: smallest request first (a stable sort; Go's insertion sort is stable for few claims)
        s.to_bind.sort(key=lambda c: storage_of(c.pvc, "requests").as_fraction())
        for c in s.to_bind:
            if c.selected_node is None:
                cls = pvc_class(c.pvc)
                if cls not in s.candidates:
                    s.candidates[cls] = [CompiledPV(pv) for pv in self.volumes.pvs_of_class(cls)]
        return s

    @staticmethod
    def _claim(pvc: Mapping[str, Any]) -> _Claim:
        ann = _annotations(pvc)
        selected = str(ann[ANN_SELECTED_NODE]) if ANN_SELECTED_NODE in ann else None
        c = _Claim(pvc, selected)
        try:
            c.selector = claim_selector(pvc)
        except LabelSelectorError as e:
            c.selector_error = f"error creating internal label selector for claim: {claim_key(pvc)}: {e}"
        return c

    # --- Filter -----------------------------------------------------------------------------------------
    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        s = state.get(STATE_KEY)
        if not isinstance(s, BindingState):
            try:
                s = self._pre_filter(pod)
            except (_CycleError, _UnresolvableError):
                s = BindingState(skip=True)  # PreFilter rejected the pod; Filter is not reached
            state.write(STATE_KEY, s)
        if s.skip:
            return FilterResult.all_pass(snapshot.n)
        which = np.full(snapshot.n, -1, np.int32)
        statuses: dict[Status, int] = {}
        for i, info in enumerate(snapshot.infos):
            st = self._filter_node(s, info.name, labels_of(info.node))
            if st is not None:
                which[i] = statuses.setdefault(st, len(statuses))
        return FilterResult(which, tuple(statuses)) if statuses else FilterResult.all_pass(snapshot.n)

    def _filter_node(self, s: BindingState, node: str, labels: Mapping[str, str]) -> Status | None:
        """FindPodVolumes on one node: None when it fits (its PodVolumes kept), else its status."""
        pv_ok, bound_ok, unbound_ok = True, True, True
        volumes = PodVolumes()
        for _, pv in s.bound:
            if pv is None:
                pv_ok = False
                break
            if not terms_match(pv.terms, labels):
                bound_ok = False
                break
        if s.to_bind:
            try:
                unbound_ok = self._find_unbound(s, node, labels, volumes)
            except _CycleError as e:
                return Status.error(str(e), plugin=NAME)
        reasons = [
            r
            for r, ok in (
                (ERR_REASON_NODE_CONFLICT, bound_ok),
                (ERR_REASON_BIND_CONFLICT, unbound_ok),
                (ERR_REASON_PV_NOT_EXIST, pv_ok),
            )
            if not ok
        ]
        if reasons:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, tuple(reasons), NAME)
        s.by_node[node] = volumes
        return None

    def _find_unbound(self, s: BindingState, node: str, labels: Mapping[str, str], out: PodVolumes) -> bool:
        to_provision: list[Mapping[str, Any]] = []
        to_match: list[_Claim] = []
        for c in s.to_bind:
            if c.selected_node is not None:
                if c.selected_node != node:
                    return False
                to_provision.append(c.pvc)
            else:
                to_match.append(c)
        chosen: set[str] = set()
        for c in to_match:
            if c.selector_error:
                raise _CycleError(c.selector_error)
            found = find_matching_volume(c.pvc, s.candidates[pvc_class(c.pvc)], labels, chosen, c.selector)
            if found is None:
                to_provision.append(c.pvc)
                continue
            chosen.add(found.name)
            out.static_bindings.append((found.pv, c.pvc))
        for pvc in to_provision:  # checkVolumeProvisions
            cls = pvc_class(pvc)
            if not cls:
                raise _CycleError(f'no class for claim "{claim_key(pvc)}"')
            sc = self.volumes.storage_class(cls)
            if sc is None:
                raise _CycleError(f'failed to find storage class "{cls}"')
            provisioner = str(sc.get("provisioner") or "")
            if provisioner in ("", NOT_SUPPORTED_PROVISIONER):
                return False
            if not _topologies_match(sc, labels):
                return False
            out.dynamic_provisions.append(pvc)
        return True

    # --- Reserve / Unreserve ------------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        s = state.get(STATE_KEY)
        if not isinstance(s, BindingState):
            return Status.error(f'error reading "{STATE_KEY}" from cycleState: not found', plugin=NAME)
        volumes = s.by_node.get(node_name)
        if volumes is None:
            s.all_bound = True
            return Status.success()
        try:
            s.all_bound = self._assume(pod, node_name, volumes)
        except ValueError as e:
            return Status.error(str(e), plugin=NAME)
        return Status.success()

    def _assume(self, pod: Pod, node: str, volumes: PodVolumes) -> bool:
        """AssumePodVolumes: True when every claim of the pod is already fully bound."""
        ns = pod_namespace(pod)
        names = [n for n in (claim_name(v) for v in pod_volumes(pod)) if n is not None]
        if all((c := self.volumes.pvc(ns, n)) is not None and is_fully_bound(c) for n in names):
            return True
        bindings: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []
        provisions: list[Mapping[str, Any]] = []
        try:
            for pv, pvc in volumes.static_bindings:
                new_pv, dirty = bind_volume_to_claim(pv, pvc)
                if dirty:
                    self.volumes.assume(PV, new_pv)
                bindings.append((new_pv, pvc))
            for pvc in volumes.dynamic_provisions:
                meta = dict(as_mapping(pvc.get("metadata")))
                meta["annotations"] = {**_annotations(pvc), ANN_SELECTED_NODE: node}
                clone = {**pvc, "metadata": meta}
                self.volumes.assume(PVC, clone)
                provisions.append(clone)
        except ValueError:
            self._revert(PodVolumes(bindings, provisions))
            raise
        volumes.static_bindings, volumes.dynamic_provisions = bindings, provisions
        return False

    def _revert(self, volumes: PodVolumes) -> None:
        for pv, _ in volumes.static_bindings:
            self.volumes.restore(PV, str(as_mapping(pv.get("metadata")).get("name") or ""))
        for pvc in volumes.dynamic_provisions:
            self.volumes.restore(PVC, claim_key(pvc))

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        s = state.get(STATE_KEY)
        if isinstance(s, BindingState) and node_name in s.by_node:
            self._revert(s.by_node[node_name])

    # --- PreBind ----------------------------------------------------------------------------------------
    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        s = state.get(STATE_KEY)
        if not isinstance(s, BindingState):
            return Status.error(f'error reading "{STATE_KEY}" from cycleState: not found', plugin=NAME)
        if s.all_bound:
            return Status.success()
        volumes = s.by_node.get(node_name)
        if volumes is None:
            return Status.error(f'no pod volumes found for node "{node_name}"', plugin=NAME)
        if self.api is None:
            return Status.error("no API to bind volumes with", plugin=NAME)
        err = bind_pod_volumes(self.api, node_name, volumes, self.settings, self._revert)
        return Status.success() if err is None else Status.error(err, plugin=NAME)


def _topologies_match(sc: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    return topologies_match(compile_topologies(sc), labels)
