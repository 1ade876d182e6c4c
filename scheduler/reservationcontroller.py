"""The Reservation controller of koord-scheduler (docs/rules/scheduler-reservation.md#controller-wiring):
reservations by name and their owner pods (the pods whose ``reservation-allocated`` annotation carries
a reservation's UID, as the pod informer reports them — never Reserve's assumptions), a work queue keyed
by reservation name whose entries are due after the delay ``sync`` returns, the status patched only
when ``sync`` changed it, and the garbage collection every 60 s. It runs on the leader only
(``active()``); standbys keep their store warm. The status writer is also what binds a reserve pod
(Available on the node) and reports an unschedulable one.
Imports: the standard library, the kubernetes client, apis (pod, quantity, reservation, rfc3339),
scheduler (framework, plugins.reservation).
"""

from __future__ import annotations

import datetime as _dt
import heapq
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from apis.pod import pod_key
from apis.quantity import format_resource_list
from apis.reservation import GROUP, Reservation, parse_reservation, set_available, set_unschedulable
from apis.rfc3339 import format_rfc3339
from scheduler.framework.status import Status
from scheduler.plugins.reservation.controller import GC_INTERVAL_S, allocated_uid, gc_due, sync

log = logging.getLogger(__name__)
VERSION: Final = "v1alpha1"
PLURAL: Final = "reservations"


def utcnow() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def status_json(r: Reservation) -> dict[str, Any]:
    """The Reservation's ``status`` as the API stores it (quantities as canonical strings)."""
    return {
        "phase": r.phase,
        "conditions": [dict(c) for c in r.conditions],
        "currentOwners": [dict(o) for o in r.current_owners],
        "nodeName": r.node_name,
        "allocatable": format_resource_list(r.allocatable),
        "allocated": format_resource_list(r.allocated),
    }


class StatusWriter:
    """Writes a Reservation's status through the ``reservations/status`` subresource (a merge patch of
    the whole status: lists and the node replaced)."""

    def __init__(self, api: Any, clock: Callable[[], _dt.datetime] = utcnow) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.clock = clock
        self.patches = 0

    def patch(self, r: Reservation) -> None:
        body = {"status": status_json(r)}
        self.custom.patch_cluster_custom_object_status(GROUP, VERSION, PLURAL, r.name, body)
        self.patches += 1

    def available(self, r: Reservation, node: str) -> Status:
        """Binding a reserve pod: the reservation Available on ``node``."""
        try:
            self.patch(set_available(r, node, format_rfc3339(self.clock())))
        except ApiException as e:
            return Status.error(
                f"reservation {r.name} to {node}: {e.status} {e.reason}", plugin="Reservation"
            )
        return Status.success()

    def unschedulable(self, r: Reservation, message: str) -> None:
        """A reserve pod that found no node: the reservation's Scheduled condition says why."""
        try:
            self.patch(set_unschedulable(r, message, format_rfc3339(self.clock())))
        except ApiException as e:
            if e.status != 404:
                log.warning("Reservation %s: unschedulable status: %s", r.name, e.reason)

    def delete(self, name: str) -> None:
        try:
            self.custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
        except ApiException as e:
            if e.status != 404:
                raise


class ReservationController:
    """Keyed by reservation name; ``run`` is one supervised worker
    (docs/rules/scheduler-reservation.md#controller-wiring)."""

    def __init__(
        self,
        writer: StatusWriter,
        node_exists: Callable[[str], bool],
        active: Callable[[], bool] = lambda: True,
        clock: Callable[[], _dt.datetime] = utcnow,
        retry_seconds: float = 1.0,
    ) -> None:
        self.writer, self.node_exists, self.active, self.clock = writer, node_exists, active, clock
        self.retry_seconds = retry_seconds
        self._cond = threading.Condition()
        self.reservations: dict[str, Reservation] = {}  # by name, from the informer
        self._uids: dict[str, str] = {}  # uid -> name
        self._owners: dict[str, dict[str, Mapping[str, Any]]] = {}  # reservation uid -> pod key -> pod
        self._owner_of: dict[str, str] = {}  # pod key -> reservation uid
        self._due: list[tuple[float, str]] = []  # (monotonic due time, name), a heap
        self._next_gc = time.monotonic() + GC_INTERVAL_S

    # --- informer events --------------------------------------------------------------------------
    def reservation_upsert(self, obj: Mapping[str, Any]) -> None:
        try:
            r = parse_reservation(obj)
        except ValueError as e:
            log.warning("Reservation ignored: %s", e)
            return
        with self._cond:
            old = self.reservations.get(r.name)
            if old is not None and old.uid != r.uid:
                self._uids.pop(old.uid, None)
            self.reservations[r.name] = r
            self._uids[r.uid] = r.name
        self.enqueue(r.name)

    def reservation_delete(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        with self._cond:
            r = self.reservations.pop(str(meta.get("name", "")), None)
            if r is not None:
                self._uids.pop(r.uid, None)

    def pod_upsert(self, pod: Mapping[str, Any]) -> None:
        """An owner is a pod on a node whose ``reservation-allocated`` carries the reservation's UID."""
        uid = allocated_uid(pod) if (pod.get("spec") or {}).get("nodeName") else None
        key = pod_key(pod)
        with self._cond:
            before = self._owner_of.get(key)
            if before is not None and before != uid:
                self._drop_owner(key)
            if uid is not None:
                self._owners.setdefault(uid, {})[key] = pod
                self._owner_of[key] = uid
            names = [self._uids[u] for u in {before, uid} if u is not None and u in self._uids]
        for name in names:
            self.enqueue(name)

    def pod_delete(self, pod: Mapping[str, Any]) -> None:
        with self._cond:
            uid = self._drop_owner(pod_key(pod))
            name = self._uids.get(uid) if uid is not None else None
        if name is not None:
            self.enqueue(name)

    def _drop_owner(self, key: str) -> str | None:
        uid = self._owner_of.pop(key, None)
        if uid is not None:
            owners = self._owners.get(uid, {})
            owners.pop(key, None)
            if not owners:
                self._owners.pop(uid, None)
        return uid

    # --- the work queue ---------------------------------------------------------------------------
    def enqueue(self, name: str, after: float = 0.0) -> None:
        with self._cond:
            heapq.heappush(self._due, (time.monotonic() + after, name))
            self._cond.notify()

    def _next(self, stop: threading.Event) -> str | None:
        """The next due name (a name queued twice is synced once per due entry: cheap, and current)."""
        with self._cond:
            while not stop.is_set():
                now = time.monotonic()
                if self._due and self._due[0][0] <= now:
                    return heapq.heappop(self._due)[1]
                if now >= self._next_gc:
                    return ""
                wait = min(0.5, self._next_gc - now, *(d - now for d, _ in self._due[:1]))
                self._cond.wait(max(wait, 0.01))
        return None

    def run(self, stop: threading.Event) -> None:
        """One worker: syncs due reservations while ``active()``, the GC when due (name "")."""
        while (name := self._next(stop)) is not None:
            if not self.active():
                if name:
                    self.enqueue(name, self.retry_seconds)
                else:
                    self._next_gc = time.monotonic() + GC_INTERVAL_S
                continue
            try:
                if name:
                    self.sync(name)
                else:
                    self._next_gc = time.monotonic() + GC_INTERVAL_S
                    self.gc()
            except Exception as e:  # a conflict, a refused connection: try again
                log.warning("Reservation %s: sync failed: %s: %s", name or "GC", type(e).__name__, e)
                if name:
                    self.enqueue(name, self.retry_seconds)

    def sync(self, name: str) -> bool:
        """One ``sync`` (docs/rules/scheduler-reservation.md#controller): patches the status when it
        changed, queues the reservation again after the delay; True when it patched."""
        with self._cond:
            r = self.reservations.get(name)
            if r is None:
                return False
            pods = [
                p for p in self._owners.get(r.uid, {}).values()
                if (p.get("spec") or {}).get("nodeName") == r.node_name
            ]  # fmt: skip
        nodes = {r.node_name} if r.node_name and self.node_exists(r.node_name) else set()
        new, delay_ns = sync(r, nodes, pods, self.clock())
        patched = new is not r  # sync returns the same object when nothing changed
        if patched:
            self.writer.patch(new)
            with self._cond:  # until the informer brings it back, later syncs start from it
                if self.reservations.get(name) is r:
                    self.reservations[name] = new
        if delay_ns:
            self.enqueue(name, delay_ns / 1e9)
        return patched

    def gc(self) -> list[str]:
        """Deletes what ``gc_due`` says (docs/rules/scheduler-reservation.md#garbage-collection)."""
        now = self.clock()
        with self._cond:
            candidates = list(self.reservations.values())
        gone = [
            r.name for r in candidates
            if gc_due(r, not r.node_name or self.node_exists(r.node_name), now)
        ]  # fmt: skip
        for name in gone:
            self.writer.delete(name)
        return gone
