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
snapshot's resource-major matrices. The Filter keeps, per checked tuple, each row's failure pattern
(its reasons' bits packed to bytes, ``FitCodes``, a snapshot view patched on the rows the snapshot
re-copies), and groups the failing rows' patterns into statuses only when some row fails; Score's
results are kept per pod inputs (a view of the shared scoring module).
Imports: numpy, apis (pod, quantity), scheduler.framework, scheduler.plugins (resourcemath,
noderesources_args, noderesources_scoring).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Self

import numpy as np
import numpy.typing as npt

from apis.pod import pod_requests, resources_key
from apis.quantity import QuantityError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import BoolArray, FilterResult, IntArray, Pod
from scheduler.framework.rowresults import RowResults
from scheduler.framework.snapshot import RowChange, Snapshot
from scheduler.framework.status import Status
from scheduler.framework.units import to_values
from scheduler.plugins.noderesources_args import FitArgs, fit_args
from scheduler.plugins.noderesources_scoring import FIT_PRE_FILTER_KEY, score_all
from scheduler.plugins.resourcemath import MEMO_LIMIT, is_checked_resource, is_extended_resource, reason_order

NAME: Final = "NodeResourcesFit"
PRE_FILTER_KEY: Final = FIT_PRE_FILTER_KEY  # "PreFilter" + NAME, read by the scores too
REASON_TOO_MANY_PODS: Final = "Too many pods"
BASE_CHECKED: Final = ("cpu", "memory", "ephemeral-storage")
U8Array = npt.NDArray[np.uint8]
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


def fit_matrix(
    requests: IntArray,
    allocatable: IntArray,
    requested: IntArray,
    pod_count: IntArray,
    pods_allocatable: IntArray,
) -> BoolArray:
    """The rule over k nodes and c checked resources as one ``(1 + c, k)`` matrix (reason order): row
    0 ``pod_count + 1 > pods_allocatable``, row ``1 + j`` ``allocatable[j] < requested[j] + requests[j]``
    in Go's wrapping int64 (``requests``: a ``(c, 1)`` column; ``allocatable``, ``requested``: ``(c, k)``)."""
    out = np.empty((1 + len(requests), len(pod_count)), np.bool_)
    np.greater(pod_count + 1, pods_allocatable, out=out[0])
    np.less(allocatable, requested + requests, out=out[1:])
    return out


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
    allocatable and requested are 0 and every node fails when the pod requests it). The one form of the
    rule (`fit_matrix`): the Filter, preemption's pruning (the node less its lower-priority pods) and
    victim search, and the shards' arbiter (`insufficient`, one node) all call it."""
    zero = np.zeros(n, np.int64)
    alloc_rows, requested_rows = [], []
    for r, _ in checked:
        a = allocatable(r)
        alloc_rows.append(zero if a is None else a)
        requested_rows.append(zero if a is None else requested(r))
    c = len(checked)
    found = fit_matrix(
        np.array([v for _, v in checked], np.int64).reshape(c, 1),
        np.array(alloc_rows, np.int64).reshape(c, n),
        np.array(requested_rows, np.int64).reshape(c, n),
        pod_count,
        pods_allocatable,
    )
    return [
        (REASON_TOO_MANY_PODS, found[0]),
        *((f"Insufficient {r}", found[1 + j]) for j, (r, _) in enumerate(checked)),
    ]


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


class Plan:
    """What `fit_codes` reads for one checked tuple in one column layout: the columns of the checked
    resources that have one, their places among the checked (None: all of them), and the requests."""

    __slots__ = ("columns", "places", "requests")

    def __init__(self, checked: Sequence[tuple[str, int]], col: Mapping[str, int]) -> None:
        found = [(j, col[r]) for j, (r, _) in enumerate(checked) if r in col]
        self.columns = np.array([c for _, c in found], np.intp).reshape(-1, 1)
        self.places = None if len(found) == len(checked) else np.array([j for j, _ in found], np.intp)
        self.requests = np.array([v for _, v in checked], np.int64).reshape(-1, 1)


_BITS: Final = (np.uint8(1) << np.arange(7, -1, -1, dtype=np.uint8)).reshape(-1, 1)  # 128, 64, ..., 1
_PACKBITS_COLUMNS: Final = 256  # np.packbits along axis 0 is strided: beyond this, weighted sums


def pack_rows(m: BoolArray) -> U8Array:
    """``np.packbits(m, axis=0)``: row j is bit ``7 - j % 8`` of byte ``j // 8``. Over many columns
    computed as one weighted sum per byte (distinct powers of two: no carry), ~30x faster there."""
    if m.shape[1] <= _PACKBITS_COLUMNS:
        return np.packbits(m, axis=0)
    out = np.empty(((len(m) + 7) // 8, m.shape[1]), np.uint8)
    for b in range(len(out)):
        part = m[8 * b : 8 * b + 8]
        np.sum(part * _BITS[: len(part)], axis=0, dtype=np.uint8, out=out[b])
    return out


def fit_codes(snapshot: Snapshot, rows: IntArray | None, plan: Plan) -> U8Array:
    """The rule (`fit_matrix`) over the snapshot's rows (or only `rows`), each row's failed reasons
    packed to bytes: ``(bytes, rows)``, reason j at bit ``7 - j % 8`` of byte ``j // 8``
    (``np.packbits``' order, so comparing two rows' bytes compares their patterns as the grouping
    does). One gather per matrix, whatever the number of resources; a resource without a column has
    allocatable and requested 0 (`fit_failures`)."""
    alloc, requested, pod_count = snapshot.allocatable, snapshot.requested, snapshot.pod_count
    pods = snapshot.col.get("pods")
    cols = plan.columns
    if rows is None:
        a, q, pa = alloc[cols[:, 0]], requested[cols[:, 0]], alloc[pods] if pods is not None else None
    else:
        a, q, pod_count = alloc[cols, rows], requested[cols, rows], pod_count[rows]
        pa = alloc[pods, rows] if pods is not None else None
    k = len(pod_count)
    if pa is None:
        pa = np.zeros(k, np.int64)
    if plan.places is not None:  # resources without a column: rows of zeros
        c = len(plan.requests)
        a_all, q_all = np.zeros((c, k), np.int64), np.zeros((c, k), np.int64)
        a_all[plan.places], q_all[plan.places] = a, q
        a, q = a_all, q_all
    return pack_rows(fit_matrix(plan.requests, a, q, pod_count, pa))


def grouped(codes: U8Array, reasons: Sequence[str]) -> FilterResult:
    """One status per distinct failure pattern among the rows failing something, ordered as their
    packed bytes compare (the first reason the most significant bit); `which` gives each failing row
    its pattern's index."""
    n = codes.shape[1]
    failing = np.flatnonzero(codes[0] if len(codes) == 1 else codes.any(axis=0))
    packed = np.ascontiguousarray(codes[:, failing].T)  # (failing rows, bytes)
    keys = packed[:, 0] if packed.shape[1] == 1 else packed.view(f"V{packed.shape[1]}").ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    hits = np.unpackbits(packed[first], axis=1, count=len(reasons))
    statuses = tuple(
        Status.unschedulable(*(r for r, hit in zip(reasons, row, strict=True) if hit), plugin=NAME)
        for row in hits.tolist()
    )
    which = np.full(n, -1, np.int32)
    which[failing] = np.asarray(inverse, np.int32).reshape(-1)
    return FilterResult(which, statuses)


class FitCodes:
    """Each row's packed failure pattern (`fit_codes`) per checked tuple, a snapshot view: kept with
    ``RowResults`` and patched on the rows the snapshot re-copies (their requests, pod counts or
    allocatable changed), moved with the rows when nodes join or leave; so a pod shaped like a recent
    one costs the changed rows and one count (docs/rules/scheduler.md#noderesourcesfit)."""

    reads_pods = True  # the rows' requested and pod counts

    def __init__(self) -> None:
        self.results = RowResults(0)
        self.plans: dict[tuple[tuple[str, int], ...], Plan] = {}  # in this column layout

    def rebuild(self, snapshot: Snapshot) -> None:
        self.results = RowResults(snapshot.n)
        self.plans.clear()  # (columns change only on a rebuild)

    def refresh(self, snapshot: Snapshot, rows: Sequence[int]) -> None:
        self.results.changed(rows)

    def resize(self, snapshot: Snapshot, change: RowChange) -> None:
        self.results.resize(change)  # the new rows are then refreshed, so patched on the next read

    def codes(self, checked: tuple[tuple[str, int], ...], snapshot: Snapshot) -> U8Array:
        """Every row's pattern (kept: callers must not modify it)."""
        plan = self.plans.get(checked)
        if plan is None:
            if len(self.plans) >= MEMO_LIMIT:
                self.plans.clear()
            plan = self.plans[checked] = Plan(checked, snapshot.col)
        return self.results.get(checked, lambda rows: fit_codes(snapshot, rows, plan))


VIEW_KEY: Final = ("noderesources", "fit-codes")


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
        codes = snapshot.view(VIEW_KEY, FitCodes).codes(s.checked, snapshot)
        if not np.count_nonzero(codes):
            return FilterResult.all_pass(n)
        return grouped(codes, [REASON_TOO_MANY_PODS, *(f"Insufficient {r}" for r, _ in s.checked)])

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        """Every row's score under the scoring strategy (kept: the rule costs the same for every row)."""
        s = state.get(PRE_FILTER_KEY)
        requests = s.requests if isinstance(s, PreFilterState) else None
        return score_all(self.args.strategy, state, pod, snapshot, requests)
