"""Coscheduling (gang scheduling): a gang's pods are admitted together or not at all
(docs/rules/scheduler-coscheduling.md). The plugin owns the gang cache (fed by pod and PodGroup
events), the gang scheduling context of the group being scheduled, and the extension points: PreEnqueue,
NextPod, BeforePreFilter (also run as PreFilter), PostFilter, AfterPostFilter, Reserve/Unreserve, Permit
(gang-group allow/reject through the framework's waiting pods), PreBind and PostBind. Each point asks
scheduler.plugins.coscheduling.decisions what to do, then does it.

The points koord's framework does not call yet (PreEnqueue, NextPod, AfterPostFilter, the waiting
pods handle) have the signatures docs/rules/scheduler-coscheduling.md#wiring describes.
Imports: the standard library, apis (pod, podgroup), scheduler.framework, this package.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Protocol

from apis.pod import pod_key
from apis.podgroup import BIND_ANNOTATIONS, GANG_MODE_STRICT, PodGroup, gang_name
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import ClusterEvent, Pod
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.plugins.coscheduling import decisions as d
from scheduler.plugins.coscheduling.args import CoschedulingArgs
from scheduler.plugins.coscheduling.cache import GangCache, utcnow
from scheduler.plugins.coscheduling.gang import Gang

NAME: Final = "Coscheduling"
NS_PER_SECOND: Final = 1e9


class WaitingPod(Protocol):
    """A pod parked at Permit (kube's framework.WaitingPod)."""

    @property
    def pod(self) -> Mapping[str, Any]: ...

    def allow(self, plugin: str) -> None: ...

    def reject(self, plugin: str, message: str) -> None: ...


class WaitingPods(Protocol):
    """kube's ``Handle.IterateOverWaitingPods``: the pods parked at Permit now (a copy: allowing or
    rejecting one may remove it)."""

    def waiting_pods(self) -> list[WaitingPod]: ...


class _NoWaitingPods:
    def waiting_pods(self) -> list[WaitingPod]:
        return []


class Coscheduling:
    name = NAME

    def __init__(
        self,
        args: CoschedulingArgs | None = None,
        waiting: WaitingPods | None = None,
        clock: Callable[[], _dt.datetime] = utcnow,
    ) -> None:
        self.args = args or CoschedulingArgs()
        self.cache = GangCache(self.args, clock)
        self.waiting: WaitingPods = waiting or _NoWaitingPods()
        self.context: d.GangSchedulingContext | None = None

    @classmethod
    def from_args(cls, args: Mapping[str, Any] | None) -> Coscheduling:
        return cls(CoschedulingArgs.from_args(args))

    def events_to_register(self) -> list[ClusterEvent]:
        return []  # upstream registers none: gangs are re-activated by the gang cache itself

    # --- informer events (docs/rules/scheduler-coscheduling.md#gang-cache) ------------------------------
    def on_pod_add(self, pod: Pod) -> None:
        self.cache.on_pod_add(pod)

    def on_pod_update(self, old: Pod, new: Pod) -> None:
        self.cache.on_pod_update(old, new)

    def on_pod_delete(self, pod: Pod) -> None:
        self.cache.on_pod_delete(pod)

    def on_pod_group(self, old: PodGroup | None, new: PodGroup | None) -> None:
        """Add (old None), update, or delete (new None)."""
        if new is not None:
            self.cache.on_pod_group_update(old, new)
        elif old is not None:
            self.cache.on_pod_group_delete(old.namespace, old.name)

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
        """BeforePreFilter, until the framework calls it before every PreFilter (the rest of upstream's
        PreFilter only concerns network-topology-aware gangs)."""
        return self.before_pre_filter(state, pod)

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


def set_bind_annotations(pod: Any, info: tuple[str, int] | None) -> None:
    """Sets the four bind-gang annotations to the group id and member count, or deletes them."""
    meta = pod.setdefault("metadata", {})
    annotations = meta.get("annotations")
    if info is None:
        if isinstance(annotations, dict):
            for key in BIND_ANNOTATIONS:
                annotations.pop(key, None)
        return
    if not isinstance(annotations, dict):
        annotations = meta["annotations"] = {}
    group_id, count = info
    for key, value in zip(BIND_ANNOTATIONS, (group_id, str(count), group_id, str(count)), strict=True):
        annotations[key] = value
