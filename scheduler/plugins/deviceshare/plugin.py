"""The ``DeviceShare`` scheduler plugin (docs/rules/scheduler-deviceshare.md#wiring) over a
``DeviceCache``: PreFilter normalises the pod's device requests (a pod that wants no device is skipped
and costs nothing more), Filter runs the allocator without a scorer on the nodes that have a Device
object (a node without one passes), Score rates each node's devices and normalises to 0–100, Reserve
allocates with the scorer and records the pod as assumed, Unreserve forgets it, PreBind writes the
``device-allocated`` annotation; PreFilterExtensions let preemption's one-node trials see a victim's
devices freed. Assigned pods' annotations and Device objects reach it through ``on_pod_*`` and
``on_device``.
Imports: the standard library, numpy, apis (device, kubeobjects, pod), scheduler.framework, this package.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Self

import numpy as np

from apis.device import (
    ANNOTATION_DEVICE_ALLOCATED,
    GPU,
    LABEL_GPU_MODEL,
    LABEL_GPU_VENDOR,
    DeviceAllocationEntry,
    DeviceError,
    DeviceInfo,
    format_device_allocations,
    parse_device_allocations,
)
from apis.kubeobjects import Pod
from apis.pod import is_terminated, pod_annotations, pod_key, pod_requests
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import ClusterEvent, FilterResult, IntArray
from scheduler.framework.snapshot import NodeInfo, Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.deviceshare.allocator import allocate, instance_request
from scheduler.plugins.deviceshare.cache import DeviceCache
from scheduler.plugins.deviceshare.normalize import InvalidDeviceRequestError, device_requests
from scheduler.plugins.deviceshare.requirements import gpu_requirements
from scheduler.plugins.deviceshare.scoring import (
    DEFAULT_STRATEGY,
    ScoringStrategy,
    parse_strategy,
    score_node,
)
from scheduler.plugins.normalizescore import default_normalize_score

NAME: Final = "DeviceShare"
STATE_KEY: Final = "DeviceShare/state"
log = logging.getLogger(__name__)

Allocations = dict[str, list[DeviceAllocationEntry]]


@dataclass
class _State:
    skip: bool
    requests: dict[str, dict[str, int]] = field(default_factory=dict)
    gpu_shared: bool = False
    status: Status = field(default_factory=Status.success)  # PreFilter's answer
    result: Allocations | None = None  # what Reserve allocated, for PreBind
    # node -> type -> minor -> resources given back by pods preemption takes off (#preemption)
    preemptible: dict[str, dict[str, dict[int, dict[str, int]]]] = field(default_factory=dict)

    def clone(self) -> _State:
        """kube's StateData.Clone: preemption changes a clone's preemptible devices, not ours."""
        copied = {
            node: {t: {m: dict(r) for m, r in minors.items()} for t, minors in types.items()}
            for node, types in self.preemptible.items()
        }
        return _State(self.skip, self.requests, self.gpu_shared, self.status, self.result, copied)


def _unsupported_models(raw: object) -> frozenset[tuple[str, str]]:
    if raw is None:
        return frozenset()
    if not isinstance(raw, list):
        raise ValueError(f"gpuShareUnsupportedModels={raw!r}: expected a list")
    out: set[tuple[str, str]] = set()
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or not all(
            isinstance(item.get(k), str) for k in ("vendor", "model")
        ):
            raise ValueError(f"gpuShareUnsupportedModels[{i}]={item!r}: expected {{vendor, model}} strings")
        out.add((item["vendor"], item["model"]))
    return frozenset(out)


class DeviceShare:
    """Koordinator's DeviceShare plugin; the cache is shared with the informers that feed it."""

    bind_annotations: tuple[str, ...] = (ANNOTATION_DEVICE_ALLOCATED,)  # PreBind's, for the binder

    def __init__(
        self,
        strategy: ScoringStrategy = DEFAULT_STRATEGY,
        cache: DeviceCache | None = None,
        unsupported_models: frozenset[tuple[str, str]] = frozenset(),
    ) -> None:
        self.strategy = strategy
        self.cache = cache if cache is not None else DeviceCache()
        self.unsupported_models = unsupported_models
        self.assumed: dict[str, str] = {}  # pod key -> node Reserve allocated on

    @classmethod
    def from_args(cls, args: Mapping[str, Any] | None) -> Self:
        """``DeviceShareArgs``: ``scoringStrategy`` (docs/rules/scheduler-deviceshare.md#scoring) and
        ``gpuShareUnsupportedModels``; other upstream fields are accepted and have no effect here.
        ValueError names the field and the value."""
        args = args or {}
        if not isinstance(args, Mapping):
            raise ValueError(f"args: expected an object, got {args!r}")
        return cls(
            parse_strategy(args.get("scoringStrategy")),
            unsupported_models=_unsupported_models(args.get("gpuShareUnsupportedModels")),
        )

    @property
    def name(self) -> str:
        return NAME

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent("Pod", "Delete"),
            ClusterEvent("Device", "Add"),
            ClusterEvent("Device", "Update"),
        ]

    # --- events (docs/rules/scheduler-deviceshare.md#wiring) ----------------------------------------
    def on_device(self, node_name: str, device: Mapping[str, Any] | None) -> None:
        """The node's Device object changed (None: deleted). One that does not decode is logged and
        the node keeps what it had."""
        try:
            self.cache.set_device(node_name, device)
        except DeviceError as e:
            log.warning("DeviceShare: ignoring the Device of node %s: %s", node_name, e)

    def _record(self, pod: Pod) -> None:
        key = pod_key(pod)
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if not node or is_terminated(pod):
            self._forget(key)
            return
        try:
            allocations = parse_device_allocations(pod_annotations(pod).get(ANNOTATION_DEVICE_ALLOCATED))
        except DeviceError as e:  # as upstream: logged, what was recorded stays
            log.warning("DeviceShare: pod %s: %s", key, e)
            return
        if key in self.assumed and not any(allocations.values()):
            return  # seen before its annotation: Reserve's allocation stands
        self.assumed.pop(key, None)
        self.cache.set_pod(key, node, allocations)  # replaces: an assumed pod is never counted twice

    def _forget(self, key: str) -> None:
        self.assumed.pop(key, None)
        self.cache.remove_pod(key)

    def on_pod_add(self, pod: Pod) -> None:
        self._record(pod)

    def on_pod_update(self, old: Pod, new: Pod) -> None:
        self._record(new)

    def on_pod_delete(self, pod: Pod) -> None:
        self._forget(pod_key(pod))

    # --- PreFilter / Filter -------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        st = self._compute(pod)
        state.write(STATE_KEY, st)
        return Status.skip() if st.skip and st.status.is_success() else st.status

    def _compute(self, pod: Pod) -> _State:
        try:
            requests = device_requests(pod_requests(pod))
        except InvalidDeviceRequestError as e:
            return _State(True, status=Status.unresolvable(str(e), plugin=NAME))
        if not requests:
            return _State(True)
        shared = GPU in requests and gpu_requirements(requests[GPU]).gpu_shared
        return _State(False, requests, shared)

    # --- PreFilterExtensions (docs/rules/scheduler-deviceshare.md#preemption) -------------------------
    def _move(self, state: CycleState, other: Pod, info: NodeInfo, sign: int) -> Status:
        """A pod taken off (sign 1) or put on (sign -1) the node: its devices there become preemptible
        or stop being so (values may go negative, as upstream's Subtract)."""
        st = state.get(STATE_KEY)
        entry = self.cache.pod(pod_key(other))
        if not isinstance(st, _State) or st.skip or entry is None or entry[0] != info.name:
            return Status.success()
        by_type = st.preemptible.setdefault(info.name, {})
        for dtype, entries in entry[1].items():
            minors = by_type.setdefault(dtype, {})
            for e in entries:
                values = minors.setdefault(e.minor, {})
                for n, v in e.resources.items():
                    values[n] = values.get(n, 0) + sign * v
                if all(v == 0 for v in values.values()):
                    del minors[e.minor]
            if not minors:
                del by_type[dtype]
        return Status.success()

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, info: NodeInfo) -> Status:
        return self._move(state, pod_to_add, info, -1)

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, info: NodeInfo) -> Status:
        return self._move(state, pod_to_remove, info, 1)

    def _state(self, state: CycleState, pod: Pod) -> _State:
        st = state.get(STATE_KEY)
        if not isinstance(st, _State):
            st = self._compute(pod)
            state.write(STATE_KEY, st)
        return st

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        st = self._state(state, pod)
        n = snapshot.n
        if st.skip:
            return FilterResult.all_pass(n)
        which = np.full(n, -1, np.int32)
        statuses: list[Status] = []
        seen: dict[Status, int] = {}

        def reject(row: int, status: Status) -> None:
            if status not in seen:
                seen[status] = len(statuses)
                statuses.append(status)
            which[row] = seen[status]

        if st.gpu_shared and self.unsupported_models:  # docs/rules/scheduler-deviceshare.md#filter
            for row, info in enumerate(snapshot.infos):
                labels = (info.node.get("metadata") or {}).get("labels") or {}
                vendor, model = str(labels.get(LABEL_GPU_VENDOR, "")), str(labels.get(LABEL_GPU_MODEL, ""))
                if (vendor, model) in self.unsupported_models:
                    msg = f'model "{model}" of vendor "{vendor}" does not support GPU Share'
                    reject(row, Status.unresolvable(msg, plugin=NAME))
        for name in self.cache.nodes():  # a node the cache does not know passes (quirk)
            at = snapshot.index.get(name)
            if at is None or which[at] >= 0:
                continue
            outcome = allocate(
                self.cache.totals(name), self.cache.used(name), st.requests, st.preemptible.get(name)
            )
            if not outcome.status.is_success():
                reject(at, outcome.status.with_plugin(NAME))
        return FilterResult(which, tuple(statuses)) if statuses else FilterResult.all_pass(n)

    # --- Score --------------------------------------------------------------------------------------
    def node_score(self, st: _State, node: str) -> int:
        """Σ over the requested types of the node score of the per-instance request
        (docs/rules/scheduler-deviceshare.md#scoring)."""
        totals, used = self.cache.totals(node), self.cache.used(node)
        score = 0
        for dtype, request in st.requests.items():
            total = totals.get(dtype)
            if not total:
                continue
            per, _ = instance_request(dtype, request)
            u = used.get(dtype, {})
            frees = [{n: max(v - u.get(m, {}).get(n, 0), 0) for n, v in t.items()} for m, t in total.items()]
            score += score_node(self.strategy, per, total.values(), frees)
        return score

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        st = self._state(state, pod)
        scores = np.zeros(len(feasible), np.int64)
        if st.skip:
            return scores
        for k, row in enumerate(feasible.tolist()):
            name = snapshot.names[row]
            if self.cache.has(name):
                scores[k] = self.node_score(st, name)
        return scores

    def normalize_scores(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        default_normalize_score(scores, reverse=False)  # as upstream's NormalizeScore
        return Status.success()

    # --- Reserve / Unreserve / PreBind --------------------------------------------------------------
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        st = self._state(state, pod)
        if st.skip or not self.cache.has(node_name):
            return Status.success()
        outcome = allocate(
            self.cache.totals(node_name),
            self.cache.used(node_name),
            st.requests,
            st.preemptible.get(node_name),
            self.strategy,
        )
        if outcome.allocations is None:
            return outcome.status.with_plugin(NAME)
        key = pod_key(pod)
        st.result = outcome.allocations
        self.assumed[key] = node_name
        self.cache.set_pod(key, node_name, outcome.allocations)
        return Status.success()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        key = pod_key(pod)
        if self.assumed.pop(key, None) is not None:
            self.cache.remove_pod(key)
        st = state.get(STATE_KEY)
        if isinstance(st, _State):
            st.result = None

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """The ``device-allocated`` annotation (docs/rules/scheduler-deviceshare.md#prebind), written on
        the pod object the binder patches onto the API before the Binding."""
        st = state.get(STATE_KEY)
        if not isinstance(st, _State) or not st.result:
            return Status.success()
        if not self.cache.has_device_object(node_name):  # upstream's Device lister fails the same way
            return Status.error(f'device "{node_name}" not found', plugin=NAME)
        result = with_device_ids(st.result, self.cache.devices(node_name))
        meta = pod["metadata"]
        value = format_device_allocations(result)
        # a new dict: the queue's copy of the pod shares the old one
        meta["annotations"] = {**(meta.get("annotations") or {}), ANNOTATION_DEVICE_ALLOCATED: value}
        return Status.success()


def with_device_ids(allocations: Allocations, devices: list[DeviceInfo]) -> Allocations:
    """Each allocation with the ``id`` (UUID) of the first device of its type whose minor is set and
    equal (a device without a minor never matches) (docs/rules/scheduler-deviceshare.md#prebind)."""
    out: Allocations = {}
    for dtype, entries in allocations.items():
        out[dtype] = []
        for e in entries:
            uuid = next(
                (d.id for d in devices if d.type == dtype and d.minor is not None and d.minor == e.minor),
                None,
            )
            out[dtype].append(replace(e, id=uuid or ""))
    return out
