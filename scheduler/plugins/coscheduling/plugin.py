"""Coscheduling (gang scheduling): a gang's pods are admitted together or not at all
(docs/rules/scheduler-coscheduling.md). The plugin owns the gang cache (fed by pod and PodGroup
events), the gang scheduling context of the group being scheduled, and the extension points: PreEnqueue,
NextPod, BeforePreFilter (also run as PreFilter), PostFilter, AfterPostFilter, Reserve/Unreserve, Permit
(gang-group allow/reject through the framework's waiting pods), PreBind and PostBind. Each point asks
scheduler.plugins.coscheduling.decisions what to do, then does it.

The framework calls each point (docs/rules/scheduler-coscheduling.md#wiring): the plugin follows every
pod of a gang, pending ones too (AnyPodEventHandler), and PodGroups (`on_pod_group`); when an event
completes a gang group it activates one pending member through `activate` (the queue's).
Imports: the standard library, numpy, apis (pod, podgroup), scheduler.framework, this package.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, cast

from apis.pod import pod_key
from apis.podgroup import BIND_ANNOTATIONS, GANG_MODE_STRICT, PodGroup, gang_name
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import (
    ClusterEvent,
    IntArray,
    Pod,
    WaitingPod,
    WaitingPods,
    uniform_scores,
)
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.plugins.coscheduling import decisions as d
from scheduler.plugins.coscheduling.args import CoschedulingArgs
from scheduler.plugins.coscheduling.cache import GangCache, utcnow
from scheduler.plugins.coscheduling.gang import Gang

NAME: Final = "Coscheduling"
NS_PER_SECOND: Final = 1e9
__all__ = ["NAME", "Coscheduling", "WaitingPod", "WaitingPods", "set_bind_annotations"]


class _NoWaitingPods:
    def waiting_pods(self) -> list[WaitingPod]:
        return []


class Coscheduling:
    name = NAME
    bind_annotations: tuple[str, ...] = tuple(BIND_ANNOTATIONS)  # PreBind's bind-gang annotations

    def __init__(
        self,
        args: CoschedulingArgs | None = None,
        waiting: WaitingPods | None = None,
        clock: Callable[[], _dt.datetime] = utcnow,
        activate: Callable[[list[Pod]], object] | None = None,
    ) -> None:
        """`waiting`: the framework's pods held at Permit; `activate`: moves parked pods to the queue's
        activeQ (kube's Handle.Activate)."""
        self.args = args or CoschedulingArgs()
        self.cache = GangCache(self.args, clock)
        self.waiting: WaitingPods = waiting if waiting is not None else _NoWaitingPods()
        self.activate = activate
        self.context: d.GangSchedulingContext | None = None

    @classmethod
    def from_args(
        cls,
        args: Mapping[str, Any] | None,
        waiting: WaitingPods | None = None,
        activate: Callable[[list[Pod]], object] | None = None,
    ) -> Coscheduling:
        return cls(CoschedulingArgs.from_args(args), waiting, activate=activate)

    def events_to_register(self) -> list[ClusterEvent]:
        return []  # upstream registers none: gangs are re-activated by the gang cache itself

    # --- informer events (docs/rules/scheduler-coscheduling.md#gang-cache) ------------------------------
    def on_any_pod_add(self, pod: Pod) -> None:
        self.cache.on_pod_add(pod)
        self._activate_if_ready(self.cache.gang_of(pod) if gang_name(pod) else None)

    def on_any_pod_update(self, old: Pod, new: Pod) -> None:
        self.cache.on_pod_update(old, new)

    def on_any_pod_delete(self, pod: Pod) -> None:
        self.cache.on_pod_delete(pod)

    def on_pod_group(self, old: PodGroup | None, new: PodGroup | None) -> None:
        """Add (old None), update, or delete (new None). An update activates only when it makes the
        gang worth requeueing (docs/rules/scheduler-coscheduling.md#wiring): the status controller's
        own patches must not start a new round at once, skipping the backoff of the member that failed."""
        if new is not None:
            before = self.cache.get(new.key) if old is not None else None
            worth_before = before is not None and _worth_requeue(before)
            self.cache.on_pod_group_update(old, new)
            if not worth_before:
                self._activate_if_ready(self.cache.get(new.key))
        elif old is not None:
            self.cache.on_pod_group_delete(old.namespace, old.name)

    def gang_group_head(self, pod: Pod) -> str | None:
        """The smallest gang id of ``pod``'s gang group once its gang is initialised, else None: the
        shards partition gangs by it (docs/shards.md#gangs). Called on informer threads; reads one
        dict entry and an immutable-once-set list, so no lock is needed."""
        gang = self.cache.gang_of(pod)
        if gang is None or not gang.has_init:
            return None
        return next((gid for gid in gang.gang_group if gid), None)  # sorted: the first non-empty

    def _activate_if_ready(self, gang: Gang | None) -> None:
        """docs/rules/scheduler-coscheduling.md#wiring: a group that now passes the basic check, is not
        being scheduled and has no representative gets one pending member activated (PreEnqueue parked
        the others; NextPod brings them once that one enters scheduling)."""
        if self.activate is None or gang is None or not gang.has_init or gang.group_info.representative:
            return
        if self.context is not None and self.context.group_id == gang.gang_group_id:
            return
        first: Mapping[str, Any] | None = None
        for gid in gang.gang_group:
            member = self.cache.get(gid)
            if member is None or not member.has_init or len(member.children) < member.min_required:
                return
            if first is None and member.pending:
                first = next(iter(member.pending.values()))
        if first is not None:
            self.activate([cast(Pod, first)])

    # --- queue -----------------------------------------------------------------------------------------
    def pre_enqueue(self, pod: Pod) -> Status:
        """docs/rules/scheduler-coscheduling.md#preenqueue"""
        verdict = d.admission(self.cache, pod)
        if verdict.drop_representative and verdict.gang is not None:
            verdict.gang.group_info.delete_if_representative(pod_key(pod))
        if verdict.message:
            return Status.unresolvable(verdict.message, plugin=NAME)
        if verdict.skip_rest or verdict.gang is None:
            return Status.success()
        message = d.pre_enqueue_rest(verdict.gang, self.context, pod)
        if message:
            return Status.unresolvable(message, plugin=NAME)
        verdict.gang.group_info.record_if_no_representative(pod_key(pod))
        return Status.success()

    def next_pod(self) -> Mapping[str, Any] | None:
        """docs/rules/scheduler-coscheduling.md#queue-ordering: the next member of the group being
        scheduled, marked attempted; None (and the context cleared) when none remains."""
        context = self.context
        if context is None:
            return None
        if self.cache.gang_of(context.first_pod) is None:
            self._reject(context.gang_group, d.REASON_GANG_IS_NIL)
            self.context = None
            return None
        pod = d.next_pod(self.cache, context)
        if pod is None:
            self._reject(context.gang_group, d.REASON_ALL_PENDING_ATTEMPTED)
            self.context = None
            return None
        context.attempted.add(pod_key(pod))
        return pod

    # --- PreFilter -------------------------------------------------------------------------------------
    def before_pre_filter(self, state: CycleState, pod: Pod) -> Status:
        """docs/rules/scheduler-coscheduling.md#beforeprefilter"""
        verdict = d.admission(self.cache, pod)
        gang = verdict.gang
        if verdict.drop_representative and gang is not None:
            gang.group_info.delete_if_representative(pod_key(pod))
        if verdict.message:
            return Status.unresolvable(verdict.message, plugin=NAME)
        if verdict.skip_rest or gang is None:
            return Status.success()
        if self.context is None:
            key = pod_key(pod)
            self.context = d.GangSchedulingContext(pod, frozenset(gang.gang_group), gang.gang_group_id, {key})
            gang.group_info.representative = ""
            return Status.success()
        if self.context.failed_message:
            return Status.unresolvable(self.context.failed_message, plugin=NAME)
        return Status.success()

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        """The gang checks run at BeforePreFilter; upstream's PreFilter only concerns
        network-topology-aware gangs (not implemented)."""
        return Status.success()

    # --- PreScore, Score: upstream's act for network-topology-aware gangs only (not implemented) -------
    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> Status:
        return Status.skip()

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        """0 for every row (shared, read-only: the runtime never writes it)."""
        return uniform_scores(snapshot.n, 0)

    # --- PostFilter ------------------------------------------------------------------------------------
    def post_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, statuses: dict[str, Status]
    ) -> Status:
        """docs/rules/scheduler-coscheduling.md#postfilter: no gang preemption; the gang logic is in
        after_post_filter."""
        return Status.unschedulable(plugin=NAME)

    def after_post_filter(self, state: CycleState, pod: Pod, fit_error: str = "") -> Status:
        """docs/rules/scheduler-coscheduling.md#afterpostfilter (``fit_error``: the cycle's FitError)."""
        if not gang_name(pod):
            return Status.unschedulable(plugin=NAME)
        gang = self.cache.gang_of(pod)
        if gang is None:
            message = f"Pod {d.go_quote(pod_key(pod))} cannot find Gang {d.go_quote(gang_name(pod))}"
            return Status.unschedulable(message, plugin=NAME)
        if gang.once_satisfied_and_policy():
            return Status.unschedulable(plugin=NAME)
        message, new = d.failure_message(self.cache, self.context, pod, fit_error)
        if new and self.context is not None:
            self.context.failed_message = message
        if gang.mode == GANG_MODE_STRICT:
            gang.group_info.clear_waiting_gang()
            self._reject(gang.gang_group, message)
            return Status.unschedulable(d.strict_rejection(gang), plugin=NAME)
        return Status.unschedulable(plugin=NAME)

    # --- Reserve, Permit -------------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return Status.success()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        """docs/rules/scheduler-coscheduling.md#unreserve"""
        gang = self.cache.gang_of(pod)
        if gang is None:
            return
        gang.del_assumed(pod)
        message = d.unreserve_rejection(gang, pod)
        if message is not None:
            self._reject(gang.gang_group, message)

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        """docs/rules/scheduler-coscheduling.md#permit (the timeout in seconds)."""
        st, wait_ns = self.permit_ns(pod)
        return st, wait_ns / NS_PER_SECOND

    def permit_ns(self, pod: Pod) -> tuple[Status, int]:
        """WAIT for this gang's wait time (nanoseconds) while any gang of the group is short; else
        allow the whole group."""
        if not gang_name(pod):
            return Status.success(), 0
        gang = self.cache.gang_of(pod)
        if gang is None:
            return Status.unschedulable(d.GANG_NOT_FOUND, plugin=NAME), 0
        gang.add_assumed(pod)
        if d.permit_blockers(self.cache, gang):
            gang.group_info.add_waiting_gang()
            return Status(Code.WAIT, (), NAME), gang.wait_time
        self.allow_gang_group(gang)
        self.context = None  # the group succeeded: d.REASON_GANG_IS_SUCCEED
        return Status.success(), 0

    def allow_gang_group(self, gang: Gang) -> None:
        """Records the group's binding members (once per round) and allows its waiting pods."""
        if not gang.group_info.binding_members:
            gang.group_info.binding_members = d.binding_members(self.cache, gang)
        group = frozenset(gang.gang_group)
        for waiting in self.waiting.waiting_pods():
            if d.in_group(group, waiting.pod):
                waiting.allow(NAME)

    # --- binding ---------------------------------------------------------------------------------------
    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """docs/rules/scheduler-coscheduling.md#prebind: writes (or removes) the bind-gang annotations
        on the pod object being bound."""
        set_bind_annotations(pod, d.bind_annotations(self.cache, pod))
        return Status.success()

    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        gang = self.cache.gang_of(pod)
        if gang is not None:
            gang.add_bound(pod)

    # --- helpers ---------------------------------------------------------------------------------------
    def _reject(self, group: Iterable[str], message: str) -> None:
        members = frozenset(group)
        for waiting in self.waiting.waiting_pods():
            if d.in_group(members, waiting.pod):
                waiting.reject(NAME, message)


def _worth_requeue(gang: Gang) -> bool:
    """Initialised and holding its min children (upstream's isGangWorthRequeue)."""
    return gang.has_init and len(gang.children) >= gang.min_required


def set_bind_annotations(pod: Any, info: tuple[str, int] | None) -> None:
    """Sets the four bind-gang annotations to the group id and member count, or deletes them."""
    meta = pod.setdefault("metadata", {})
    annotations = meta.get("annotations")
    # A copy: the assumed pod shares its annotations with the informer's object.
    if info is None:
        if isinstance(annotations, dict) and any(key in annotations for key in BIND_ANNOTATIONS):
            meta["annotations"] = {k: v for k, v in annotations.items() if k not in BIND_ANNOTATIONS}
        return
    annotations = meta["annotations"] = dict(annotations) if isinstance(annotations, dict) else {}
    group_id, count = info
    for key, value in zip(BIND_ANNOTATIONS, (group_id, str(count), group_id, str(count)), strict=True):
        annotations[key] = value
