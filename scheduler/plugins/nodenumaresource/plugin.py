"""The ``NodeNUMAResource`` scheduler plugin (docs/rules/scheduler-nodenumaresource.md#wiring): exclusive
cpusets for LSE/LSR pods. PreFilter decides whether the pod binds CPUs; Filter is vectorised and visits
only the rows where the rule can differ from the plain case (nodes whose labels, annotations or
NodeResourceTopology make the plugin act, or every row for a binding pod), so a pod that binds nothing
on a cluster without such nodes costs a few numpy calls; Score is one formula over every row's columns
(scoring.score_rows, the rows' facts from rows.score_rows_of); Reserve allocates the cpuset and
records it as assumed, Unreserve releases it, PreBind writes ``resource-status`` (and the
``resource-spec`` write-back). Assigned pods and NodeResourceTopology objects reach it through
``on_pod_*`` and ``on_topology``.
Imports: the standard library, numpy, apis (numa, pod), scheduler.framework, this package.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from apis.numa import (
    ANNOTATION_RESOURCE_SPEC,
    ANNOTATION_RESOURCE_STATUS,
    BIND_FULL_PCPUS,
    BIND_SPREAD_BY_PCPUS,
    NUMA_LEAST_ALLOCATED,
    NUMA_MOST_ALLOCATED,
    PLUGIN_NAME,
    go_fields,
)
from apis.pod import pod_annotations
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import ClusterEvent, FilterResult, IntArray, Pod
from scheduler.framework.snapshot import NodeInfo, Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.nodenumaresource.accumulator import AllocationError
from scheduler.plugins.nodenumaresource.allocation import PodAllocation
from scheduler.plugins.nodenumaresource.cache import NUMACache, pod_id
from scheduler.plugins.nodenumaresource.cpuset_alloc import Request, allocate_cpuset
from scheduler.plugins.nodenumaresource.filtering import (
    ERR_INVALID_CPU_TOPOLOGY,
    NodeFacts,
    filter_node,
    pod_request,
    request_cpu_bind,
    run_trial,
)
from scheduler.plugins.nodenumaresource.prebind import annotations_after
from scheduler.plugins.nodenumaresource.prefilter import PodState, pre_filter
from scheduler.plugins.nodenumaresource.rows import acting_rows, score_rows_of, valid_rows
from scheduler.plugins.nodenumaresource.scoring import (
    MOST_ALLOCATED,
    ScoringStrategy,
    parse_strategy,
    score_rows,
)

NAME: Final = PLUGIN_NAME
STATE_KEY: Final = PLUGIN_NAME
_FIELDS: Final = ("defaultCPUBindPolicy", "scoringStrategy", "numaScoringStrategy")


@dataclass(slots=True)
class _Cycle:
    """One cycle's state: PreFilter's answer, the snapshot seen, what Reserve allocated and where."""

    pod: PodState
    snapshot: Snapshot | None = None
    allocation: PodAllocation | None = None
    node: str = ""
    # preemption's what-if per node: (CPUs freed by removed pods, CPUs taken back by added ones)
    preempt: dict[str, tuple[frozenset[int], frozenset[int]]] = field(default_factory=dict)

    def clone(self) -> _Cycle:
        return _Cycle(self.pod, self.snapshot, self.allocation, self.node, dict(self.preempt))

    def preemptible(self, node: str) -> frozenset[int]:
        add, remove = self.preempt.get(node, (frozenset(), frozenset()))
        return add - remove


class NodeNUMAResource:
    """Koordinator's NodeNUMAResource (CPU binding; NUMA-node fitting is not built)."""

    # PreBind's annotations, patched by the binder (docs/rules/scheduler-nodenumaresource.md#prebind)
    bind_annotations: tuple[str, ...] = (ANNOTATION_RESOURCE_STATUS, ANNOTATION_RESOURCE_SPEC)

    def __init__(
        self,
        default_bind_policy: str = BIND_FULL_PCPUS,
        scoring: ScoringStrategy | None = None,
        numa_scoring: ScoringStrategy | None = None,
        cache: NUMACache | None = None,
    ) -> None:
        self.default_bind_policy = default_bind_policy
        self.scoring = scoring or ScoringStrategy()
        self.numa_scoring = numa_scoring or ScoringStrategy()
        # the accumulator's default NUMA strategy (docs/rules/scheduler-nodenumaresource.md#args)
        self.default_strategy = (
            NUMA_MOST_ALLOCATED if self.numa_scoring.type == MOST_ALLOCATED else NUMA_LEAST_ALLOCATED
        )
        self.cache = cache if cache is not None else NUMACache()
        # node -> (what the trial allocation depended on, its error or None)
        self._trials: dict[str, tuple[tuple[object, ...], str | None]] = {}

    @classmethod
    def from_args(cls, args: Mapping[str, Any] | None) -> NodeNUMAResource:
        """v1 defaults for absent (or null) fields; ValueError names the bad field and its value."""
        raw: Mapping[str, Any] = {} if args is None else args
        if not isinstance(raw, Mapping):
            raise ValueError(f"args={raw!r}: must be an object")
        for key in raw:
            if key not in _FIELDS:
                raise ValueError(f"{key}={raw[key]!r}: unknown field")
        f = go_fields(raw, _FIELDS, "args")
        policy = f.get("defaultCPUBindPolicy")
        if policy is None:
            policy = BIND_FULL_PCPUS
        if policy not in ("", BIND_FULL_PCPUS, BIND_SPREAD_BY_PCPUS):
            raise ValueError(
                f"defaultCPUBindPolicy={policy!r}: must specified CPU bind policy FullPCPUs or SpreadByPCPUs"
            )
        return cls(
            str(policy),
            parse_strategy(f.get("scoringStrategy"), "scoringStrategy"),
            parse_strategy(f.get("numaScoringStrategy"), "numaScoringStrategy"),
        )

    @property
    def name(self) -> str:
        return NAME

    def events_to_register(self) -> list[ClusterEvent]:
        """A pod leaving frees CPUs; a NodeResourceTopology change may bring a topology."""
        return [
            ClusterEvent("Pod", "Delete"),
            *(ClusterEvent("NodeResourceTopology", a) for a in ("Add", "Update", "Delete")),
        ]

    # --- events -------------------------------------------------------------------------------------
    def on_topology(self, node_name: str, nrt: Mapping[str, Any] | None) -> None:
        self.cache.on_topology(node_name, nrt)

    def on_pod_add(self, pod: Pod) -> None:
        self.cache.on_pod_add(pod)

    def on_pod_update(self, old: Pod, new: Pod) -> None:
        self.cache.on_pod_update(old, new)

    def on_pod_delete(self, pod: Pod) -> None:
        self.cache.on_pod_delete(pod)

    # --- node facts ---------------------------------------------------------------------------------
    def facts(self, snapshot: Snapshot, row: int, cyc: _Cycle | None = None) -> NodeFacts:
        info = snapshot.infos[row]
        meta = info.node.get("metadata") or {}
        return NodeFacts(
            meta.get("labels") or {}, meta.get("annotations") or {}, self.cache.options.get(info.name),
            self.cache.allocation(info.name), info.allocatable.get("cpu", 0), info.requested.get("cpu", 0),
            info.name, cyc.preemptible(info.name) if cyc is not None else frozenset(),
        )  # fmt: skip

    def _trial(self, facts: NodeFacts, req: Request) -> str | None:
        """Filter's trial allocation, memoised per node on everything it reads: a pod like the last one
        on a node nothing happened to costs a lookup."""
        opts = facts.options
        assert opts is not None
        key = (
            opts,
            opts.max_ref_count,
            facts.allocation.version,
            req,
        )  # opts held: compared by identity first
        found = self._trials.get(facts.name)
        if found is not None and found[0] == key:
            return found[1]
        error = run_trial(facts, req)
        self._trials[facts.name] = (key, error)
        return error

    def pod_state(self, state: CycleState, pod: Pod) -> PodState:
        """PreFilter's answer for the pod in this cycle (worked out now when PreFilter did not run)."""
        return self._cycle(state, pod, None).pod

    def _cycle(self, state: CycleState, pod: Pod, snapshot: Snapshot | None) -> _Cycle:
        cyc = state.get(STATE_KEY)
        if not isinstance(cyc, _Cycle):
            _, st = pre_filter(pod, self.default_bind_policy)
            cyc = _Cycle(st)
            state.write(STATE_KEY, cyc)
        if snapshot is not None:
            cyc.snapshot = snapshot
        return cyc

    # --- PreFilter / Filter -------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        status, st = pre_filter(pod, self.default_bind_policy)
        state.write(STATE_KEY, _Cycle(st, snapshot))
        return status

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        """Per-node Python only on the acting rows, or on every row for a binding pod
        (docs/rules/scheduler-nodenumaresource.md#filter)."""
        cyc = self._cycle(state, pod, snapshot)
        st = cyc.pod
        n = snapshot.n
        if st.skip:
            return FilterResult.all_pass(n)
        rows = acting_rows(snapshot, self.cache, st.request_cpu_bind or bool(st.numa_policy))
        which: np.ndarray[Any, np.dtype[np.int32]] | None = None
        statuses: list[Status] = []
        index: dict[Status, int] = {}
        if st.request_cpu_bind:
            # elsewhere the node forces nothing: no valid topology rejects, a required policy needs the
            # SMT check and the trial, a preferred one passes
            valid = valid_rows(snapshot, self.cache)
            plain = np.ones(n, np.bool_)
            plain[rows] = False
            invalid = plain & ~valid
            if np.count_nonzero(invalid):
                which = np.where(invalid, 0, -1).astype(np.int32)
                status = Status.unresolvable(ERR_INVALID_CPU_TOPOLOGY, plugin=NAME)
                index[status] = 0
                statuses.append(status)
            if st.required_policy:
                rows = sorted([*rows, *np.flatnonzero(plain & valid).tolist()])
        for i in rows:
            status = filter_node(st, self.facts(snapshot, i, cyc), self.default_strategy, self._trial)
            if status.is_success():
                continue
            if which is None:
                which = np.full(n, -1, np.int32)
            k = index.get(status)
            if k is None:
                k = index[status] = len(statuses)
                statuses.append(status)
            which[i] = k
        return FilterResult.all_pass(n) if which is None else FilterResult(which, tuple(statuses))

    # --- PreFilterExtensions (docs/rules/scheduler-nodenumaresource.md#preemption) -------------------
    def _held(self, state: CycleState, other: Pod, info: NodeInfo) -> tuple[_Cycle, frozenset[int]] | None:
        cyc = state.get(STATE_KEY)
        if not isinstance(cyc, _Cycle) or cyc.pod.skip:
            return None
        found = self.cache.allocations.get(info.name)
        alloc = found.pods.get(pod_id(other)) if found is not None else None
        return None if alloc is None or not alloc.cpus else (cyc, alloc.cpus)

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, info: NodeInfo) -> Status:
        """A victim's CPUs become available to the preemptor on this node (unless a pod added back
        took them)."""
        held = self._held(state, pod_to_remove, info)
        if held is not None:
            cyc, cpus = held
            add, remove = cyc.preempt.get(info.name, (frozenset(), frozenset()))
            back = remove & cpus
            cyc.preempt[info.name] = (add | (cpus - back), remove - back)
        return Status.success()

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, info: NodeInfo) -> Status:
        held = self._held(state, pod_to_add, info)
        if held is not None:
            cyc, cpus = held
            add, remove = cyc.preempt.get(info.name, (frozenset(), frozenset()))
            kept = add & cpus
            cyc.preempt[info.name] = (add - kept, remove | (cpus - kept))
        return Status.success()

    # --- PreScore / Score ---------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> Status:
        return Status.skip() if self._cycle(state, pod, snapshot).pod.skip else Status.success()

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        """Every row's score in one vectorised formula over the snapshot's columns and the rows' facts
        (docs/rules/scheduler-nodenumaresource.md#score)."""
        st = self._cycle(state, pod, snapshot).pod
        if st.skip:
            return np.zeros(snapshot.n, np.int64)
        names = [r for r, _ in self.scoring.resources if r in snapshot.col]
        req = {r: snapshot.requested[snapshot.col[r]] for r in names}
        alloc = {r: snapshot.allocatable[snapshot.col[r]] for r in names}
        return score_rows(self.scoring, st, req, alloc, score_rows_of(snapshot, self.cache, st))

    # --- Reserve / Unreserve / PreBind --------------------------------------------------------------
    def _node_facts(self, cyc: _Cycle, node_name: str) -> NodeFacts | None:
        snap = cyc.snapshot
        row = None if snap is None else snap.index.get(node_name)
        return None if snap is None or row is None else self.facts(snap, row)

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Allocates the cpuset of a binding pod and records it as assumed
        (docs/rules/scheduler-nodenumaresource.md#reserve)."""
        cyc = self._cycle(state, pod, None)
        st = cyc.pod
        if st.skip:
            return Status.success()
        facts = self._node_facts(cyc, node_name)
        if facts is None:
            return Status.error(f"getting node {node_name!r} from Snapshot: not found", plugin=NAME)
        bind, status = request_cpu_bind(st, facts.node_bind_policy)
        if status is not None:
            return status
        if not bind:
            return Status.success()
        if facts.options is None or not facts.options.topology.valid:
            return Status.error(ERR_INVALID_CPU_TOPOLOGY, plugin=NAME)
        try:
            cpus = allocate_cpuset(
                facts.options, facts.allocation, pod_request(st, facts, self.default_strategy)
            )
        except AllocationError as e:
            return Status.unschedulable(str(e), plugin=NAME)
        cyc.allocation = PodAllocation(cpus, st.exclusive_policy)
        cyc.node = node_name
        self.cache.assign(node_name, pod_id(pod), cyc.allocation)
        return Status.success()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        cyc = state.get(STATE_KEY)
        if isinstance(cyc, _Cycle) and cyc.allocation is not None:
            self.cache.release(node_name, pod_id(pod))
            cyc.allocation = None

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """``resource-status`` and the ``resource-spec`` write-back, on a new annotations dict (the
        binder patches it; docs/rules/scheduler-nodenumaresource.md#prebind)."""
        cyc = state.get(STATE_KEY)
        if not isinstance(cyc, _Cycle) or cyc.pod.skip or cyc.allocation is None:
            return Status.success()
        facts = self._node_facts(cyc, node_name)
        node_policy = facts.node_bind_policy if facts is not None else ""
        bind, status = request_cpu_bind(cyc.pod, node_policy)
        if status is not None:
            return status
        annotations = annotations_after(pod_annotations(pod), cyc.pod, cyc.allocation.cpus, node_policy, bind)
        pod["metadata"]["annotations"] = annotations
        return Status.success()
