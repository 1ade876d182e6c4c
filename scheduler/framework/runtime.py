"""The framework runtime: runs one profile's plugins for a pod over every node of the snapshot.
Each Filter/Score plugin has one form (scheduler.framework.interfaces): a vectorised plugin sees
every row at once; a per-node plugin is called only for the rows the earlier filters left feasible
(the first rejecting plugin decides a node's status, so the result is the same as calling every
plugin on every node).

Kubernetes semantics kept: PreFilter, then Filter where a node's status is that of the first plugin
that rejects it; the FitError message `0/N nodes are available: <count> <reason>, ….` with the
histogram sorted as strings; no scoring when a single node is feasible; a score is the weighted sum
of the plugins' scores; among equal top scores one node is drawn uniformly at random, as kube's
`selectHost` does (docs/architecture.md#ties-between-nodes), from the framework's `rng`: seeded, the
draws repeat, so `koord simulate` stays reproducible. Without an `rng` the first of the tied nodes in
name order wins (the oracles' and unit tests' deterministic mode). With `percentage_of_nodes_to_score`
set, Filter stops at kube's number of feasible nodes, from a start that rotates pod after pod
(scheduler.framework.sampling, docs/architecture.md#sampling-nodes); unset, every node is filtered.
Imports: standard library, numpy, scheduler.framework.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, cast

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import (
    AfterPostFilterPlugin,
    BeforePreFilterPlugin,
    BindPlugin,
    FilterAllPlugin,
    FilterPlugin,
    IntArray,
    NextPodPlugin,
    NodeInfoTransformer,
    NormalizeScorePlugin,
    PermitPlugin,
    Plugin,
    Pod,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    ScoreAllPlugin,
    ScorePlugin,
    SessionPlugin,
)
from scheduler.framework.points import ExtensionPoints, filter_rows
from scheduler.framework.points import score_weights as checked_weights
from scheduler.framework.results import (
    Rejections,
    ScheduleResult,
    fit_error_message,
    record_rejections,
    select_best,
)
from scheduler.framework.sampling import filter_window, num_feasible_nodes_to_find
from scheduler.framework.scoresum import weighted_total
from scheduler.framework.snapshot import NodeInfo, Snapshot
from scheduler.framework.status import Code, Status

if TYPE_CHECKING:  # nominated.py builds on this module
    from scheduler.framework.nominated import NominatedPods

__all__ = ["Framework", "Rejections", "ScheduleResult", "fit_error_message", "select_best"]


class Framework:
    """One scheduling profile: its plugins in order and the score weight of each score plugin."""

    def __init__(
        self,
        plugins: Sequence[Plugin],
        score_weights: Mapping[str, int] | None = None,
        observer: Callable[[str, str, float], None] | None = None,
        rng: random.Random | None = None,
        points: Mapping[str, Sequence[str]] | None = None,
        nominated: NominatedPods | None = None,
        percentage_of_nodes_to_score: int | None = None,
    ) -> None:
        """`observer(plugin, extension_point, seconds)` receives every Filter and Score call's duration;
        `rng` draws among equal top scores (None: the first in name order). `points` names the plugins
        of each extension point in order (a profile's lists); without it, or for a point it does not
        list, every plugin implementing the point runs there, in `plugins` order. `nominated`: the
        scheduler's nominated pods, which every node's Filter counts
        (docs/rules/scheduler-preemption.md#nominated-pods). `percentage_of_nodes_to_score`: None
        filters every node; 0..100 samples as kube-scheduler does (docs/architecture.md#sampling-nodes)."""
        if percentage_of_nodes_to_score is not None and not 0 <= percentage_of_nodes_to_score <= 100:
            raise ValueError(f"percentageOfNodesToScore={percentage_of_nodes_to_score}: must be in 0..100")
        self.percentage = percentage_of_nodes_to_score
        self.next_start = 0  # kube's nextStartNodeIndex: where the next pod's Filter walk begins
        self.plugins = list(plugins)
        self.nominated = nominated
        self.observer = observer
        self.rng = rng
        names = [p.name for p in self.plugins]
        if len(set(names)) != len(names):
            raise ValueError(f"plugins: duplicate names in {names}")
        weights = dict(score_weights or {})
        for p in self.plugins:
            if isinstance(p, FilterPlugin) and isinstance(p, FilterAllPlugin):
                raise ValueError(f"plugin {p.name}: implements both filter and filter_all (one form only)")
            if isinstance(p, ScorePlugin) and isinstance(p, ScoreAllPlugin):
                raise ValueError(f"plugin {p.name}: implements both score and score_all (one form only)")
        at = ExtensionPoints(self.plugins, points)
        self.pre_filters: list[PreFilterPlugin] = at.get("preFilter", PreFilterPlugin)
        self.filters: list[FilterPlugin | FilterAllPlugin] = at.get("filter", FilterPlugin | FilterAllPlugin)
        self.pre_scores: list[PreScorePlugin] = at.get("preScore", PreScorePlugin)
        self.scores: list[ScorePlugin | ScoreAllPlugin] = at.get("score", ScorePlugin | ScoreAllPlugin)
        self.reserves: list[ReservePlugin] = at.get("reserve", ReservePlugin)
        self.post_filters: list[PostFilterPlugin] = at.get("postFilter", PostFilterPlugin)
        self.permits: list[PermitPlugin] = at.get("permit", PermitPlugin)
        self.pre_binds: list[PreBindPlugin] = at.get("preBind", PreBindPlugin)
        self.binds: list[BindPlugin] = at.get("bind", BindPlugin)
        self.post_binds: list[PostBindPlugin] = at.get("postBind", PostBindPlugin)
        # The points that surround the cycle (docs/architecture.md#gated-pods): PreEnqueue is a
        # configured point; NextPod, BeforePreFilter and AfterPostFilter run for every plugin of the
        # profile that implements them, as Koordinator's framework extender does.
        self.pre_enqueues: list[PreEnqueuePlugin] = at.get("preEnqueue", PreEnqueuePlugin)
        self.next_pods: list[NextPodPlugin] = [p for p in self.plugins if isinstance(p, NextPodPlugin)]
        self.before_pre_filters: list[BeforePreFilterPlugin] = [
            p for p in self.plugins if isinstance(p, BeforePreFilterPlugin)
        ]
        self.after_post_filters: list[AfterPostFilterPlugin] = [
            p for p in self.plugins if isinstance(p, AfterPostFilterPlugin)
        ]
        self.transformers: list[NodeInfoTransformer] = [
            p for p in self.plugins if isinstance(p, NodeInfoTransformer)
        ]
        # Run by the scheduling loop between cycles (docs/rules/scheduler-jobreservation.md#sessions).
        self.sessions: list[SessionPlugin] = [p for p in self.plugins if isinstance(p, SessionPlugin)]
        self.weights = checked_weights(self.scores, weights)
        # Protocol isinstance checks cost tens of microseconds: decide capabilities once, not per pod.
        self._normalizers: list[NormalizeScorePlugin | None] = [
            p if isinstance(p, NormalizeScorePlugin) else None for p in self.scores
        ]
        self._filter_all = [p if isinstance(p, FilterAllPlugin) else None for p in self.filters]
        self._score_all = [p if isinstance(p, ScoreAllPlugin) else None for p in self.scores]
        self._normalised: dict[tuple[int, int], int] = {}  # uniform scores normalised (scoresum.py)

    # --- filtering --------------------------------------------------------------------------------
    def pre_enqueue(self, pod: Pod) -> Status:
        """The first PreEnqueue refusal, or success."""
        for p in self.pre_enqueues:
            st = p.pre_enqueue(pod)
            if not st.is_success():
                return st.with_plugin(p.name)
        return Status.success()

    def next_pod(self) -> Pod | None:
        for p in self.next_pods:
            pod = p.next_pod()
            if pod is not None:
                return pod
        return None

    def _pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        for b in self.before_pre_filters:
            st = b.before_pre_filter(state, pod)
            if not st.is_success() and not st.is_skip():
                return st.with_plugin(b.name)
        for p in self.pre_filters:
            st = p.pre_filter(state, pod, snapshot)
            if not st.is_success() and not st.is_skip():
                return st.with_plugin(p.name)
        return Status.success()

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> tuple[IntArray, Rejections]:
        """Feasible rows (ascending) and why the others were rejected."""
        n = snapshot.n
        if not self.filters:
            return np.arange(n, dtype=np.int64), Rejections.none(snapshot.names)
        rejected_by = np.full(n, -1, np.int32)  # index into `found` of the first rejecting status
        found: list[Status] = []
        for p, vectorised in zip(self.filters, self._filter_all, strict=True):
            t0 = time.perf_counter()
            if vectorised is not None:
                res = vectorised.filter_all(state, pod, snapshot)
            else:
                res = filter_rows(
                    cast(FilterPlugin, p), state, pod, snapshot, np.flatnonzero(rejected_by < 0)
                )
            if self.observer is not None:
                self.observer(p.name, "Filter", time.perf_counter() - t0)
            record_rejections(res, p.name, rejected_by, found)
        feasible = np.flatnonzero(rejected_by < 0)
        return feasible, Rejections(rejected_by, tuple(found), snapshot.names)

    # --- scoring ----------------------------------------------------------------------------------
    def _pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> Status:
        for p in self.pre_scores:
            st = p.pre_score(state, pod, snapshot, feasible)
            if not st.is_success() and not st.is_skip():
                return st.with_plugin(p.name)
        return Status.success()

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        """The weighted sum of the plugins' scores of the feasible rows (in `feasible`'s order)."""
        return weighted_total(
            self.scores, self.weights, self._normalizers, self._score_all, self.observer,
            state, pod, snapshot, feasible, self._normalised,
        )  # fmt: skip

    # --- one pod ------------------------------------------------------------------------------------
    def schedule(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> ScheduleResult:
        """Picks a node for pod (no side effects; Reserve is separate). The node transformers' NodeInfos
        stand in for the snapshot's during the cycle (docs/architecture.md#node-transformers)."""
        if not self.transformers:
            return self._schedule(state, pod, snapshot)
        originals: dict[str, NodeInfo] = {}
        for t in self.transformers:
            changed = t.transform_node_infos(state, pod, snapshot)
            for info in changed:
                originals.setdefault(info.name, snapshot.infos[snapshot.index[info.name]])
            if changed:
                snapshot.refresh(changed)
        try:
            return self._schedule(state, pod, snapshot)
        finally:
            if originals:
                snapshot.refresh(list(originals.values()))

    def _schedule(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> ScheduleResult:
        n = snapshot.n
        if n == 0:
            return ScheduleResult(None, Status.unschedulable("0/0 nodes are available."))
        st = self._pre_filter(state, pod, snapshot)
        if st.is_rejected():
            # As kube-scheduler 1.20: every node gets the PreFilter's status, the pod a FitError
            # (`0/N nodes are available: N <reason>.`) and PostFilter its chance.
            rejections = Rejections(np.zeros(n, np.int32), (st,), snapshot.names)
            msg = fit_error_message(n, [st] * n)
            result = ScheduleResult(None, Status.unschedulable(msg), evaluated=n, rejections=rejections)
            result.nominated = self.post_filter(state, pod, snapshot, rejections, msg)
            return result
        if not st.is_success():  # an error: reported as it is
            return ScheduleResult(None, st, evaluated=n)
        k = n if self.percentage is None else num_feasible_nodes_to_find(n, self.percentage)
        if k < n:
            feasible, rejections, evaluated = self._filter_sampled(state, pod, snapshot, k)
        else:
            feasible, rejections = self._filter_every(state, pod, snapshot)
            evaluated = n
        error = rejections.first_error()
        if error is not None:
            return ScheduleResult(None, error, evaluated=evaluated, rejections=rejections)
        if len(feasible) == 0:
            msg = fit_error_message(n, rejections.as_dict().values())
            result = ScheduleResult(None, Status.unschedulable(msg), evaluated=n, rejections=rejections)
            result.nominated = self.post_filter(state, pod, snapshot, rejections, msg)
            return result
        if len(feasible) == 1:
            only = snapshot.names[int(feasible[0])]
            return ScheduleResult(only, Status.success(), 1, evaluated, rejections)
        st = self._pre_score(state, pod, snapshot, feasible)
        if not st.is_success():
            return ScheduleResult(None, st, len(feasible), evaluated, rejections)
        scores = self.score_all(state, pod, snapshot, feasible)
        best = int(feasible[select_best(scores, self.rng, snapshot.name_rank.take(feasible))])
        return ScheduleResult(snapshot.names[best], Status.success(), len(feasible), evaluated, rejections)

    def _filter_every(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> tuple[IntArray, Rejections]:
        feasible, rejections = self.filter_all(state, pod, snapshot)
        if self.nominated:  # only nodes holding a nominated pod are evaluated again
            from scheduler.framework.nominated import filter_with_nominated  # (it imports this module)

            feasible, rejections = filter_with_nominated(
                self, state, pod, snapshot, feasible, rejections, self.nominated
            )
        return feasible, rejections

    def _filter_sampled(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, k: int
    ) -> tuple[IntArray, Rejections, int]:
        """Filter until k feasible rows are found from the rotating start: the rows, their statuses,
        and how many rows were processed. With none found it is the full pass, to the status: every
        row was processed, and the FitError and PostFilter see exactly what they see without sampling."""
        n = snapshot.n
        start = self.next_start % n
        check = None
        if self.nominated:
            from scheduler.framework.nominated import NominatedRows  # (it imports this module)

            check = NominatedRows(self, state, pod, snapshot, self.nominated)
        win = filter_window(
            self.filters, self._filter_all, self.observer, state, pod, snapshot, k, start, check
        )
        if len(win.feasible) == 0:
            feasible, rejections = self._filter_every(state, pod, snapshot)
            return feasible, rejections, n
        self.next_start = (start + win.processed) % n
        return win.feasible, Rejections(win.which, tuple(win.statuses), snapshot.names), win.processed

    def post_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, rejections: Rejections, fit_error: str = ""
    ) -> str | None:
        """Runs PostFilter plugins (e.g. preemption) until one succeeds; a success may name the node
        the pod is nominated to (in its first reason). Returns that node, or None. Then every
        AfterPostFilter plugin, whatever PostFilter answered, with the cycle's FitError text."""
        nominated = None
        if self.post_filters:
            statuses = rejections.as_dict()
            for p in self.post_filters:
                st = p.post_filter(state, pod, snapshot, statuses)
                if st.is_success():
                    nominated = st.reasons[0] if st.reasons else None
                    break
                if st.code == Code.ERROR:  # kube: anything but Success or Unschedulable ends PostFilter
                    break
        for a in self.after_post_filters:
            a.after_post_filter(state, pod, fit_error)
        return nominated

    # --- after a node is chosen -----------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: Pod, node: str) -> Status:
        """Runs Reserve in order; on a failure runs Unreserve of every reserve plugin in reverse."""
        for p in self.reserves:
            st = p.reserve(state, pod, node)
            if not st.is_success():
                self.unreserve(state, pod, node)
                return st.with_plugin(p.name)
        return Status.success()

    def unreserve(self, state: CycleState, pod: Pod, node: str) -> None:
        for p in reversed(self.reserves):
            p.unreserve(state, pod, node)

    def permit(self, state: CycleState, pod: Pod, node: str) -> tuple[Status, float]:
        """Runs Permit plugins: the first rejection wins; otherwise WAIT (with the longest timeout
        asked for) if any plugin asked to wait, else success."""
        st, waits = self.permit_waits(state, pod, node)
        if st.code != Code.WAIT:
            return st, 0.0
        waiter = max(waits, key=lambda name: waits[name])
        return Status(Code.WAIT, plugin=waiter), waits[waiter]

    def permit_waits(self, state: CycleState, pod: Pod, node: str) -> tuple[Status, dict[str, float]]:
        """Runs Permit plugins: the first rejection wins; otherwise WAIT with the timeout (seconds) of
        each plugin that asked to wait (kube's waitingPod waits for every one of them), else success."""
        waits: dict[str, float] = {}
        for p in self.permits:
            st, timeout = p.permit(state, pod, node)
            if st.code == Code.WAIT:
                waits[p.name] = timeout
            elif not st.is_success() and not st.is_skip():
                return st.with_plugin(p.name), {}
        if not waits:
            return Status.success(), {}
        return Status(Code.WAIT, plugin=next(iter(waits))), waits

    def pre_bind(self, state: CycleState, pod: Pod, node: str) -> Status:
        for p in self.pre_binds:
            st = p.pre_bind(state, pod, node)
            if not st.is_success():
                return st.with_plugin(p.name)
        return Status.success()

    def bind(self, state: CycleState, pod: Pod, node: str) -> Status:
        """The first bind plugin that does not SKIP binds the pod."""
        for p in self.binds:
            st = p.bind(state, pod, node)
            if not st.is_skip():
                return st.with_plugin(p.name)
        return Status.error("no bind plugin bound the pod")

    def post_bind(self, state: CycleState, pod: Pod, node: str) -> None:
        for p in self.post_binds:
            p.post_bind(state, pod, node)
