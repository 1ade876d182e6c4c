"""VolumeBinding as kube-scheduler v1.20.2 (docs/rules/scheduler-volumes.md#volumebinding): PreFilter
sorts the pod's claims (bound, delayed-binding, immediate), Filter checks each node (bound PVs' node
affinity; for each delayed claim an available PV that fits the node, else dynamic provisioning the
StorageClass' allowedTopologies allow there), Reserve assumes the chosen bindings in VolumeObjects,
PreBind writes them through a VolumeBinderAPI and waits until the claims are bound, Unreserve reverts.
No Score.

Filter is vectorised (`filter_all`, scheduler.plugins.volume.binding_filter): a pod without claims
passes every row at once; otherwise PreFilter does the per-pod work once (claims, their PVs, each
delayed claim's candidate PVs after the checks that do not depend on the node, PV parses kept across
cycles) and Filter turns node affinity and allowedTopologies into row sets and masks.
Imports: the standard library, numpy, apis.jsonfields, apis.labelselector, scheduler.framework,
scheduler.plugins.volume.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Self

import numpy as np
import numpy.typing as npt

from apis.jsonfields import as_mapping
from apis.labelselector import LabelSelectorError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import ClusterEvent, FilterResult, Pod
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.framework.volumes import PV, PVC, VolumeObjects, pvc_class
from scheduler.plugins.volume.binderapi import VolumeBinderAPI
from scheduler.plugins.volume.binding_bind import (
    ANN_SELECTED_NODE,
    BindSettings,
    PodVolumes,
    bind_pod_volumes,
    bind_volume_to_claim,
    claim_key,
)
from scheduler.plugins.volume.binding_filter import best_candidates, terms_mask, terms_rows, topology_terms
from scheduler.plugins.volume.binding_state import BindingState, Claim, annotations_of, is_fully_bound
from scheduler.plugins.volume.common import claim_name, not_found, pod_namespace, pod_volumes
from scheduler.plugins.volume.matching import (
    CompiledPV,
    claim_candidates,
    claim_selector,
    compile_topologies,
    storage_of,
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
        self._pv_cache: dict[str, CompiledPV] = {}
        # PreBind's wait for the claims sleeps and reads time through these; `koord simulate` sets
        # them to the scenario's clock (docs/simulate.md#schedule-volumes).
        self.sleep: Callable[[float], None] = time.sleep
        self.monotonic: Callable[[], float] = time.monotonic

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
            if c.selected_node is None and not c.selector_error:
                cls = pvc_class(c.pvc)
                if cls not in s.candidates:
                    s.candidates[cls] = self._compiled(cls)
                c.bound_pv, c.candidates = claim_candidates(c.pvc, s.candidates[cls], c.selector)
        return s

    def _compiled(self, cls: str) -> list[CompiledPV]:
        """The class' PVs parsed, reusing the parse of every PV object seen before."""
        out = []
        for pv in self.volumes.pvs_of_class(cls):
            name = str(as_mapping(pv.get("metadata")).get("name") or "")
            c = self._pv_cache.get(name)
            if c is None or c.pv is not pv:
                c = self._pv_cache[name] = CompiledPV(pv)
            out.append(c)
        if len(self._pv_cache) > 2 * len(self.volumes.objects(PV)) + 64:  # PVs gone: drop their parses
            self._pv_cache.clear()
        return out

    @staticmethod
    def _claim(pvc: Mapping[str, Any]) -> Claim:
        ann = annotations_of(pvc)
        selected = str(ann[ANN_SELECTED_NODE]) if ANN_SELECTED_NODE in ann else None
        c = Claim(pvc, selected)
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
        return self._filter_rows(s, snapshot)

    def _filter_rows(self, s: BindingState, snapshot: Snapshot) -> FilterResult:
        """FindPodVolumes on every row, as masks (docs/rules/scheduler-volumes.md#volumebinding)."""
        n = snapshot.n
        errors: dict[Status, int] = {}
        error = np.full(n, -1, np.int32)
        bound_fail, pv_missing, und = np.zeros(n, np.bool_), np.zeros(n, np.bool_), np.ones(n, np.bool_)
        for _, pv in s.bound:
            if pv is None:
                pv_missing |= und
                break
            m = terms_mask(snapshot, pv.terms)
            bound_fail |= und & ~m
            und &= m
        active = np.ones(n, np.bool_)  # rows still fitting the delayed claims
        for c in s.to_bind:
            if c.selected_node is not None:
                keep = np.zeros(n, np.bool_)
                if (row := snapshot.index.get(c.selected_node)) is not None:
                    keep[row] = True
                active &= keep
        unbound_fail = ~active
        to_match = [c for c in s.to_bind if c.selected_node is None]
        first_error = next((c.selector_error for c in to_match if c.selector_error), "")
        s.best, s.pv_by_id = [], []
        if first_error:
            error[active] = errors.setdefault(Status.error(first_error, plugin=NAME), len(errors))
            active[:] = False
        taken: list[npt.NDArray[np.int64]] = []
        in_list: list[tuple[Claim, npt.NDArray[np.bool_]]] = [
            (c, active) for c in s.to_bind if c.selected_node
        ]
        id_of: dict[str, int] = {}  # one id per PV, so that a PV one claim took is excluded for the next
        for c in to_match if not first_error else []:
            cands = [c.bound_pv] if c.bound_pv is not None else c.candidates
            for p in cands:
                if p.name not in id_of:
                    id_of[p.name] = len(s.pv_by_id)
                    s.pv_by_id.append(p)
            ids = [id_of[p.name] for p in cands]
            best = best_candidates(snapshot, [terms_rows(snapshot, p.terms) for p in cands], taken, ids)
            chosen = np.where(best >= 0, np.asarray(ids, np.int64)[np.maximum(best, 0)] if ids else -1, -1)
            taken.append(chosen)
            s.best.append((c.pvc, chosen))
            in_list.append((c, active & (chosen < 0)))
        prov = active.copy()  # rows whose provisioning checks have not failed yet
        for c, listed in in_list:
            here = prov & listed
            if not here.any():
                continue
            cls = pvc_class(c.pvc)
            sc = self.volumes.storage_class(cls) if cls else None
            if sc is None:
                msg = (
                    f'no class for claim "{claim_key(c.pvc)}"'
                    if not cls
                    else f'failed to find storage class "{cls}"'
                )
                error[here] = errors.setdefault(Status.error(msg, plugin=NAME), len(errors))
                prov &= ~here
                continue
            if str(sc.get("provisioner") or "") in ("", NOT_SUPPORTED_PROVISIONER):
                fail = here
            else:
                fail = here & ~terms_mask(snapshot, topology_terms(compile_topologies(sc)))
            unbound_fail |= fail
            prov &= ~fail
        s.row_of = snapshot.index
        code = bound_fail.astype(np.int32) + 2 * unbound_fail + 4 * pv_missing
        s.passed = (code == 0) & (error < 0)
        which = np.full(n, -1, np.int32)
        statuses = list(errors)
        which[error >= 0] = error[error >= 0]
        for k in np.unique(code[(code > 0) & (error < 0)]).tolist():
            reasons = [
                r
                for bit, r in (
                    (1, ERR_REASON_NODE_CONFLICT),
                    (2, ERR_REASON_BIND_CONFLICT),
                    (4, ERR_REASON_PV_NOT_EXIST),
                )
                if k & bit
            ]
            which[(code == k) & (error < 0)] = len(statuses)
            statuses.append(Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, tuple(reasons), NAME))
        return FilterResult(which, tuple(statuses)) if statuses else FilterResult.all_pass(n)

    def chosen_volumes(self, state: CycleState, node: str) -> PodVolumes | None:
        """The PV bindings and provisionings Filter chose for `node`, None when it did not pass."""
        s = state.get(STATE_KEY)
        return self._pod_volumes(s, node) if isinstance(s, BindingState) else None

    def _pod_volumes(self, s: BindingState, node: str) -> PodVolumes | None:
        """The PodVolumes Filter found for a node, None when it did not pass there."""
        if node in s.by_node:
            return s.by_node[node]
        row = s.row_of.get(node)
        if row is None or s.passed is None or not s.passed[row]:
            return None
        volumes = PodVolumes()
        volumes.dynamic_provisions = [c.pvc for c in s.to_bind if c.selected_node is not None]
        for pvc, chosen in s.best:
            if chosen[row] >= 0:
                volumes.static_bindings.append((s.pv_by_id[int(chosen[row])].pv, pvc))
            else:
                volumes.dynamic_provisions.append(pvc)
        s.by_node[node] = volumes
        return volumes

    # --- Reserve / Unreserve ------------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        s = state.get(STATE_KEY)
        if not isinstance(s, BindingState):
            return Status.error(f'error reading "{STATE_KEY}" from cycleState: not found', plugin=NAME)
        volumes = self._pod_volumes(s, node_name)
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
                meta["annotations"] = {**annotations_of(pvc), ANN_SELECTED_NODE: node}
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
        err = bind_pod_volumes(
            self.api, node_name, volumes, self.settings, self._revert, self.sleep, self.monotonic
        )
        return Status.success() if err is None else Status.error(err, plugin=NAME)
