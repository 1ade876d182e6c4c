"""The LoadAwareScheduling plugin (docs/rules/scheduler.md#loadawarescheduling): PreFilter, Filter,
Score, Reserve/Unreserve and EnqueueExtensions, fed by the scheduler's informers through
``on_node_metric`` and ``on_pod_*``.

``filter``/``score`` are the readable per-node forms (``reference``, reading the caches directly);
``filter_all``/``score_all`` evaluate every snapshot row at once from the aligned arrays of ``table``
(rows or pods outside the range where those arrays are exact go through the per-node forms).
The Filter/Score clock is ``CycleState.now``; the injectable ``clock`` stamps assignments (Reserve, pods
seen by the informer without a PodScheduled condition).
Imports: the standard library, numpy, apis (nodemetric, pod, qos), scheduler.framework,
scheduler.plugins.loadaware.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from apis.nodemetric import NodeMetric
from apis.pod import is_daemonset_pod
from apis.qos import PriorityClass
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import ClusterEvent, FilterResult, IntArray
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.loadaware.args import LoadAwareSchedulingArgs
from scheduler.plugins.loadaware.assign_cache import AssignCache
from scheduler.plugins.loadaware.estimator import Estimator
from scheduler.plugins.loadaware.nodemetric_cache import NodeMetricCache
from scheduler.plugins.loadaware.profile import node_capacity, node_profile
from scheduler.plugins.loadaware.reference import (
    NAME,
    REASON_AGGREGATED,
    REASON_EXPIRED,
    REASON_USAGE,
    IncomingPod,
    filter_node,
    score_node,
)
from scheduler.plugins.loadaware.table import RowTable

Pod = dict[str, Any]
STATE_KEY: Final = f"{NAME}/preFilter"

__all__ = ["NAME", "LoadAwareScheduling"]


class _PodState:
    """PreFilter's result for one pod: the incoming-pod facts, whether Score's arrays are exact for its
    estimate, and the snapshot PreFilter synchronised the table with (a snapshot does not change during
    a cycle, so Filter and Score then only re-check the caches)."""

    __slots__ = ("exact", "incoming", "synced")

    def __init__(self, incoming: IncomingPod, exact: bool | None = None) -> None:
        self.incoming = incoming
        self.synced: Snapshot | None = None
        if exact is None:
            np.asarray(incoming.estimate, np.int64)  # an estimate beyond int64 fails here, as it did
            exact = RowTable.exact_pod(incoming.estimate)
        self.exact = exact


class LoadAwareScheduling:
    """``LoadAwareScheduling(args, clock=time.time)``; ``args`` may be the v1 JSON dict (None = defaults).
    Invalid args raise ``ArgsError`` (the plugin is not constructed)."""

    def __init__(
        self,
        args: LoadAwareSchedulingArgs | Mapping[str, Any] | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.args = (
            args if isinstance(args, LoadAwareSchedulingArgs) else LoadAwareSchedulingArgs.from_dict(args)
        )
        self.clock = clock
        self.resources = self.args.resources
        self.estimator = Estimator(self.args, self.resources)
        self.metrics = NodeMetricCache(self.resources)
        self.assign = AssignCache(self.args, self.estimator, self.metrics)
        self.table = RowTable(self.args, self.resources, self.metrics, self.assign)
        r = len(self.resources)
        self.weights: npt.NDArray[np.int64] = np.array(
            [self.args.resource_weights.get(x, 0) for x in self.resources], np.int64
        )
        self.weight_sum = int(self.weights.sum())
        unit = r >= 2 and bool((self.weights == 1).all())
        self.weights_f: npt.NDArray[np.float64] | None = None if unit else self.weights.astype(np.float64)
        self.score_disabled = self.args.dominant_resource_weight == 0 and not self.weights.any()
        self.statuses: tuple[Status, ...] = (
            Status.unschedulable(REASON_EXPIRED, plugin=NAME),
            *(Status.unschedulable(REASON_USAGE.format(x), plugin=NAME) for x in self.resources),
            *(Status.unschedulable(REASON_AGGREGATED.format(x), plugin=NAME) for x in self.resources),
        )
        assert len(self.statuses) == 1 + 2 * r
        self.status_index = {st.reasons: k for k, st in enumerate(self.statuses)}
        self.pod_facts: dict[tuple[Any, ...], tuple[IncomingPod, bool]] = {}

    @property
    def name(self) -> str:
        return NAME

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent("Pod", "Delete"),
            ClusterEvent("NodeMetric", "Add"),
            ClusterEvent("NodeMetric", "Update"),
            ClusterEvent("NodeMetric", "Delete"),
        ]

    # --- informer events --------------------------------------------------------------------------
    def on_node_metric(self, name: str, nm: NodeMetric | None) -> None:
        """NodeMetric added/updated (``nm``) or deleted (None); recomputes that node's sums."""
        self.metrics.update(name, nm)
        self.assign.recompute(name)

    def on_pod_add(self, pod: Pod) -> None:
        self.assign.on_add(pod, self.clock())

    def on_pod_update(self, old: Pod | None, new: Pod) -> None:
        self.assign.on_update(old, new, self.clock())

    def on_pod_delete(self, pod: Pod) -> None:
        self.assign.on_delete(pod)

    # --- PreFilter --------------------------------------------------------------------------------
    def _state(self, state: CycleState, pod: Pod) -> _PodState:
        found = state.get(STATE_KEY)
        if isinstance(found, _PodState):
            return found
        ps = self._pod_state(pod)
        state.write(STATE_KEY, ps)
        return ps

    def _pod_state(self, pod: Pod) -> _PodState:
        """A fresh state; the checked facts of recent estimates are reused (the memo holds only facts
        whose int64 check passed)."""
        estimate, priority_class = self.estimator.facts(pod)
        key = (estimate, priority_class, is_daemonset_pod(pod))
        known = self.pod_facts.get(key)
        if known is not None:
            return _PodState(*known)
        ps = _PodState(
            IncomingPod(estimate=estimate, prod=priority_class is PriorityClass.PROD, daemonset=key[2])
        )
        if len(self.pod_facts) >= 4096:
            self.pod_facts.clear()
        self.pod_facts[key] = (ps.incoming, ps.exact)
        return ps

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        """Estimates the pod once per cycle and brings the per-node arrays up to date."""
        ps = self._pod_state(pod)
        state.write(STATE_KEY, ps)
        self.table.sync(snapshot)
        ps.synced = snapshot
        return Status.success()

    def _sync(self, ps: _PodState, snapshot: Snapshot) -> None:
        """The table up to date: fully unless PreFilter of this cycle synced this snapshot, else only the
        nodes whose metric or pods changed since."""
        if ps.synced is snapshot and self.table.snapshot is snapshot:
            self.table.sync_caches()
        else:
            self.table.sync(snapshot)

    # --- Filter -----------------------------------------------------------------------------------
    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> Status:
        info = snapshot.infos[i]
        return filter_node(
            self.args,
            self.resources,
            self._state(state, pod).incoming,
            node_profile(self.args, self.resources, info.node),
            node_capacity(self.resources, info.node),
            self.metrics.get(info.name),
            self.assign.sums_of(info.name),
            state.now,
        )

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        ps = self._state(state, pod)
        if ps.incoming.daemonset:
            return FilterResult.all_pass(snapshot.n)
        self._sync(ps, snapshot)
        which = self.table.filter_which(ps.incoming.estimate, ps.incoming.prod, state.now)
        for i in self.table.irregular:
            st = self.filter(state, pod, snapshot, i)
            which[i] = -1 if st.is_success() else self.status_index[st.reasons]
        return FilterResult(which, self.statuses)

    # --- Score ------------------------------------------------------------------------------------
    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> tuple[int, Status]:
        info = snapshot.infos[i]
        value = score_node(
            self.args,
            self.resources,
            self._state(state, pod).incoming,
            node_capacity(self.resources, info.node),
            self.metrics.get(info.name),
            self.assign.sums_of(info.name),
            state.now,
        )
        return value, Status.success()

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        if self.score_disabled:
            return np.zeros(len(feasible), np.int64)
        ps = self._state(state, pod)
        self._sync(ps, snapshot)
        if not ps.exact:  # an estimate outside the exact range of the arrays: node by node
            return np.array([self.score(state, pod, snapshot, int(i))[0] for i in feasible], np.int64)
        prod_usage = ps.incoming.prod and self.args.score_according_prod_usage
        args = (self.weights_f, self.weight_sum, self.args.dominant_resource_weight)
        full = self.table.scores(ps.incoming.estimate, prod_usage, state.now, *args)
        for i in self.table.irregular:
            full[i] = self.score(state, pod, snapshot, i)[0]
        n = len(full)
        if len(feasible) == n and (n == 0 or (feasible[0] == 0 and feasible[-1] == n - 1)):
            return full  # ascending distinct rows (the framework's contract) covering all: every row
        out: IntArray = full.take(feasible)
        return out

    # --- Reserve ----------------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Assigns the pod to ``node_name`` in the cache (timestamp = the plugin clock)."""
        self.assign.assign(node_name, pod, self.clock())
        return Status.success()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.assign.unassign(node_name, pod)
