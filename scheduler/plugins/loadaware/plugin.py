"""The LoadAwareScheduling plugin (docs/rules/scheduler.md#loadawarescheduling): PreFilter, Filter,
Score, Reserve/Unreserve and EnqueueExtensions, fed by the scheduler's informers through
``on_node_metric`` and ``on_pod_*``.

Filter and Score are vectorised (``rules`` over the ``columns`` view the snapshot keeps aligned to its
rows); rows outside int64's exact range, and pods whose estimate is, are evaluated by the same rules on
Python ints. The Filter/Score clock is ``CycleState.now``; the injectable ``clock`` stamps assignments
(Reserve, pods seen by the informer without a PodScheduled condition).
Imports: the standard library, numpy, apis (nodemetric, pod, qos), scheduler.framework,
scheduler.plugins.loadaware.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from apis.kubeobjects import Pod
from apis.nodemetric import NodeMetric
from apis.pod import is_daemonset_pod
from apis.qos import PriorityClass
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import ClusterEvent, FilterResult, IntArray
from scheduler.framework.rowresults import RowResults
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.loadaware import rules
from scheduler.plugins.loadaware.args import LoadAwareSchedulingArgs
from scheduler.plugins.loadaware.assign_cache import AssignCache
from scheduler.plugins.loadaware.columns import (
    CODE_DTYPE,
    SCORE_DTYPE,
    Block,
    LoadRows,
    exact_estimate,
)
from scheduler.plugins.loadaware.estimator import Estimator
from scheduler.plugins.loadaware.nodemetric_cache import NodeMetricCache
from scheduler.plugins.loadaware.usage import (
    NAME,
    REASON_AGGREGATED,
    REASON_EXPIRED,
    REASON_USAGE,
    IncomingPod,
)

STATE_KEY: Final = f"{NAME}/preFilter"
RESULTS_KEY: Final = f"{NAME}/results"
I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]

__all__ = ["NAME", "LoadAwareScheduling"]


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
        self.weights = [self.args.resource_weights.get(x, 0) for x in self.resources]
        r = len(self.resources)
        self.statuses: tuple[Status, ...] = (
            Status.unschedulable(REASON_EXPIRED, plugin=NAME),
            *(Status.unschedulable(REASON_USAGE.format(x), plugin=NAME) for x in self.resources),
            *(Status.unschedulable(REASON_AGGREGATED.format(x), plugin=NAME) for x in self.resources),
        )
        assert len(self.statuses) == 1 + 2 * r
        # Each snapshot's view and the nodes changed since it was last read: the assign cache's dirty
        # set is handed to every live view, so evaluating a one-row snapshot (preemption, nominated
        # pods) never makes the cluster snapshot's view rebuild its rows
        # (docs/rules/scheduler-preemption.md#filters-on-one-node).
        self._views: weakref.WeakKeyDictionary[Snapshot, tuple[LoadRows, set[str]]] = (
            weakref.WeakKeyDictionary()
        )
        # the live views' pending sets, walked on every read (a snapshot's finalizer drops its own)
        self._pending: dict[int, set[str]] = {}

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

    # --- PreFilter -------------------------------------------------------------------------------
    def incoming(self, state: CycleState, pod: Pod) -> IncomingPod:
        """The pod's estimate and class, once per cycle."""
        found = state.get(STATE_KEY)
        if isinstance(found, IncomingPod):
            return found
        estimate, priority_class = self.estimator.facts(pod)
        incoming = IncomingPod(estimate, priority_class is PriorityClass.PROD, is_daemonset_pod(pod))
        state.write(STATE_KEY, incoming)
        return incoming

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        self.incoming(state, pod)
        return Status.success()

    def rows(self, snapshot: Snapshot) -> LoadRows:
        """The snapshot's view, up to date with the caches: built once per snapshot, then refreshed by
        the nodes whose metric or assigned pods changed since that snapshot's last read."""
        dirty = self.assign.dirty
        if dirty:
            for pending in self._pending.values():
                pending |= dirty
            dirty.clear()
        entry = self._views.get(snapshot)
        if entry is None:
            made: list[LoadRows] = []

            def make() -> LoadRows:
                made.append(LoadRows(self.args, self.resources, self.metrics, self.assign))
                return made[0]

            view = snapshot.view(self, make)  # (a snapshot never replaces a registered view)
            if not made:
                view.rebuild(snapshot)
            names: set[str] = set()
            self._views[snapshot] = (view, names)
            self._pending[id(names)] = names
            weakref.finalize(snapshot, self._pending.pop, id(names), None)
            return view
        view, pending = entry
        if pending:
            view.refresh_names(snapshot, pending)
            pending.clear()
        return view

    # --- Filter / Score ---------------------------------------------------------------------------
    def _evaluate(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> tuple[I32, I64]:
        """Filter's codes (before the expiry rule) and Score's scores (before the freshness rule) of
        every row, once per cycle: both depend on the same estimate. Read-only: they may be the
        view's kept results."""
        found = state.get(RESULTS_KEY)
        if isinstance(found, tuple) and found[0] is snapshot:  # computed on this snapshot's rows
            return found[1]  # type: ignore[no-any-return]
        incoming = self.incoming(state, pod)
        est, prod = incoming.estimate, incoming.prod
        view = self.rows(snapshot)

        def codes(b: Block) -> Any:
            return rules.filter_codes(b, est, prod)

        def scores(b: Block) -> Any:
            return rules.scores(b, self.args, self.weights, est, prod)

        key = (est, prod)
        out = (
            _per_block(view, view.results, key, est, codes, CODE_DTYPE),
            _per_block(view, view.score_results, key, est, scores, SCORE_DTYPE),
        )
        state.write(RESULTS_KEY, (snapshot, out))
        return out

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        incoming = self.incoming(state, pod)
        if incoming.daemonset:
            return FilterResult.all_pass(snapshot.n)
        which = self._evaluate(state, pod, snapshot)[0]
        args = self.args
        if args.filter_expired_node_metrics:  # the expiry rule (docs/rules/scheduler.md#filter)
            k = 1 if incoming.prod else 0
            fresh = self.rows(snapshot).block.freshness(args.node_metric_expiration_seconds, state.now)
            if fresh.count_gone[k]:
                which = which.copy()
                which[fresh.gone[k]] = -1 if args.enable_schedule_when_node_metrics_expired else 0
        return FilterResult(_read_only(which), self.statuses)

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        """Every row's score (the rule costs the same for every row); read-only."""
        full = self._evaluate(state, pod, snapshot)[1]
        # the freshness rule (docs/rules/scheduler.md#score): 0 without a node metric or when it expired
        fresh = self.rows(snapshot).block.freshness(self.args.node_metric_expiration_seconds, state.now)
        if fresh.count_stale:
            full = full.copy()
            full[fresh.stale] = 0
        return _read_only(full)

    # --- Reserve ----------------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Assigns the pod to ``node_name`` in the cache (timestamp = the plugin clock)."""
        self.assign.assign(node_name, pod, self.clock())
        return Status.success()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.assign.unassign(node_name, pod)


def _read_only(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """A read-only view of ``a`` (the view's kept results stay writable for their patches)."""
    out = a.view()
    out.flags.writeable = False
    return out


def _per_block(
    view: LoadRows,
    results: RowResults,
    key: Hashable,
    estimate: tuple[int, ...],
    rule: Callable[[Block], Any],
    dtype: type[Any],
) -> Any:
    """``rule`` over every row (read-only): the int64 block's result kept per ``key`` in ``results``
    (rows rewritten since are re-evaluated by ``rule`` over just those rows) in ``dtype``, the big rows
    (or, for an estimate outside the exact range, every row) evaluated on Python ints."""
    if not exact_estimate(estimate):
        return np.asarray(rule(view.big_block(all_rows=True)), dtype)

    def kept(rows: npt.NDArray[np.intp] | None) -> Any:
        return np.asarray(rule(view.select(rows)), dtype)

    out = results.get(key, kept)
    if view.big:
        out = out.copy()
        out[view.big] = np.asarray(rule(view.big_block()), dtype)
    return out
