"""The manager's Kubernetes gateway: the ONLY manager module that talks to the API server.

Reads come from shared informers (list+watch caches): nodes, pods of every namespace (indexed by
``spec.nodeName``), NodeMetrics, NodeSLOs and the one ``slo-controller-config`` ConfigMap (narrowed by a
field selector). Controllers subscribe with ``SharedInformer.add_handlers`` before ``start``. Writes:
NodeSLO and NodeMetric create/update/delete, node status (GET, mutate, PUT /status with the
resourceVersion; retried on 409 Conflict and, with backoff, on 429), node metadata merge patches,
Events, and Secrets created unless they exist (manager.certs). Every API failure leaves as a
``GatewayError`` naming the operation, the object and the cause.
``node_filter`` (tests, sharding) hides nodes, NodeSLOs and NodeMetrics whose names it rejects.
Objects are typed with apis.kubeobjects (``Node``, ``Pod``, ``ConfigMap``, NodeSLO/NodeMetric as
``CustomResource``); the informers and ``_call`` are where the JSON the API server sent becomes one.
Imports: the standard library, the kubernetes client, apis.{constants,kubeobjects}, kube.{informer,events}.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar, cast

from kubernetes import client

from apis import constants as c
from apis.kubeobjects import ConfigMap, CustomResource, KubeObject, Node, Pod
from kube.events import EventRecorder
from kube.informer import Handler, Informer, object_key

__all__ = ["Gateway", "GatewayError", "SharedInformer"]

log = logging.getLogger(__name__)

T = TypeVar("T", bound=KubeObject)
REQUEST_TIMEOUT = 10.0
MERGE_PATCH = "application/merge-patch+json"


class GatewayError(RuntimeError):
    """An API call failed: ``op`` (create/update/…), ``kind`` and ``name`` of the object, HTTP ``status``
    (``None`` for transport errors) and the underlying ``cause``."""

    def __init__(self, op: str, kind: str, name: str, status: int | None, cause: BaseException) -> None:
        reason = getattr(cause, "reason", "") or type(cause).__name__
        detail = _message(cause)
        super().__init__(
            f"{op} {kind} {name}: " + (f"HTTP {status} {reason}" if status else reason) + f": {detail}"
        )
        self.op, self.kind, self.name, self.status, self.cause = op, kind, name, status, cause

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def not_found(self) -> bool:
        return self.status == 404


def _message(cause: BaseException) -> str:
    body = getattr(cause, "body", None)
    if isinstance(body, bytes | str):
        try:
            decoded = json.loads(body)
            if isinstance(decoded, dict) and decoded.get("message"):
                return str(decoded["message"])
        except ValueError:
            pass
    return str(cause)[:300]


def _status(e: BaseException) -> int | None:
    status = getattr(e, "status", None)
    return status if isinstance(status, int) and status > 0 else None


class SharedInformer(Generic[T]):
    """An ``Informer[T]`` whose events fan out to any number of handler sets, with optional indexes.

    ``indexers`` maps an index name to a function giving an object's index values."""

    def __init__(
        self,
        list_func: Callable[..., Any],
        *,
        kwargs: Mapping[str, Any] | None = None,
        name: str,
        key_filter: Callable[[str], bool] | None = None,
        indexers: Mapping[str, Callable[[T], list[str]]] | None = None,
        resync_seconds: float = 0,
    ) -> None:
        self.name = name
        self._filter = key_filter
        self._handlers: list[tuple[Handler | None, Handler | None, Handler | None]] = []
        self._indexers = dict(indexers or {})
        self._index: dict[str, dict[str, set[str]]] = {n: {} for n in self._indexers}
        self._values: dict[str, dict[str, list[str]]] = {n: {} for n in self._indexers}
        self._lock = threading.RLock()
        self.informer: Informer[T] = Informer(
            list_func,
            kwargs=kwargs,
            name=name,
            resync_seconds=resync_seconds,
            on_add=self._on_add,
            on_update=self._on_update,
            on_delete=self._on_delete,
        )

    def add_handlers(
        self,
        on_add: Callable[[T], None] | None = None,
        on_update: Callable[[T, T], None] | None = None,
        on_delete: Callable[[T], None] | None = None,
    ) -> None:
        with self._lock:
            self._handlers.append((on_add, on_update, on_delete))

    def start(self, stop: threading.Event) -> threading.Thread:
        return self.informer.start(stop)

    @property
    def has_synced(self) -> bool:
        return self.informer.has_synced.is_set()

    def wait_synced(self, timeout: float) -> bool:
        return self.informer.has_synced.wait(timeout)

    def get(self, key: str) -> T | None:
        if self._filter is not None and not self._filter(key):
            return None
        return self.informer.get(key)

    def keys(self) -> list[str]:
        return [k for k in self.informer.store() if self._filter is None or self._filter(k)]

    def by_index(self, index: str, value: str) -> list[T]:
        with self._lock:
            keys = list(self._index[index].get(value, ()))
        return [o for k in keys if (o := self.informer.get(k)) is not None]

    # -- delivery (on the informer's thread) ---------------------------------------------------------------

    def _visible(self, obj: T) -> bool:
        return self._filter is None or self._filter(object_key(obj))

    def _reindex(self, key: str, obj: T | None) -> None:
        with self._lock:
            for name, fn in self._indexers.items():
                for value in self._values[name].pop(key, []):
                    bucket = self._index[name].get(value)
                    if bucket is not None:
                        bucket.discard(key)
                        if not bucket:
                            del self._index[name][value]
                if obj is not None:
                    values = [v for v in fn(obj) if v]
                    self._values[name][key] = values
                    for value in values:
                        self._index[name].setdefault(value, set()).add(key)

    def _dispatch(self, slot: int, *objs: T) -> None:
        with self._lock:
            handlers = [h[slot] for h in self._handlers]
        for handler in handlers:
            if handler is None:
                continue
            try:
                handler(*objs)
            except Exception:
                log.exception("informer %s: handler failed", self.name)

    def _on_add(self, obj: T) -> None:
        self._reindex(object_key(obj), obj)
        if self._visible(obj):
            self._dispatch(0, obj)

    def _on_update(self, old: T, new: T) -> None:
        self._reindex(object_key(new), new)
        if self._visible(new):
            self._dispatch(1, old, new)

    def _on_delete(self, obj: T) -> None:
        self._reindex(object_key(obj), None)
        if self._visible(obj):
            self._dispatch(2, obj)


def _node_name_of(pod: Pod) -> list[str]:
    return [str((pod.get("spec") or {}).get("nodeName") or "")]


class Gateway:
    """Informer caches and writes for the manager's controllers (see the module docstring).

    ``api`` is a ``kubernetes.client.ApiClient``; ``recorder`` defaults to an EventRecorder for
    component ``koord-manager``. ``start(stop)`` starts every informer; ``wait_synced`` waits for them."""

    def __init__(
        self,
        api: Any,
        *,
        config_namespace: str = c.DEFAULT_CONFIG_NAMESPACE,
        config_name: str = c.SLO_CONTROLLER_CONFIG_NAME,
        recorder: EventRecorder | None = None,
        node_filter: Callable[[str], bool] | None = None,
        resync_seconds: float = 0,
        conflict_retries: int = 5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.core: Any = client.CoreV1Api(api)
        self.custom: Any = client.CustomObjectsApi(api)
        self.config_namespace, self.config_name = config_namespace, config_name
        self.recorder = recorder if recorder is not None else EventRecorder(api, "koord-manager")
        self.conflict_retries = conflict_retries
        self._sleep = sleep
        crd = {"group": c.SLO_GROUP, "version": c.SLO_VERSION}
        self.nodes: SharedInformer[Node] = SharedInformer(
            self.core.list_node, name="nodes", key_filter=node_filter, resync_seconds=resync_seconds
        )
        self.pods: SharedInformer[Pod] = SharedInformer(
            self.core.list_pod_for_all_namespaces,
            name="pods",
            indexers={"nodeName": _node_name_of},
            resync_seconds=resync_seconds,
        )
        self.nodemetrics: SharedInformer[CustomResource] = SharedInformer(
            self.custom.list_cluster_custom_object,
            kwargs={**crd, "plural": c.NODE_METRIC_PLURAL},
            name="nodemetrics",
            key_filter=node_filter,
            resync_seconds=resync_seconds,
        )
        self.nodeslos: SharedInformer[CustomResource] = SharedInformer(
            self.custom.list_cluster_custom_object,
            kwargs={**crd, "plural": c.NODE_SLO_PLURAL},
            name="nodeslos",
            key_filter=node_filter,
            resync_seconds=resync_seconds,
        )
        self.config_maps: SharedInformer[ConfigMap] = SharedInformer(
            self.core.list_namespaced_config_map,
            kwargs={"namespace": config_namespace, "field_selector": f"metadata.name={config_name}"},
            name="slo-controller-config",
            resync_seconds=resync_seconds,
        )
        self.informers = (self.nodes, self.pods, self.nodemetrics, self.nodeslos, self.config_maps)

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self, stop: threading.Event) -> None:
        for inf in self.informers:
            inf.start(stop)

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        return all(inf.wait_synced(max(0.0, deadline - time.monotonic())) for inf in self.informers)

    # -- reads (informer caches; objects are read-only) ---------------------------------------------------

    def node(self, name: str) -> Node | None:
        return self.nodes.get(name)

    def node_names(self) -> list[str]:
        return self.nodes.keys()

    def pods_on_node(self, node_name: str) -> list[Pod]:
        return self.pods.by_index("nodeName", node_name)

    def nodeslo(self, name: str) -> CustomResource | None:
        return self.nodeslos.get(name)

    def nodemetric(self, name: str) -> CustomResource | None:
        return self.nodemetrics.get(name)

    def config_map(self) -> ConfigMap | None:
        return self.config_maps.get(f"{self.config_namespace}/{self.config_name}")

    # -- NodeSLO / NodeMetric -----------------------------------------------------------------------------

    def create_nodeslo(self, name: str, spec: dict[str, Any]) -> CustomResource:
        return self._create_cr(c.NODE_SLO_PLURAL, c.NODE_SLO_KIND, name, spec)

    def update_nodeslo(self, obj: CustomResource, spec: dict[str, Any]) -> CustomResource:
        """Replace the spec of ``obj`` (as last read; its resourceVersion guards the write)."""
        return self._update_cr(c.NODE_SLO_PLURAL, c.NODE_SLO_KIND, obj, spec)

    def delete_nodeslo(self, name: str) -> bool:
        return self._delete_cr(c.NODE_SLO_PLURAL, c.NODE_SLO_KIND, name)

    def create_nodemetric(self, name: str, spec: dict[str, Any]) -> CustomResource:
        return self._create_cr(c.NODE_METRIC_PLURAL, c.NODE_METRIC_KIND, name, spec)

    def update_nodemetric_spec(self, obj: CustomResource, spec: dict[str, Any]) -> CustomResource:
        """Replace the spec of ``obj`` (the status subresource is untouched by this write)."""
        return self._update_cr(c.NODE_METRIC_PLURAL, c.NODE_METRIC_KIND, obj, spec)

    def delete_nodemetric(self, name: str) -> bool:
        return self._delete_cr(c.NODE_METRIC_PLURAL, c.NODE_METRIC_KIND, name)

    def _create_cr(self, plural: str, kind: str, name: str, spec: dict[str, Any]) -> CustomResource:
        body: CustomResource = {
            "apiVersion": c.SLO_API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec
        }  # fmt: skip
        create = self.custom.create_cluster_custom_object
        written = self._call("create", kind, name, create, c.SLO_GROUP, c.SLO_VERSION, plural, body)
        return cast(CustomResource, written)  # the boundary: the object the API server wrote

    def _update_cr(self, plural: str, kind: str, obj: CustomResource, spec: dict[str, Any]) -> CustomResource:
        body = copy.deepcopy(obj)
        body["spec"] = spec
        body.setdefault("apiVersion", c.SLO_API_VERSION)
        body.setdefault("kind", kind)
        name = str(body["metadata"]["name"])
        replace = self.custom.replace_cluster_custom_object
        written = self._call("update", kind, name, replace, c.SLO_GROUP, c.SLO_VERSION, plural, name, body)
        return cast(CustomResource, written)  # the boundary: the object the API server wrote

    def _delete_cr(self, plural: str, kind: str, name: str) -> bool:
        """True if deleted, False if it was already gone."""
        try:
            self._call(
                "delete", kind, name, self.custom.delete_cluster_custom_object, c.SLO_GROUP, c.SLO_VERSION,
                plural, name,
            )  # fmt: skip
        except GatewayError as e:
            if e.not_found:
                return False
            raise
        return True

    # -- nodes ------------------------------------------------------------------------------------------

    def get_node(self, name: str) -> Node | None:
        """A fresh GET of the node (not the cache); ``None`` when it does not exist."""
        try:
            return cast(Node, self._call("get", "Node", name, self.core.read_node, name))  # the boundary
        except GatewayError as e:
            if e.not_found:
                return None
            raise

    def update_node_status(self, name: str, mutate: Callable[[Node], Node | None]) -> Node | None:
        """GET the node, ``mutate`` a copy (return the desired node, or ``None`` to write nothing), PUT its
        /status with the read resourceVersion. A 409 Conflict re-reads and retries, a 429 backs off and
        retries (up to ``conflict_retries`` times). Returns the written node, or ``None`` when the node
        is gone or ``mutate`` declined."""
        attempt = 0
        while True:
            node = self.get_node(name)
            if node is None:
                return None
            desired = mutate(copy.deepcopy(node))
            if desired is None:
                return None
            rv = node.get("metadata", {}).get("resourceVersion")
            if rv is not None:  # absent (never from a GET) is the same PUT as null: no precondition
                desired.setdefault("metadata", {})["resourceVersion"] = rv
            try:
                written = self._call(
                    "update status of", "Node", name, self.core.replace_node_status, name, desired
                )
                return cast(Node, written)  # the boundary: the node the API server wrote
            except GatewayError as e:
                if e.status not in (409, 429) or attempt >= self.conflict_retries:
                    raise
                attempt += 1
                if e.status == 429:
                    self._sleep(min(2.0, 0.05 * 2**attempt))

    def patch_node_metadata(
        self,
        name: str,
        annotations: Mapping[str, str | None] | None = None,
        labels: Mapping[str, str | None] | None = None,
    ) -> Node:
        """A JSON merge patch of the node's annotations/labels (a ``None`` value removes the key)."""
        meta: dict[str, Any] = {}  # a patch, not an ObjectMeta: None values delete
        if annotations:
            meta["annotations"] = dict(annotations)
        if labels:
            meta["labels"] = dict(labels)
        patched = self._call(
            "patch", "Node", name, self.core.patch_node, name, {"metadata": meta}, _content_type=MERGE_PATCH
        )
        return cast(Node, patched)  # the boundary: the node the API server wrote

    # -- secrets ----------------------------------------------------------------------------------------

    def create_or_read_secret(self, body: dict[str, Any]) -> dict[str, Any]:
        """Creates the Secret ``body`` unless one of its name exists, and returns the stored Secret: of
        replicas starting at once the first writer wins and the others read its Secret (manager.certs)."""
        name, namespace = body["metadata"]["name"], body["metadata"]["namespace"]
        try:
            return self._call("create", "Secret", name, self.core.create_namespaced_secret, namespace, body)
        except GatewayError as e:
            if not e.conflict:
                raise
        return self._call("get", "Secret", name, self.core.read_namespaced_secret, name, namespace)

    # -- events -----------------------------------------------------------------------------------------

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        """Record an Event about ``obj`` (best effort: never raises)."""
        self.recorder.event(obj, type, reason, message)

    # -- the boundary -------------------------------------------------------------------------------------

    def _call(
        self, op: str, kind: str, name: str, method: Callable[..., Any], *args: Any, **kw: Any
    ) -> dict[str, Any]:
        """``method``'s response as the JSON object it holds (``{}`` when empty); the public methods
        give it its apis.kubeobjects type."""
        try:
            resp = method(*args, _preload_content=False, _request_timeout=REQUEST_TIMEOUT, **kw)
            data = resp.data
        except Exception as e:
            raise GatewayError(op, kind, name, _status(e), e) from e
        if not data:
            return {}
        try:
            decoded = json.loads(data)
        except ValueError as e:
            raise GatewayError(op, kind, name, None, e) from e
        return decoded if isinstance(decoded, dict) else {}
