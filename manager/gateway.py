"""The manager's Kubernetes gateway for its controllers (manager.webhook.gateway is the admission
webhooks' one; only gateway modules talk to the API server).

Reads come from shared informers (list+watch caches): nodes, pods of every namespace (indexed by
``spec.nodeName``), NodeMetrics, NodeSLOs, Devices (scheduling.koordinator.sh, one per node, for the
GPU resources: docs/rules/manager.md#gpu-device-resources) and the one ``slo-controller-config``
ConfigMap (narrowed by a field selector). Controllers subscribe with ``SharedInformer.add_handlers``
before ``start``. Writes: NodeSLO and NodeMetric create/update/delete, node status (GET, mutate, PUT
/status with the resourceVersion; retried on 409 Conflict and, with backoff, on 429), node metadata
merge patches, Events, and Secrets created unless they exist (manager.certs). Every API failure leaves as a
``GatewayError`` naming the operation, the object and the cause.
``node_filter`` (tests, sharding) hides nodes, NodeSLOs, NodeMetrics and Devices whose names it rejects.
Objects are typed with apis.kubeobjects (``Node``, ``Pod``, ``ConfigMap``, NodeSLO/NodeMetric as
``CustomResource``); the informers and ``_call`` are where the JSON the API server sent becomes one.
``GatewayError``, ``SharedInformer`` and the boundary ``call`` live in manager.kubeapi (re-exported here).
Imports: the standard library, the kubernetes client, apis.{constants,device,kubeobjects}, kube.events,
manager.kubeapi.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

from kubernetes import client

from apis import constants as c
from apis.device import DEVICE_GROUP, DEVICE_PLURAL, DEVICE_VERSION
from apis.kubeobjects import ConfigMap, CustomResource, Node, Pod
from kube.events import EventRecorder
from manager.kubeapi import GatewayError, SharedInformer, call

__all__ = ["Gateway", "GatewayError", "SharedInformer"]

MERGE_PATCH = "application/merge-patch+json"


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
        self.devices: SharedInformer[CustomResource] = SharedInformer(
            self.custom.list_cluster_custom_object,
            kwargs={"group": DEVICE_GROUP, "version": DEVICE_VERSION, "plural": DEVICE_PLURAL},
            name="devices",
            key_filter=node_filter,
            resync_seconds=resync_seconds,
        )
        self.config_maps: SharedInformer[ConfigMap] = SharedInformer(
            self.core.list_namespaced_config_map,
            kwargs={"namespace": config_namespace, "field_selector": f"metadata.name={config_name}"},
            name="slo-controller-config",
            resync_seconds=resync_seconds,
        )
        self.informers = (
            self.nodes, self.pods, self.nodemetrics, self.nodeslos, self.devices, self.config_maps,
        )  # fmt: skip

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

    def device(self, name: str) -> CustomResource | None:
        """The node's Device (named after it), as the informer holds it."""
        return self.devices.get(name)

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
        """manager.kubeapi.call: ``method``'s response as the JSON object it holds."""
        return call(op, kind, name, method, *args, **kw)
