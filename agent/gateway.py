"""The koordlet's Kubernetes gateway: the only agent module that calls the API server.

It builds the informers of the states informer (this node's pods, the Node, its NodeSLO and NodeMetric,
each narrowed by a field selector so the agent never lists the cluster) and writes the NodeMetric status
through the status subresource, guarded by upstream's client-side limit of 0.1 QPS with a burst of 2.
For the evictor it discovers the Eviction API version, posts ``pods/<name>/eviction`` (UID precondition)
and creates Events.
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
NODESLO_PLURAL = "nodeslos"
# Upstream's NodeMetric status writer: 0.1 QPS, burst 2 (docs/rules/koordlet.md#reporter).
STATUS_QPS = 0.1
STATUS_BURST = 2
REQUEST_TIMEOUT_SECONDS = 10
CRHandler = Callable[[CustomResource], None]
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

    # -- informers ---------------------------------------------------------------------------------
    def _own(self) -> dict[str, Any]:
        return {"field_selector": f"metadata.name={self.node_name}"}

    def pod_informer(
        self,
        on_add: Callable[[Pod], None],
        on_update: Callable[[Pod, Pod], None],
        on_delete: Callable[[Pod], None],
    ) -> Informer[Pod]:
        """Pods bound to this node, in every namespace (field selector ``spec.nodeName``)."""
        return Informer(
            self.rest.list_func("/api/v1/pods"),
            kwargs={"field_selector": f"spec.nodeName={self.node_name}"},
            on_add=on_add,
            on_update=on_update,
            on_delete=on_delete,
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
