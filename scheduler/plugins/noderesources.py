"""NodeResourcesFit: the resource Filter and the LeastAllocated Score of Kubernetes' ``noderesources``.

PreFilter: the pod's effective requests (``apis.pod.pod_requests``: containers summed, init containers
and sidecars maxed in, overhead added) in snapshot units (cpu milli, others ``Value()``), kept as the
list of checked resources.

Filter (kube-scheduler 1.20's ``fitsRequest``, code UNSCHEDULABLE, all reasons in one Status):
``Too many pods`` when ``pod_count + 1 > allocatable pods`` (a node without ``pods`` allocatable allows
none); then, unless the pod requests nothing at all (no cpu, memory or ephemeral-storage, no scalar
resource named), ``Insufficient <resource>`` for cpu, memory and ephemeral-storage — whatever the pod
requests of each, so a node already over-requested there rejects it, as 1.20 does (later versions check
only what the pod requests) — and for each scalar resource the pod names, with
``allocatable < request + requested`` in Go's wrapping int64 (a resource the node lacks has allocatable
0). Checked resources are those Kubernetes' ``Resource.Add`` keeps: cpu, memory, ephemeral-storage
and scalar resources (``hugepages-*``, ``attachable-volumes-*``, ``*kubernetes.io/*`` such as
``kubernetes.io/batch-cpu``, and extended resources ``domain/name``); other names (``pods`` included)
are not checked. Reason order: pods, cpu, memory, ephemeral-storage, then scalar resources by name (Go
iterates a map there).

Args (``from_args``, docs/rules/scheduler-basic.md#noderesources-plugin-args): ``ignoredResources`` and
``ignoredResourceGroups`` (the part before ``/``) make the Filter skip those *extended* resources
(``resourcemath.is_extended_resource``; ``kubernetes.io/`` names, hugepages and the base resources are
never skipped); ``scoringStrategy`` picks the Score's rule (LeastAllocated, MostAllocated or
RequestedToCapacityRatio, with its resources and shape), evaluated by the one implementation the v1.20
score plugins share (scheduler.plugins.noderesources_scoring). Without args the plugin is as below.

Score (default): LeastAllocated over cpu and memory, weight 1 each. Per resource, with ``requested``
the node's *non-zero* requests plus the pod's: ``(allocatable - requested) * 100 / allocatable``, 0 when
allocatable is 0 or requested exceeds it; the node score is the weighted sum divided by the weight sum.
Divisions truncate toward zero as Go's do. Non-zero requests (``GetNonzeroRequests``) count a
container (or init container) without a cpu request as 100m and without a memory request as 200Mi (an
explicit 0 stays 0), aggregated like ``pod_requests`` (overhead in snapshot units). This is Kubernetes'
``NodeInfo.NonZeroRequested`` for the node's pods and ``PodRequests(NonMissingContainerRequests)``
(1.27+) for the incoming pod; 1.20-1.26 added the incoming pod's cpu overhead as ``Value()`` (whole
cores) and ignored sidecars, which is not reproduced.

The rule is docs/rules/scheduler.md#noderesourcesfit. Its arithmetic is Go's int64: numpy's int64
wraps where Go's does, and divisions truncate (``resourcemath.go_div_all``). Vectorised over the
snapshot's resource-major matrices; Score's results are kept per pod inputs (a view of the shared
scoring module).
Imports: numpy, apis (pod, quantity), scheduler.framework, scheduler.plugins (resourcemath,
noderesources_args, noderesources_scoring).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Self

import numpy as np

from apis.pod import pod_requests, resources_key
from apis.quantity import QuantityError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import BoolArray, FilterResult, IntArray, Pod
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.framework.units import to_values
from scheduler.plugins.noderesources_args import FitArgs, fit_args
from scheduler.plugins.noderesources_scoring import pod_inputs, score_all
from scheduler.plugins.resourcemath import MEMO_LIMIT, is_checked_resource, is_extended_resource, reason_order

NAME: Final = "NodeResourcesFit"
PRE_FILTER_KEY: Final = "PreFilter" + NAME
PRE_SCORE_KEY: Final = "PreScore" + NAME
REASON_TOO_MANY_PODS: Final = "Too many pods"
BASE_CHECKED: Final = ("cpu", "memory", "ephemeral-storage")
_checked_memo: dict[Hashable, tuple[tuple[tuple[str, int], ...], dict[str, int]]] = {}  # by resources_key


@dataclass(frozen=True, slots=True)
class PreFilterState:
    """The resources the Filter checks, with the pod's request of each (reason order), and all its
    requests."""

    checked: tuple[tuple[str, int], ...]
    requests: dict[str, int]


def pre_filter_state(pod: Pod) -> PreFilterState:
    """The pod's PreFilterState, memoised by ``apis.pod.resources_key`` (every input it reads)."""
    key = resources_key(pod)
    hit = _checked_memo.get(key) if key is not None else None
    if hit is None:
        requests = to_values(pod_requests(pod))
        scalars = [(r, v) for r, v in requests.items() if r not in BASE_CHECKED and is_checked_resource(r)]
        if scalars or any(requests.get(r, 0) for r in BASE_CHECKED):
            found = sorted(
                [*((r, requests.get(r, 0)) for r in BASE_CHECKED), *scalars], key=lambda x: reason_order(x[0])
            )
        else:  # a pod that requests nothing is never short of anything
            found = []
        hit = (tuple(found), requests)
        if key is not None:
            if len(_checked_memo) >= MEMO_LIMIT:
                _checked_memo.clear()
            _checked_memo[key] = hit
    return PreFilterState(hit[0], dict(hit[1]))


def fit_failures(
    checked: Sequence[tuple[str, int]],
    n: int,
    allocatable: Callable[[str], IntArray | None],
    requested: Callable[[str], IntArray],
    pod_count: IntArray,
    pods_allocatable: IntArray,
) -> list[tuple[str, BoolArray]]:
    """The Filter's rule over `n` nodes, each reason with the nodes it fails (reason order): ``Too many
    pods`` where ``pod_count + 1 > pods_allocatable``, ``Insufficient <r>`` where ``allocatable(r) <
    requested(r) + request`` in Go's wrapping int64 (``allocatable(r)`` None: no node has ``r``, so
    every node fails when the pod requests it). The one form of the rule: the Filter, preemption's
    pruning (the node less its lower-priority pods) and victim search, and the shards' arbiter
    (`insufficient`, one node) all call it."""
    out = [(REASON_TOO_MANY_PODS, pod_count + 1 > pods_allocatable)]
    for r, v in checked:
        a = allocatable(r)
        out.append((f"Insufficient {r}", np.full(n, v > 0, np.bool_) if a is None else a < requested(r) + v))
    return out


def insufficient(
    allocatable: Mapping[str, int],
    requested: Mapping[str, int],
    pods: int,
    checked: Sequence[tuple[str, int]],
) -> list[str]:
    """`fit_failures` on one node given as dicts (a resource it lacks has allocatable 0): the reasons
    it fails, in order; empty when the pod fits."""

    def one(m: Mapping[str, int]) -> Callable[[str], IntArray]:
        return lambda r: np.array([m.get(r, 0)], np.int64)

    pods_alloc = np.array([allocatable.get("pods", 0)], np.int64)
    found = fit_failures(checked, 1, one(allocatable), one(requested), np.array([pods], np.int64), pods_alloc)
    return [reason for reason, failed in found if failed[0]]


def ignored(name: str, args: FitArgs) -> bool:
    """Whether ``ignoredResources``/``ignoredResourceGroups`` skip ``name`` (extended resources only)."""
    if not is_extended_resource(name):
        return False
    return name in args.ignored_resources or name.split("/", 1)[0] in args.ignored_groups


class NodeResourcesFit:
    """PreFilter + Filter + Score plugin; see the module docstring."""

    def __init__(self, args: FitArgs | None = None) -> None:
        self.args = args or FitArgs()
        self._ignores = bool(self.args.ignored_resources or self.args.ignored_groups)

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> Self:
        """NodeResourcesFitArgs (docs/rules/scheduler-basic.md#noderesources-plugin-args)."""
        return cls(fit_args(args))

    @property
    def name(self) -> str:
        return NAME

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        try:
            s = pre_filter_state(pod)
        except QuantityError as e:
            return Status.error(str(e), plugin=NAME)
        if self._ignores:
            s = PreFilterState(tuple((r, v) for r, v in s.checked if not ignored(r, self.args)), s.requests)
        state.write(PRE_FILTER_KEY, s)
        return Status.success()

    def _state(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> PreFilterState | Status:
        s = state.get(PRE_FILTER_KEY)
        if isinstance(s, PreFilterState):
            return s
        st = self.pre_filter(state, pod, snapshot)
        return st if not st.is_success() else self._state(state, pod, snapshot)

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        s = self._state(state, pod, snapshot)
        n = snapshot.n
        if isinstance(s, Status):
            return FilterResult(np.zeros(n, np.int32), (s,))
        alloc, requested, col = snapshot.allocatable, snapshot.requested, snapshot.col
        pods = col.get("pods")
        found = fit_failures(
            s.checked, n,
            lambda r: alloc[col[r]] if r in col else None,
            lambda r: requested[col[r]],
            snapshot.pod_count,
            alloc[pods] if pods is not None else np.zeros(n, np.int64),
        )  # fmt: skip
        reasons = [reason for reason, _ in found]
        masks: list[BoolArray] = [m for _, m in found]
        failed = masks[0].copy()
        for m in masks[1:]:
            failed |= m
        if not np.count_nonzero(failed):
            return FilterResult.all_pass(n)
        failing = np.flatnonzero(failed)
        # One status per distinct failure pattern: rows' patterns packed to bytes and grouped.
        hits = np.stack([m[failing] for m in masks], axis=1)
        packed = np.ascontiguousarray(np.packbits(hits, axis=1))
        _, first, inverse = np.unique(
            packed.view(f"V{packed.shape[1]}").ravel(), return_index=True, return_inverse=True
        )
        statuses = tuple(
            Status.unschedulable(*(r for r, hit in zip(reasons, row, strict=True) if hit), plugin=NAME)
            for row in hits[first].tolist()
        )
        which = np.full(n, -1, np.int32)
        which[failing] = np.asarray(inverse, np.int32).reshape(-1)
        return FilterResult(which, statuses)

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        """Every row's score under the scoring strategy (kept: the rule costs the same for every row)."""
        inputs = state.get(PRE_SCORE_KEY)
        if not isinstance(inputs, tuple):
            s = state.get(PRE_FILTER_KEY)
            requests = s.requests if isinstance(s, PreFilterState) else None
            inputs = pod_inputs(self.args.strategy, pod, requests)
            state.write(PRE_SCORE_KEY, inputs)
        return score_all(self.args.strategy, state, pod, snapshot, PRE_SCORE_KEY)
