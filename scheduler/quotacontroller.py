"""ElasticQuota's effects on the running scheduler (docs/rules/scheduler-elasticquota.md#wiring):

* `QuotaEvents`: the informers' handlers feeding the profiles' ElasticQuota plugins under the scheduler's
  lock — every ElasticQuota (and a ClusterEvent ``ElasticQuota`` for the queue, so pods the quota turned
  away are tried again), every pod (pending ones too: the request counts them), every node (allocatable
  makes the cluster total);
* `QuotaController`: the leader's loops, each run by a supervised thread and idle while `active()` is
  false: the status loop (every second, the merge patch of each quota's status annotations and of
  ``status.used`` when they changed; the special quotas created in ``quotaGroupNamespace`` when missing;
  the per-quota metrics every 10 s) and the overuse revoke (every ``revokePodInterval``: the pods due are
  deleted, as DefaultPreemption deletes its victims, with no PodDisruptionBudget check).
Imports: standard library, the kubernetes client, apis (elasticquota, quantity), scheduler (framework,
plugins.elasticquota, quotametrics).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from apis.elasticquota import (
    ANNOTATION_RUNTIME,
    DEFAULT_QUOTA,
    GROUP,
    LABEL_ALLOW_LENT_RESOURCE,
    LABEL_IS_PARENT,
    LABEL_PARENT,
    PLURAL,
    ROOT_QUOTA,
    SYSTEM_QUOTA,
    VERSION,
)
from apis.quantity import Quantity
from scheduler.framework.interfaces import ClusterEvent, Pod
from scheduler.plugins.elasticquota import resources as r
from scheduler.plugins.elasticquota.plugin import QUOTA_EVENT_RESOURCE, ElasticQuota
from scheduler.quotametrics import QuotaMetrics

log = logging.getLogger(__name__)
AnyObject = Mapping[str, Any]


def _key(obj: AnyObject) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class QuotaController:
    """The leader's status and revoke loops over the first profile's plugin (every profile's plugin holds
    the same quotas and pods)."""

    def __init__(
        self,
        api: Any,
        plugin: ElasticQuota,
        lock: AbstractContextManager[Any],
        active: Callable[[], bool] = lambda: True,
        metrics: QuotaMetrics | None = None,
        status_seconds: float = 1.0,
        metrics_seconds: float = 10.0,
    ) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.plugin, self.lock, self.active, self.metrics = plugin, lock, active, metrics
        self.status_seconds, self.metrics_seconds = status_seconds, metrics_seconds
        self.objects: dict[str, AnyObject] = {}  # the informer's ElasticQuotas, by namespace/name
        self._objects_lock = threading.Lock()
        self.specials_created = False
        self._create_failed: set[str] = set()
        self.patches = 0
        self.revoked: list[str] = []  # namespace/name of every pod the revoke deleted (tests, logs)

    # --- the informer's objects -----------------------------------------------------------------------
    def put(self, obj: AnyObject) -> None:
        with self._objects_lock:
            self.objects[_key(obj)] = obj

    def drop(self, obj: AnyObject) -> None:
        with self._objects_lock:
            self.objects.pop(_key(obj), None)

    def _snapshot(self) -> list[AnyObject]:
        with self._objects_lock:
            return list(self.objects.values())

    # --- the status loop (docs/rules/scheduler-elasticquota.md#status-controller) ----------------------
    def run_status(self, stop: threading.Event) -> None:
        next_metrics = 0.0
        while not stop.wait(self.status_seconds):
            if not self.active():
                continue
            if not self.specials_created:
                self.specials_created = self.ensure_special_quotas()
            self.sync_all()
            if self.metrics is not None and time.monotonic() >= next_metrics:
                self.refresh_metrics()
                next_metrics = time.monotonic() + self.metrics_seconds

    def sync_all(self) -> int:
        """Patches every quota whose annotations or ``status.used`` differ from the plugin's state; a
        failed patch is logged and computed again on the next round. Returns how many were patched."""
        patched = 0
        for obj in self._snapshot():
            with self.lock:
                start = time.perf_counter()
                patch = self.plugin.status_patch(obj)
                self._observe("UpdateQuotaStatus", start)
            if patch is None:
                continue
            meta = obj.get("metadata") or {}
            ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
            try:
                if "status" in patch:
                    self.custom.patch_namespaced_custom_object_status(
                        GROUP, VERSION, ns, PLURAL, name, {"status": patch["status"]}
                    )
                if "metadata" in patch:
                    self.custom.patch_namespaced_custom_object(
                        GROUP, VERSION, ns, PLURAL, name, {"metadata": patch["metadata"]}
                    )
            except ApiException as e:
                if e.status != 404:  # a quota deleted meanwhile has nothing left to write
                    log.warning(
                        "ElasticQuota %s/%s: status patch failed: %s %s", ns, name, e.status, e.reason
                    )
                continue
            patched += 1
        self.patches += patched
        return patched

    def refresh_metrics(self) -> None:
        if self.metrics is not None:
            with self.lock:
                self.metrics.refresh(self.plugin.manager)

    def ensure_special_quotas(self) -> bool:
        """Creates the root, system and default quotas in ``quotaGroupNamespace`` when missing, as upstream
        does (docs/rules/scheduler-elasticquota.md#special-quotas); True once all three exist."""
        args = self.plugin.args
        ns = args.quota_group_namespace
        bodies: dict[str, tuple[dict[str, str], dict[str, str], Mapping[str, Quantity] | None]] = {
            ROOT_QUOTA: (
                {LABEL_IS_PARENT: "true", LABEL_ALLOW_LENT_RESOURCE: "false", LABEL_PARENT: ""},
                {},
                None,
            ),
            SYSTEM_QUOTA: ({}, {}, args.system_quota_group_max),
            DEFAULT_QUOTA: ({}, {}, args.default_quota_group_max),
        }
        done = True
        for name, (labels, notes, maximum) in bodies.items():
            with self._objects_lock:
                present = f"{ns}/{name}" in self.objects
            if present:
                continue
            body: dict[str, Any] = {
                "apiVersion": f"{GROUP}/{VERSION}", "kind": "ElasticQuota",
                "metadata": {"name": name, "namespace": ns, "labels": labels, "annotations": notes},
                "spec": {},
            }  # fmt: skip
            if maximum is not None:
                body["spec"]["max"] = _quantities(maximum)
                notes[ANNOTATION_RUNTIME] = json.dumps(body["spec"]["max"], sort_keys=True)
            try:
                self.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)
                log.info("ElasticQuota %s/%s created", ns, name)
            except ApiException as e:
                if e.status != 409:  # 409: it exists, the informer has not shown it yet
                    # retried every round: said once at warning level
                    level = logging.DEBUG if name in self._create_failed else logging.WARNING
                    log.log(level, "ElasticQuota %s/%s: create failed: %s %s", ns, name, e.status, e.reason)
                    self._create_failed.add(name)
                    done = False
        return done

    # --- the overuse revoke (docs/rules/scheduler-elasticquota.md#overuse-revoke) ----------------------
    def run_revoke(self, stop: threading.Event) -> None:
        interval = max(self.plugin.args.revoke_pod_interval / 1e9, 0.05)
        while not stop.wait(interval):
            if self.active():
                self.revoke_once()

    def revoke_once(self, now_ns: int | None = None) -> int:
        """Deletes the pods the revoke says are due now; returns how many were deleted."""
        with self.lock:
            start = time.perf_counter()
            due = self.plugin.revoke(time.time_ns() if now_ns is None else now_ns)
            self._observe("RevokeOverusedPods", start)
            overused = {}
            for quota in due:
                info = self.plugin.manager.info(quota)
                if info is not None:
                    overused[quota] = (r.to_json(info.used), r.to_json(info.masked_runtime()))
        deleted = 0
        for quota, pods in due.items():
            used, runtime = overused.get(quota, ({}, {}))
            count = 0
            for pod in pods:
                meta = pod.get("metadata") or {}
                ns, name = str(meta.get("namespace") or "default"), str(meta.get("name", ""))
                log.info(
                    "ElasticQuota %s over its runtime (used %s, runtime %s): deleting pod %s/%s",
                    quota, used, runtime, ns, name,
                )  # fmt: skip
                try:
                    self.core.delete_namespaced_pod(name, ns)
                except ApiException as e:
                    if e.status != 404:  # gone already: taken back all the same
                        log.warning("revoking pod %s/%s: %s %s", ns, name, e.status, e.reason)
                        continue
                self.revoked.append(f"{ns}/{name}")
                count += 1
            if self.metrics is not None and count:
                self.metrics.on_revoked(quota, count)
            deleted += count
        return deleted

    def _observe(self, operation: str, start: float) -> None:
        if self.metrics is not None:
            self.metrics.observe(operation, time.perf_counter() - start)


def _quantities(d: Mapping[str, Quantity]) -> dict[str, str]:
    return {name: str(q) for name, q in sorted(d.items())}


class QuotaEvents:
    """Informer handlers feeding the profiles' ElasticQuota plugins (under the scheduler's lock), the
    controller's objects and the queue's ClusterEvents."""

    def __init__(
        self,
        plugins: Iterable[ElasticQuota],
        lock: AbstractContextManager[Any],
        on_event: Callable[[ClusterEvent], None],
        controller: QuotaController | None = None,
        metrics: QuotaMetrics | None = None,
    ) -> None:
        self.plugins, self.lock, self.on_event = list(plugins), lock, on_event
        self.controller, self.metrics = controller, metrics

    def _each(self, operation: str, call: Callable[[ElasticQuota], None]) -> None:
        start = time.perf_counter()
        with self.lock:
            for p in self.plugins:
                call(p)
        if self.metrics is not None:
            self.metrics.observe(operation, time.perf_counter() - start)

    # --- ElasticQuotas ----------------------------------------------------------------------------------
    def quota_add(self, obj: AnyObject) -> None:
        self._quota("OnQuotaAdd", lambda p: p.on_quota_add(obj), obj, "Add")

    def quota_update(self, old: AnyObject, new: AnyObject) -> None:
        self._quota("OnQuotaUpdate", lambda p: p.on_quota_update(old, new), new, "Update")

    def quota_delete(self, obj: AnyObject) -> None:
        self._quota("OnQuotaDelete", lambda p: p.on_quota_delete(obj), obj, "Delete")

    def _quota(
        self, operation: str, call: Callable[[ElasticQuota], None], obj: AnyObject, action: str
    ) -> None:
        try:
            self._each(operation, call)
        except ValueError as e:  # a malformed quota: the webhook's to refuse; the scheduler skips it
            log.warning("ElasticQuota %s ignored: %s", _key(obj), e)
            return
        if self.controller is not None:
            if action == "Delete":
                self.controller.drop(obj)
            else:
                self.controller.put(obj)
        self.on_event(ClusterEvent(QUOTA_EVENT_RESOURCE, action))

    # --- pods (every one, pending ones too) --------------------------------------------------------------
    def pod_add(self, pod: Pod) -> None:
        self._each("OnPodAdd", lambda p: p.on_any_pod_add(pod))

    def pod_update(self, old: Pod, new: Pod) -> None:
        self._each("OnPodUpdate", lambda p: p.on_any_pod_update(old, new))

    def pod_delete(self, pod: Pod) -> None:
        self._each("OnPodDelete", lambda p: p.on_any_pod_delete(pod))

    # --- nodes (allocatable → the cluster total) ---------------------------------------------------------
    def node_add(self, node: AnyObject) -> None:
        name = str((node.get("metadata") or {}).get("name", ""))
        self._each("OnNodeAdd", lambda p: p.on_node(name, node))

    def node_update(self, old: AnyObject, new: AnyObject) -> None:
        name = str((new.get("metadata") or {}).get("name", ""))
        self._each("OnNodeUpdate", lambda p: p.on_node(name, new))

    def node_delete(self, node: AnyObject) -> None:
        name = str((node.get("metadata") or {}).get("name", ""))
        self._each("OnNodeDelete", lambda p: p.on_node(name, None))
