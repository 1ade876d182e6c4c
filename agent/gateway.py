"""The koordlet's Kubernetes gateway: the only agent module that calls the API server.

It builds the informers of the states informer (this node's pods, the Node, its NodeSLO and NodeMetric,
each narrowed by a field selector so the agent never lists the cluster) and writes the NodeMetric status
through the status subresource, guarded by upstream's client-side limit of 0.1 QPS with a burst of 2.
For the evictor it discovers the Eviction API version, posts ``pods/<name>/eviction`` (UID precondition)
and creates Events. For the node-topology reporters it reads, creates and merge-patches this node's
cluster-scoped custom objects (the NodeResourceTopology, the Device) and watches them by name.
Errors are translated at this boundary into ``GatewayError`` with the object named.

It speaks through ``kube.rest.KubeRest`` (not the full kubernetes client, which alone would cost a third
of the agent's memory budget). Its informers are typed with apis.kubeobjects (``Informer[Pod]``, ...).
Imports: standard library, kube.{rest,ratelimit,informer}, apis.{constants,kubeobjects}.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from urllib3.exceptions import HTTPError

from apis import constants as c
from apis.kubeobjects import CustomResource, Node, Pod
from kube.informer import Informer
from kube.ratelimit import RateLimiter
from kube.rest import KubeRest, RestError

__all__ = ["GatewayError", "KubeGateway", "StatusRateLimitedError"]

log = logging.getLogger(__name__)

NODEMETRIC_PLURAL = "nodemetrics"
NRT_GROUP = "topology.node.k8s.io"
NRT_VERSION = "v1alpha1"
NRT_PLURAL = "noderesourcetopologies"
NODESLO_PLURAL = "nodeslos"
# Upstream's NodeMetric status writer: 0.1 QPS, burst 2 (docs/rules/koordlet.md#reporter).
STATUS_QPS = 0.1
STATUS_BURST = 2
REQUEST_TIMEOUT_SECONDS = 10
CRHandler = Callable[[CustomResource], None]
PodListener = Callable[[Pod | None, Pod | None], None]
"""``listener(old, new)`` after a pod event: (None, pod) added, (old, new) updated, (pod, None) deleted."""
CRUpdateHandler = Callable[[CustomResource, CustomResource], None]


class GatewayError(RuntimeError):
    """An API call failed; the message names the object and the cause."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class StatusRateLimitedError(GatewayError):
    """The client-side status write limit refused this write (it is just an error for that round)."""


class KubeGateway:
    """API access for one node's koordlet."""

    def __init__(self, rest: KubeRest, node_name: str, status_limiter: RateLimiter | None = None) -> None:
        if not node_name:
            raise ValueError("node name is required (flag --node-name or env NODE_NAME)")
        self.rest = rest
        self.node_name = node_name
        self._status_limiter = status_limiter or RateLimiter(STATUS_QPS, STATUS_BURST)
        self._pod_listeners: list[PodListener] = []

    # -- informers ---------------------------------------------------------------------------------
    def _own(self) -> dict[str, Any]:
        return {"field_selector": f"metadata.name={self.node_name}"}

    def add_pod_listener(self, listener: PodListener) -> None:
        """Also tell ``listener`` of every pod event, after the informer's own handlers (the NRT reporter
        reacts to a pod's new cpuset at once instead of at its next round)."""
        self._pod_listeners.append(listener)

    def _tell(self, old: Pod | None, new: Pod | None) -> None:
        for listener in self._pod_listeners:
            try:
                listener(old, new)
            except Exception:  # a listener's bug must not stop the pod informer
                log.exception("pod listener failed")

    def pod_informer(
        self,
        on_add: Callable[[Pod], None],
        on_update: Callable[[Pod, Pod], None],
        on_delete: Callable[[Pod], None],
    ) -> Informer[Pod]:
        """Pods bound to this node, in every namespace (field selector ``spec.nodeName``)."""

        def added(pod: Pod) -> None:
            on_add(pod)
            self._tell(None, pod)

        def updated(old: Pod, new: Pod) -> None:
            on_update(old, new)
            self._tell(old, new)

        def deleted(pod: Pod) -> None:
            on_delete(pod)
            self._tell(pod, None)

        return Informer(
            self.rest.list_func("/api/v1/pods"),
            kwargs={"field_selector": f"spec.nodeName={self.node_name}"},
            on_add=added,
            on_update=updated,
            on_delete=deleted,
            name="pods",
        )

    def node_informer(self, on_change: Callable[[Node], None]) -> Informer[Node]:
        return Informer(
            self.rest.list_func("/api/v1/nodes"),
            kwargs=self._own(),
            resync_seconds=12 * 3600,
            on_add=on_change,
            on_update=lambda _old, new: on_change(new),
            name="node",
        )

    def _crd_informer(
        self, plural: str, on_add: CRHandler, on_update: CRUpdateHandler, on_delete: CRHandler
    ) -> Informer[CustomResource]:
        return Informer(
            self.rest.list_func(f"/apis/{c.SLO_GROUP}/{c.SLO_VERSION}/{plural}"),
            kwargs=self._own(),
            resync_seconds=12 * 3600,
            on_add=on_add,
            on_update=on_update,
            on_delete=on_delete,
            name=plural,
        )

    def nodeslo_informer(
        self, on_add: CRHandler, on_update: CRUpdateHandler, on_delete: CRHandler
    ) -> Informer[CustomResource]:
        return self._crd_informer(NODESLO_PLURAL, on_add, on_update, on_delete)

    def nodemetric_informer(
        self, on_add: CRHandler, on_update: CRUpdateHandler, on_delete: CRHandler
    ) -> Informer[CustomResource]:
        return self._crd_informer(NODEMETRIC_PLURAL, on_add, on_update, on_delete)

    # -- writes --------------------------------------------------------------------------------------
    def write_nodemetric_status(self, status: Mapping[str, Any]) -> None:
        """Replace this node's NodeMetric ``status`` (a JSON patch ``add /status`` on the subresource:
        the whole status is replaced in one call, so no stale map keys survive and no conflict retry
        is needed). Raises ``StatusRateLimitedError`` when the local limit refuses the write and
        ``GatewayError`` (status 404 when the NodeMetric does not exist) on failure."""
        if not self._status_limiter.try_acquire():
            raise StatusRateLimitedError(
                f"nodemetrics/{self.node_name}: status write refused by the client-side limit "
                f"({STATUS_QPS} QPS, burst {STATUS_BURST})"
            )
        try:
            self.rest.request(
                "PATCH",
                f"/apis/{c.SLO_GROUP}/{c.SLO_VERSION}/{NODEMETRIC_PLURAL}/{self.node_name}/status",
                [{"op": "add", "path": "/status", "value": dict(status)}],
                content_type="application/json-patch+json",
                timeout=REQUEST_TIMEOUT_SECONDS,
            )
        except RestError as e:
            raise GatewayError(
                f"nodemetrics/{self.node_name}: status update failed: {e.status} {e.reason}", e.status
            ) from e
        except (HTTPError, OSError) as e:
            raise GatewayError(f"nodemetrics/{self.node_name}: status update failed: {e}") from e

    # -- eviction and events (docs/rules/koordlet.md#how-a-pod-is-evicted) -----------------------------------
    def eviction_api_version(self) -> str:
        """``policy/v1`` when the server serves it (GET /apis/policy/v1), else ``policy/v1beta1``."""
        try:
            self.rest.request("GET", "/apis/policy/v1", timeout=REQUEST_TIMEOUT_SECONDS)
        except RestError as e:
            if e.status == 404:
                return "policy/v1beta1"
            raise GatewayError(f"discovery /apis/policy/v1 failed: {e.status} {e.reason}", e.status) from e
        except (HTTPError, OSError) as e:
            raise GatewayError(f"discovery /apis/policy/v1 failed: {e}") from e
        return "policy/v1"

    def evict_pod(self, namespace: str, name: str, uid: str, api_version: str) -> None:
        """POST ``pods/<name>/eviction`` with a UID precondition and the default grace period. Raises
        ``GatewayError`` carrying the HTTP status (429: a PodDisruptionBudget or rate limit refused it;
        404: the pod is gone; 409: the UID precondition failed)."""
        body = {
            "apiVersion": api_version,
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": {"preconditions": {"uid": uid}},
        }
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/eviction"
        try:
            self.rest.request("POST", path, body, timeout=REQUEST_TIMEOUT_SECONDS)
        except RestError as e:
            message = e.body.get("message") if isinstance(e.body, dict) else None
            raise GatewayError(
                f"pods/{namespace}/{name}: eviction failed: {e.status} {e.reason}"
                + (f": {message}" if message else ""),
                e.status,
            ) from e
        except (HTTPError, OSError) as e:
            raise GatewayError(f"pods/{namespace}/{name}: eviction failed: {e}") from e

    def create_event(self, event: Mapping[str, Any]) -> None:
        """POST a core/v1 Event into its ``metadata.namespace``."""
        namespace = str((event.get("metadata") or {}).get("namespace") or "default")
        try:
            self.rest.request(
                "POST", f"/api/v1/namespaces/{namespace}/events", dict(event), timeout=REQUEST_TIMEOUT_SECONDS
            )
        except RestError as e:
            raise GatewayError(f"events/{namespace}: create failed: {e.status} {e.reason}", e.status) from e
        except (HTTPError, OSError) as e:
            raise GatewayError(f"events/{namespace}: create failed: {e}") from e

    # -- node-scoped custom objects (docs/rules/koordlet-topology.md#reporting) ------------------------
    @staticmethod
    def _cr_path(group: str, version: str, plural: str, name: str | None = None) -> str:
        return f"/apis/{group}/{version}/{plural}" + (f"/{name}" if name else "")

    def _cr_call(
        self, what: str, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        try:
            return self.rest.request(
                method, path, body, content_type=content_type, timeout=REQUEST_TIMEOUT_SECONDS
            )
        except RestError as e:
            message = e.body.get("message") if isinstance(e.body, dict) else None
            raise GatewayError(
                f"{what}: {method} failed: {e.status} {e.reason}" + (f": {message}" if message else ""),
                e.status,
            ) from e
        except (HTTPError, OSError) as e:
            raise GatewayError(f"{what}: {method} failed: {e}") from e

    def get_custom_object(self, group: str, version: str, plural: str, name: str) -> dict[str, Any] | None:
        """The cluster-scoped object, or None when it does not exist (404)."""
        try:
            obj = self._cr_call(f"{plural}/{name}", "GET", self._cr_path(group, version, plural, name))
        except GatewayError as e:
            if e.status == 404:
                return None
            raise
        return obj if isinstance(obj, dict) else None

    def create_custom_object(
        self, group: str, version: str, plural: str, body: Mapping[str, Any]
    ) -> dict[str, Any]:
        """POST a cluster-scoped object; the created object. ``GatewayError`` 409 when it exists."""
        name = str((body.get("metadata") or {}).get("name") or "")
        obj = self._cr_call(f"{plural}/{name}", "POST", self._cr_path(group, version, plural), dict(body))
        return obj if isinstance(obj, dict) else {}

    def merge_patch_custom_object(
        self, group: str, version: str, plural: str, name: str, patch: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A JSON merge patch (RFC 7386: maps merged, lists replaced, null deletes); the patched object.
        ``GatewayError`` 404 when the object does not exist."""
        obj = self._cr_call(
            f"{plural}/{name}",
            "PATCH",
            self._cr_path(group, version, plural, name),
            dict(patch),
            content_type="application/merge-patch+json",
        )
        return obj if isinstance(obj, dict) else {}

    def custom_object_informer(
        self, group: str, version: str, plural: str, on_change: Callable[[], None] | None = None
    ) -> Informer[CustomResource]:
        """A watch on this node's cluster-scoped object of that kind (field selector ``metadata.name``);
        ``on_change`` is called after each add, update or delete."""

        def changed(*_objs: CustomResource) -> None:
            if on_change is not None:
                on_change()

        return Informer(
            self.rest.list_func(self._cr_path(group, version, plural)),
            kwargs=self._own(),
            resync_seconds=12 * 3600,
            on_add=changed,
            on_update=changed,
            on_delete=changed,
            name=plural,
        )

    def get_nrt(self) -> dict[str, Any] | None:
        """This node's NodeResourceTopology (``topology.node.k8s.io/v1alpha1``), None when missing."""
        return self.get_custom_object(NRT_GROUP, NRT_VERSION, NRT_PLURAL, self.node_name)

    def create_nrt(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return self.create_custom_object(NRT_GROUP, NRT_VERSION, NRT_PLURAL, body)

    def patch_nrt(self, patch: Mapping[str, Any]) -> dict[str, Any]:
        return self.merge_patch_custom_object(NRT_GROUP, NRT_VERSION, NRT_PLURAL, self.node_name, patch)

    def nrt_informer(self, on_change: Callable[[], None] | None = None) -> Informer[CustomResource]:
        return self.custom_object_informer(NRT_GROUP, NRT_VERSION, NRT_PLURAL, on_change)
