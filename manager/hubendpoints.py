"""Routes the MetricHub Service to the leader: while a koord-manager replica leads, it writes the
Endpoints of the selector-less hub Service (``--hub-endpoints``, e.g. ``koord-manager-hub``) to its own
pod IP, and re-asserts them every ``interval`` seconds. Every koordlet therefore streams to the leader,
whose embedded scheduler and batch-resource controller read that one hub; a standby's hub gets no
traffic. On failover the new leader overwrites the Endpoints; agents whose stream broke reconnect
(they keep only their latest report meanwhile). Kubernetes mirrors the Endpoints into EndpointSlices.

``endpoints_body`` is pure; ``HubEndpoints`` is the one writer of that object (create, else replace
with the current resourceVersion; failures are logged and retried on the next round).

Imports: the standard library, the kubernetes client.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

ENDPOINTS_PORT_NAME = "grpc-hub"


def endpoints_body(name: str, namespace: str, pod_ip: str, pod_name: str, port: int) -> dict[str, Any]:
    """Pure: the Endpoints object pointing the hub Service at one pod."""
    if not pod_ip:
        raise ValueError("--hub-endpoints needs the pod IP: set POD_IP (downward API status.podIP)")
    address: dict[str, Any] = {"ip": pod_ip}
    if pod_name:
        address["targetRef"] = {"kind": "Pod", "name": pod_name, "namespace": namespace}
    return {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "koord-manager"},
        },
        "subsets": [
            {
                "addresses": [address],
                "ports": [{"name": ENDPOINTS_PORT_NAME, "port": port, "protocol": "TCP"}],
            }
        ],
    }


class HubEndpoints:
    """``run(stop, leading)`` in a thread: while ``leading()`` holds, make the Endpoints ``body``."""

    def __init__(self, api: Any, body: dict[str, Any], interval: float = 30.0) -> None:
        from kubernetes import client

        self._core: Any = client.CoreV1Api(api)
        self.body = body
        self.interval = interval
        self.writes = 0
        self.failures = 0
        self._kick = threading.Event()

    def kick(self) -> None:
        """Write now (called when this replica starts leading)."""
        self._kick.set()

    def ensure(self) -> bool:
        """Creates or replaces the Endpoints unless they already point here; True when they do."""
        from kubernetes.client import ApiException

        meta = self.body["metadata"]
        name, ns = meta["name"], meta["namespace"]
        try:
            try:
                current = self._core.read_namespaced_endpoints(name, ns)
            except ApiException as e:
                if e.status != 404:
                    raise
                self._core.create_namespaced_endpoints(ns, self.body)
                self.writes += 1
                return True
            have = self._core.api_client.sanitize_for_serialization(current).get("subsets")
            if have == self.body["subsets"]:
                return True
            body = {**self.body, "metadata": {**meta, "resourceVersion": current.metadata.resource_version}}
            self._core.replace_namespaced_endpoints(name, ns, body)
            self.writes += 1
            return True
        except (ApiException, OSError) as e:
            self.failures += 1
            log.warning("hub endpoints %s/%s: %s (retrying)", ns, name, getattr(e, "reason", e))
            return False

    def run(self, stop: threading.Event, leading: Callable[[], bool]) -> None:
        while not stop.is_set():
            if leading():
                ok = self.ensure()
                wait = self.interval if ok else min(self.interval, 2.0)
            else:
                wait = self.interval
            self._kick.wait(wait)  # main kicks it on stop too
            self._kick.clear()
