"""Coscheduling's effects on the API server (docs/rules/scheduler-coscheduling.md#wiring):

* `GangEvents`: the PodGroup informer's and the pod informer's handlers for the profiles' Coscheduling
  plugins — every pod of a gang reaches the plugin (pending ones too), every PodGroup change, under the
  scheduler's lock — and the status controller's triggers;
* `PodGroupStatusController`: `controllerWorkers` threads syncing a PodGroup's status from the gang
  cache and merge-patching `status` when it changed (docs/rules/scheduler-coscheduling.md#podgroup-status);
  only while `active()` holds (the leader), retried with backoff on any failure (a conflict too).
PreBind's bind-gang annotations reach the API through scheduler.annotationbinder.
Imports: standard library, the kubernetes client, apis, scheduler (framework, scheduler,
plugins.coscheduling).
"""

from __future__ import annotations

import datetime as _dt
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from typing import Any

from kubernetes import client

from apis.podgroup import (
    LABEL_POD_GROUP,
    ZERO_TIME,
    PodGroup,
    PodGroupStatus,
    parse_pod_group,
)
from apis.rfc3339 import format_rfc3339
from scheduler.framework.interfaces import Pod
from scheduler.plugins.coscheduling.cache import utcnow
from scheduler.plugins.coscheduling.plugin import Coscheduling
from scheduler.plugins.coscheduling.podgroup_status import should_enqueue, sync

log = logging.getLogger(__name__)

GROUP, VERSION, PLURAL = "scheduling.sigs.k8s.io", "v1alpha1", "podgroups"


def status_json(st: PodGroupStatus) -> dict[str, Any]:
    out: dict[str, Any] = {
        "phase": st.phase, "occupiedBy": st.occupied_by, "scheduled": st.scheduled,
        "running": st.running, "succeeded": st.succeeded, "failed": st.failed,
    }  # fmt: skip
    if st.schedule_start_time != ZERO_TIME:
        out["scheduleStartTime"] = format_rfc3339(st.schedule_start_time, "scheduleStartTime")
    return out


class PodGroupStatusController:
    """Keys `ns/name` queued once each; workers sync them
    (docs/rules/scheduler-coscheduling.md#podgroup-status)."""

    def __init__(
        self,
        api: Any,
        plugin: Coscheduling,
        lock: AbstractContextManager[Any],
        active: Callable[[], bool] = lambda: True,
        clock: Callable[[], _dt.datetime] = utcnow,
        retry_seconds: float = 1.0,
    ) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.plugin, self.lock, self.active, self.clock = plugin, lock, active, clock
        self.retry_seconds = retry_seconds
        self.groups: dict[str, PodGroup] = {}  # the informer's PodGroups, by key
        self._queued: set[str] = set()
        self._cond = threading.Condition()
        self.patches = 0

    def enqueue(self, key: str) -> None:
        with self._cond:
            pg = self.groups.get(key)
            if pg is None or not should_enqueue(pg) or key in self._queued:
                return
            self._queued.add(key)
            self._cond.notify()

    def _next(self, stop: threading.Event) -> str | None:
        with self._cond:
            while not self._queued:
                if stop.is_set():
                    return None
                self._cond.wait(0.5)
            return self._queued.pop()

    def run(self, stop: threading.Event) -> None:
        """One worker: syncs queued keys while `active()`; a failed sync is queued again after a pause."""
        while not stop.is_set():
            key = self._next(stop)
            if key is None:
                return
            if not self.active():
                self._requeue_later(key, stop)
                continue
            try:
                self.sync(key)
            except Exception as e:  # a conflict, a refused connection: try again
                log.warning("PodGroup %s: status sync failed: %s: %s", key, type(e).__name__, e)
                self._requeue_later(key, stop)

    def _requeue_later(self, key: str, stop: threading.Event) -> None:
        stop.wait(self.retry_seconds)
        with self._cond:
            self._queued.add(key)
            self._cond.notify()

    def sync(self, key: str) -> bool:
        """Patches the PodGroup's status when the sync changes it; True when it patched."""
        with self.lock:
            pg = self.groups.get(key)
            if pg is None or not should_enqueue(pg):
                return False
            status = sync(self.plugin.cache, pg, self.clock())
        if status == pg.status:
            return False
        self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, pg.namespace, PLURAL, pg.name, {"status": status_json(status)}
        )
        self.patches += 1
        return True


class GangEvents:
    """Informer handlers feeding the profiles' Coscheduling plugins and the status controller."""

    def __init__(
        self,
        plugins: Iterable[Coscheduling],
        lock: AbstractContextManager[Any],
        controller: PodGroupStatusController | None,
    ) -> None:
        self.plugins, self.lock, self.controller = list(plugins), lock, controller

    # --- PodGroups ---------------------------------------------------------------------------------------
    def pod_group_add(self, obj: Mapping[str, Any]) -> None:
        self._pod_group(None, obj)

    def pod_group_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        self._pod_group(old, new)

    def pod_group_delete(self, obj: Mapping[str, Any]) -> None:
        pg = _parsed(obj)
        if pg is None:
            return
        with self.lock:
            for p in self.plugins:
                p.on_pod_group(pg, None)
        if self.controller is not None:
            with self.controller._cond:
                self.controller.groups.pop(pg.key, None)

    def _pod_group(self, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> None:
        pg = _parsed(new)
        if pg is None:
            return
        before = None if old is None else _parsed(old)
        with self.lock:
            for p in self.plugins:
                p.on_pod_group(before, pg)
        if self.controller is not None:
            with self.controller._cond:
                self.controller.groups[pg.key] = pg
            self.controller.enqueue(pg.key)

    # --- pods (every one: the router only passes assigned pods to PodEventHandlers) ----------------------
    def pod_add(self, pod: Pod) -> None:
        with self.lock:
            for p in self.plugins:
                p.on_any_pod_add(pod)
        self._requeue_group(pod)

    def pod_update(self, old: Pod, new: Pod) -> None:
        with self.lock:
            for p in self.plugins:
                p.on_any_pod_update(old, new)
        self._requeue_group(new)

    def pod_delete(self, pod: Pod) -> None:
        with self.lock:
            for p in self.plugins:
                p.on_any_pod_delete(pod)

    def _requeue_group(self, pod: Pod) -> None:
        name = ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_POD_GROUP)
        if name and self.controller is not None:
            self.controller.enqueue(f"{(pod.get('metadata') or {}).get('namespace', '')}/{name}")


def _parsed(obj: Mapping[str, Any]) -> PodGroup | None:
    try:
        return parse_pod_group(obj)
    except ValueError as e:
        log.warning("PodGroup ignored: %s", e)
        return None
