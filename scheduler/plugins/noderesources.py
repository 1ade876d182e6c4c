"""NodeResourcesFit: the resource Filter and the LeastAllocated Score of Kubernetes' ``noderesources``.

PreFilter: the pod's effective requests (``apis.pod.pod_requests``: containers summed, init containers
and sidecars maxed in, overhead added) in snapshot units (cpu milli, others ``Value()``), kept as the
list of checked resources and as a snapshot vector.

Filter (current Kubernetes ``fitsRequest``, code UNSCHEDULABLE, all reasons in one Status):
``Too many pods`` when ``pod_count + 1 > allocatable pods`` (a node without ``pods`` allocatable allows
none); then ``Insufficient <resource>`` for each resource the pod requests a non-zero amount of with
``request > allocatable - requested`` (a resource the node lacks has allocatable 0). Checked resources
are those Kubernetes' ``Resource.Add`` keeps: cpu, memory, ephemeral-storage and scalar resources
(``hugepages-*``, ``attachable-volumes-*``, ``*kubernetes.io/*`` such as ``kubernetes.io/batch-cpu``,
and extended resources ``domain/name``); other names (``pods`` included) are not checked. Reason order:
pods, cpu, memory, ephemeral-storage, then scalar resources by name (Go iterates a map there).

Score: LeastAllocated over cpu and memory, weight 1 each. Per resource, with ``requested`` the node's
*non-zero* requests plus the pod's: ``(allocatable - requested) * 100 / allocatable``, 0 when
allocatable is 0 or requested exceeds it; the node score is the weighted sum divided by the weight sum.
Divisions truncate toward zero as Go's do. Non-zero requests (``GetNonzeroRequests``) count a
container (or init container) without a cpu request as 100m and without a memory request as 200Mi (an
explicit 0 stays 0), aggregated like ``pod_requests`` (overhead in snapshot units). This is Kubernetes'
``NodeInfo.NonZeroRequested`` for the node's pods and ``PodRequests(NonMissingContainerRequests)``
(1.27+) for the incoming pod; 1.20-1.26 added the incoming pod's cpu overhead as ``Value()`` (whole
cores) and ignored sidecars, which is not reproduced.
Imports: numpy, apis (pod, quantity), scheduler.framework.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from apis.pod import containers, init_containers, pod_requests
from apis.quantity import QuantityError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import BoolArray, FilterResult, IntArray, Pod
from scheduler.framework.snapshot import PodInfo, Snapshot, to_values
from scheduler.framework.status import MAX_NODE_SCORE, Status

NAME: Final = "NodeResourcesFit"
PRE_FILTER_KEY: Final = "PreFilter" + NAME
PRE_SCORE_KEY: Final = "PreScore" + NAME
REASON_TOO_MANY_PODS: Final = "Too many pods"
DEFAULT_MILLI_CPU_REQUEST: Final = 100
DEFAULT_MEMORY_REQUEST: Final = 200 * 1024 * 1024
SCORE_WEIGHTS: Final = (("cpu", 1), ("memory", 1))
_BASE_ORDER: Final = ("cpu", "memory", "ephemeral-storage")

_NAME_RE: Final = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS1123_SUBDOMAIN_RE: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _qualified_name(s: str) -> bool:
    prefix, sep, name = s.rpartition("/")
    if sep and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN_RE.fullmatch(prefix)):
        return False
    return 0 < len(name) <= 63 and _NAME_RE.fullmatch(name) is not None


def is_checked_resource(name: str) -> bool:
    """cpu, memory, ephemeral-storage, or a scalar resource (``IsScalarResourceName``)."""
    if name in _BASE_ORDER or name.startswith(("hugepages-", "attachable-volumes-")):
        return True
    if "kubernetes.io/" in name:
        return True
    return "/" in name and not name.startswith("requests.") and _qualified_name("requests." + name)


def _order(name: str) -> tuple[int, str]:
    return (_BASE_ORDER.index(name), "") if name in _BASE_ORDER else (len(_BASE_ORDER), name)


def go_div(a: int, b: int) -> int:
    """Go's integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _go_div_all(a: IntArray, b: IntArray) -> IntArray:
    q = np.abs(a) // np.abs(b)
    return np.where((a >= 0) == (b >= 0), q, -q)


def _with_defaults(c: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a container whose requests name cpu and memory (the non-zero defaults when absent)."""
    res = c.get("resources")
    res = dict(res) if isinstance(res, Mapping) else {}
    req = res.get("requests")
    req = dict(req) if isinstance(req, Mapping) else {}
    req.setdefault("cpu", f"{DEFAULT_MILLI_CPU_REQUEST}m")
    req.setdefault("memory", str(DEFAULT_MEMORY_REQUEST))
    res["requests"] = req
    return {**c, "resources": res}


def _has_both(c: Mapping[str, Any]) -> bool:
    res = c.get("resources")
    req = res.get("requests") if isinstance(res, Mapping) else None
    return isinstance(req, Mapping) and "cpu" in req and "memory" in req


def nonzero_requests(pod: Mapping[str, Any], requests: Mapping[str, int] | None = None) -> tuple[int, int]:
    """The pod's non-zero (cpu milli, memory) for scoring; ``requests`` (its ``pod_requests`` in
    snapshot units) is reused when every container names both resources."""
    cs, ics = containers(pod), init_containers(pod)
    if requests is None or not all(_has_both(c) for c in cs + ics):
        spec = pod.get("spec")
        spec = dict(spec) if isinstance(spec, Mapping) else {}
        spec["containers"] = [_with_defaults(c) for c in cs]
        spec["initContainers"] = [_with_defaults(c) for c in ics]
        requests = to_values(pod_requests({**pod, "spec": spec}))
    return requests.get("cpu", 0), requests.get("memory", 0)


@dataclass(frozen=True, slots=True)
class PreFilterState:
    """The checked resources the pod requests a non-zero amount of (reason order) and all its requests."""

    checked: tuple[tuple[str, int], ...]
    requests: dict[str, int]
    vector: IntArray


def least_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return go_div((capacity - requested) * MAX_NODE_SCORE, capacity)


class NodeResourcesFit:
    """PreFilter + Filter + Score plugin; see the module docstring."""

    def __init__(self) -> None:
        self._snap: weakref.ref[Snapshot] | None = None
        self._layout = -1
        self._gen: npt.NDArray[np.int64] = np.zeros(0, np.int64)
        self._nz: IntArray = np.zeros((0, 2), np.int64)  # per row: the pods' non-zero cpu, memory
        self._pod_nz: dict[int, tuple[PodInfo, tuple[int, int]]] = {}
        self._pod_nz_limit = 0

    @property
    def name(self) -> str:
        return NAME

    # --- PreFilter / Filter ---------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        try:
            s = self._pre_filter_state(pod, snapshot)
        except QuantityError as e:
            return Status.error(str(e), plugin=NAME)
        state.write(PRE_FILTER_KEY, s)
        return Status.success()

    @staticmethod
    def _pre_filter_state(pod: Pod, snapshot: Snapshot) -> PreFilterState:
        requests = to_values(pod_requests(pod))
        checked = sorted(
            ((r, v) for r, v in requests.items() if v > 0 and is_checked_resource(r)),
            key=lambda x: _order(x[0]),
        )
        return PreFilterState(tuple(checked), requests, snapshot.vector(requests))

    def _state(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> PreFilterState | Status:
        s = state.get(PRE_FILTER_KEY)
        if isinstance(s, PreFilterState):
            return s
        st = self.pre_filter(state, pod, snapshot)
        return st if not st.is_success() else self._state(state, pod, snapshot)

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> Status:
        s = self._state(state, pod, snapshot)
        if isinstance(s, Status):
            return s
        col = snapshot.col
        reasons: list[str] = []
        pods = col.get("pods")
        allowed = int(snapshot.allocatable[i, pods]) if pods is not None else 0
        if int(snapshot.pod_count[i]) + 1 > allowed:
            reasons.append(REASON_TOO_MANY_PODS)
        for r, v in s.checked:
            j = col.get(r)
            free = int(snapshot.allocatable[i, j]) - int(snapshot.requested[i, j]) if j is not None else 0
            if v > free:
                reasons.append(f"Insufficient {r}")
        return Status.unschedulable(*reasons, plugin=NAME) if reasons else Status.success()

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        s = self._state(state, pod, snapshot)
        n = snapshot.n
        if isinstance(s, Status):
            return FilterResult(np.zeros(n, np.int32), (s,))
        col = snapshot.col
        reasons = [REASON_TOO_MANY_PODS]
        pods = col.get("pods")
        allowed = snapshot.allocatable[:, pods] if pods is not None else np.zeros(n, np.int64)
        masks: list[BoolArray] = [snapshot.pod_count + 1 > allowed]
        for r, v in s.checked:
            j = col.get(r)
            reasons.append(f"Insufficient {r}")
            if j is None:
                masks.append(np.full(n, v > 0, np.bool_))
            else:
                masks.append(snapshot.allocatable[:, j] - snapshot.requested[:, j] < v)
        if len(masks) <= 62:
            codes = np.zeros(n, np.int64)
            for k, m in enumerate(masks):
                codes |= m.astype(np.int64) << k
            failing = np.flatnonzero(codes)
            if len(failing) == 0:
                return FilterResult.all_pass(n)
            patterns, inverse = np.unique(codes[failing], return_inverse=True)
            combos = [[bool(int(p) >> k & 1) for k in range(len(masks))] for p in patterns]
        else:  # too many reasons for a bit code: group the rows by their failure pattern
            stacked = np.stack(masks, axis=1)
            failing = np.flatnonzero(stacked.any(axis=1))
            if len(failing) == 0:
                return FilterResult.all_pass(n)
            uniq, inverse = np.unique(stacked[failing], axis=0, return_inverse=True)
            combos = [[bool(b) for b in row] for row in uniq]
        statuses = tuple(
            Status.unschedulable(*(r for r, hit in zip(reasons, combo, strict=True) if hit), plugin=NAME)
            for combo in combos
        )
        which = np.full(n, -1, np.int32)
        which[failing] = np.asarray(inverse, np.int32).reshape(-1)
        return FilterResult(which, statuses)

    # --- Score ----------------------------------------------------------------------------------
    def _pod_nonzero(self, state: CycleState, pod: Pod) -> tuple[int, int]:
        v = state.get(PRE_SCORE_KEY)
        if isinstance(v, tuple) and len(v) == 2:
            return int(v[0]), int(v[1])
        nz = nonzero_requests(pod)
        state.write(PRE_SCORE_KEY, nz)
        return nz

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> tuple[int, Status]:
        pod_cpu, pod_mem = self._pod_nonzero(state, pod)
        node_cpu = node_mem = 0
        for info in snapshot.infos[i].pods.values():
            c, m = nonzero_requests(info.pod, info.requests)
            node_cpu, node_mem = node_cpu + c, node_mem + m
        requested = {"cpu": node_cpu + pod_cpu, "memory": node_mem + pod_mem}
        total = weights = 0
        for r, w in SCORE_WEIGHTS:
            j = snapshot.col.get(r)
            capacity = int(snapshot.allocatable[i, j]) if j is not None else 0
            total += least_requested_score(requested[r], capacity) * w
            weights += w
        return go_div(total, weights), Status.success()

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        pod_nz = np.asarray(self._pod_nonzero(state, pod), np.int64)
        rows = np.asarray(feasible, np.int64)
        requested = self._node_nonzero(snapshot)[rows] + pod_nz
        total = np.zeros(len(rows), np.int64)
        weights = 0
        for k, (r, w) in enumerate(SCORE_WEIGHTS):
            j = snapshot.col.get(r)
            cap = snapshot.allocatable[rows, j] if j is not None else np.zeros(len(rows), np.int64)
            req = requested[:, k]
            bad = (cap == 0) | (req > cap)
            safe_cap = np.where(bad, 1, cap)
            score = np.where(
                bad, 0, _go_div_all((safe_cap - np.where(bad, 0, req)) * MAX_NODE_SCORE, safe_cap)
            )
            total += score * w
            weights += w
        return _go_div_all(total, np.full(len(rows), weights, np.int64))

    def _pod_info_nonzero(self, info: PodInfo) -> tuple[int, int]:
        hit = self._pod_nz.get(id(info))
        if hit is not None and hit[0] is info:
            return hit[1]
        v = nonzero_requests(info.pod, info.requests)
        self._pod_nz[id(info)] = (info, v)
        return v

    def _row_nonzero(self, snapshot: Snapshot, i: int) -> tuple[int, int]:
        cpu = mem = 0
        for info in snapshot.infos[i].pods.values():
            c, m = self._pod_info_nonzero(info)
            cpu, mem = cpu + c, mem + m
        return cpu, mem

    def _node_nonzero(self, snapshot: Snapshot) -> IntArray:
        """Per row, the non-zero (cpu, memory) of the node's pods; rows re-read when their generation
        or the snapshot layout changes."""
        same = self._snap is not None and self._snap() is snapshot and self._layout == snapshot.layout
        if not same or len(self._gen) != snapshot.n:
            self._snap = weakref.ref(snapshot)
            self._layout = snapshot.layout
            self._gen = snapshot.generation.copy()
            old, self._pod_nz = self._pod_nz, {}
            for info in (p for node in snapshot.infos for p in node.pods.values()):
                hit = old.get(id(info))
                if hit is not None and hit[0] is info:
                    self._pod_nz[id(info)] = hit
            self._nz = np.array([self._row_nonzero(snapshot, i) for i in range(snapshot.n)], np.int64)
            self._nz = self._nz.reshape(snapshot.n, 2)
            self._pod_nz_limit = 2 * len(self._pod_nz) + 4096
            return self._nz
        for i in np.flatnonzero(self._gen != snapshot.generation).tolist():
            self._gen[i] = snapshot.generation[i]
            self._nz[i] = self._row_nonzero(snapshot, i)
        if len(self._pod_nz) > self._pod_nz_limit:  # departed pods piled up: prune on the next call
            self._layout = -1
        return self._nz
