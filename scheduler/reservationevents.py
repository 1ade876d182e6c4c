"""Reservation wired into koord-scheduler (docs/rules/scheduler-reservation.md#wiring): the Reservation
informer's events reach every profile's ``Reservation`` plugin, the controller and, as its **reserve pod**,
the event router (a schedulable reservation's reserve pod is queued under its scheduler name, an
Available one's sits in the scheduler cache on its node, a finished or deleted one's leaves); binding a
reserve pod is the plugin's Bind (the reservation's status Available on the node), an unschedulable one
is written as the reservation's Scheduled condition, and an owner's ``reservation-allocated`` annotation
(written by PreBind) reaches the API object before its Binding. The controller runs on the leader.
Imports: the standard library, the kubernetes client, kube.supervise, apis (pod, reservation,
reservation_pod), scheduler (framework, gateway, plugins.reservation, reservationcontroller, scheduler).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from apis.pod import pod_annotations
from apis.reservation import (
    ANNOTATION_RESERVATION_NAME,
    is_failed,
    is_succeeded,
    parse_reservation,
)
from apis.reservation_pod import is_reserve_pod, new_reserve_pod
from kube.supervise import CrashHook, SupervisedThread, supervise
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Pod
from scheduler.framework.status import Status
from scheduler.gateway import EventRouter, UnschedulableReporter
from scheduler.plugins.reservation.plugin import Reservation
from scheduler.reservationcontroller import ReservationController, StatusWriter
from scheduler.scheduler import Binder

Obj = Mapping[str, Any]


def reserve_pod(obj: Obj) -> Pod | None:
    """The reserve pod the scheduler holds for a Reservation object; None when it is finished
    (Succeeded or Failed: its room is free) or does not parse."""
    try:
        r = parse_reservation(obj)
    except ValueError:
        return None
    if is_succeeded(r) or is_failed(r):
        return None
    pod: Pod = new_reserve_pod(r)  # type: ignore[assignment]
    return pod


class ReservationEvents:
    """The Reservation informer's handlers, and the pod informer's for the controller's owners."""

    def __init__(
        self,
        plugins: Sequence[Reservation],
        router: EventRouter,
        lock: AbstractContextManager[Any],
        controller: ReservationController,
    ) -> None:
        self.plugins, self.router, self.lock, self.controller = plugins, router, lock, controller

    def reservation_add(self, obj: Obj) -> None:
        with self.lock:
            for p in self.plugins:
                p.on_reservation_add(obj)
        self.controller.reservation_upsert(obj)
        pod = reserve_pod(obj)
        if pod is not None:
            self.router.pod_add(pod)

    def reservation_update(self, old: Obj, new: Obj) -> None:
        with self.lock:
            for p in self.plugins:
                p.on_reservation_update(old, new)
        self.controller.reservation_upsert(new)
        before, after = reserve_pod(old), reserve_pod(new)
        if before is None and after is not None:
            self.router.pod_add(after)
        elif before is not None and after is None:
            self.router.pod_delete(before)
        elif before is not None and after is not None and before != after:
            # Only a changed reserve pod is an update: a status-only change (a Scheduled condition's
            # probe time) must not send a parked reserve pod back to the active queue.
            self.router.pod_update(before, after)

    def reservation_delete(self, obj: Obj) -> None:
        with self.lock:
            for p in self.plugins:
                p.on_reservation_delete(obj)
        self.controller.reservation_delete(obj)
        pod = reserve_pod(obj)
        if pod is not None:
            self.router.pod_delete(pod)

    # --- pods (the controller's owners) -----------------------------------------------------------
    def pod_add(self, pod: Pod) -> None:
        self.controller.pod_upsert(pod)

    def pod_update(self, old: Pod, new: Pod) -> None:
        self.controller.pod_upsert(new)

    def pod_delete(self, pod: Pod) -> None:
        self.controller.pod_delete(pod)


class ReservationBinder:
    """Reserve pods are bound by the Reservation plugin's Bind (no Binding: a status patch); other pods
    through ``binder`` (which carries an owner's ``reservation-allocated`` annotation to the API:
    scheduler.annotationbinder)."""

    def __init__(self, binder: Binder, plugin: Reservation) -> None:
        self.binder, self.plugin = binder, plugin

    def bind(self, pod: Pod, node: str) -> Status:
        if is_reserve_pod(pod):
            return self.plugin.bind(CycleState(time.time()), pod, node)
        return self.binder.bind(pod, node)


class ReservationWiring:
    """What SchedulerService adds when a profile enables Reservation: the status writer behind every
    plugin's Bind, the binder and unschedulable reporter wrappers, the informer handlers and the
    controller (run while ``leading()``)."""

    def __init__(self, api: Any, plugins: Sequence[Reservation], leading: Callable[[], bool]) -> None:
        self.api, self.plugins = api, list(plugins)
        self.writer = StatusWriter(api)
        for p in self.plugins:
            p.status_writer = self.writer.available
        self.node_exists: Callable[[str], bool] = lambda name: True  # the node informer's, at start
        self.controller = ReservationController(self.writer, lambda n: self.node_exists(n), leading)
        self.events: ReservationEvents | None = None

    def binder(self, inner: Binder) -> Binder:
        return ReservationBinder(inner, self.plugins[0])

    def reporter(self, inner: UnschedulableReporter) -> Callable[[Pod, Status], None]:
        """Unschedulable reserve pods become their reservation's Scheduled condition (on the reporter's
        pool); other pods go to ``inner``."""

        def report(pod: Pod, status: Status) -> None:
            if not is_reserve_pod(pod):
                inner(pod, status)
                return
            info = self.plugins[0].cache.get_by_name(
                str(pod_annotations(pod).get(ANNOTATION_RESERVATION_NAME, ""))
            )
            if info is not None:
                inner.pool.submit(self.writer.unschedulable, info.reservation, status.message())

        return report

    def attach(self, router: EventRouter, lock: AbstractContextManager[Any]) -> ReservationEvents:
        self.events = ReservationEvents(self.plugins, router, lock, self.controller)
        return self.events

    def start(
        self, stop: threading.Event, node_exists: Callable[[str], bool], on_crash: CrashHook | None
    ) -> SupervisedThread:
        self.node_exists = node_exists
        return supervise("reservation-controller", self.controller.run, stop, on_crash=on_crash)
