"""A koord-manager controller set (config, NodeSLO, NodeMetric) on the real API server, scoped to the
nodes of one test (unique name prefix) and to a ConfigMap in the test's namespace."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry

from apis.constants import NODE_METRIC_PLURAL, NODE_SLO_PLURAL, SLO_API_VERSION, SLO_GROUP, SLO_VERSION
from kube.events import EventRecorder
from manager.controllerruntime.runtime import ControllerManager
from manager.controllers.config import ConfigController
from manager.controllers.setup import build_slo_controllers
from manager.gateway import Gateway
from manager.metrics import ManagerMetrics
from tests.helpers import polling

CONFIG_NAME = "slo-controller-config"


def wait_for(cond: Callable[[], Any], timeout: float = 20.0, what: str = "") -> Any:
    """``tests.helpers.polling.wait_for`` where a 404 from the API server counts as not yet (the object is
    still to be created); generous timeout: CI shares a busy 2-core machine, and a condition that holds
    returns at once."""

    def probe() -> Any:
        try:
            return cond()
        except ApiException as e:
            if e.status != 404:
                raise
            return None

    return polling.wait_for(probe, timeout, 0.05, what or str(cond))


@dataclass
class Harness:
    kube: Any
    namespace: str
    prefix: str
    metrics: ManagerMetrics
    gateway: Gateway
    config: ConfigController
    manager: ControllerManager
    hub: dict[str, dict[str, Any]] = field(default_factory=dict)
    """What the MetricHub lookup returns per node (a NodeMetric dict), as the hub would."""
    core: Any = field(init=False)
    custom: Any = field(init=False)

    def __post_init__(self) -> None:
        self.core = client.CoreV1Api(self.kube)
        self.custom = client.CustomObjectsApi(self.kube)

    # -- objects ----------------------------------------------------------------------------------------
    def node_name(self, suffix: str) -> str:
        return f"{self.prefix}{suffix}"

    def create_node(self, suffix: str, labels: dict[str, str] | None = None) -> str:
        name = self.node_name(suffix)
        self.core.create_node({
            "metadata": {"name": name, "labels": labels or {}},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                       "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
        })  # fmt: skip
        return name

    def set_config(self, data: dict[str, Any]) -> None:
        body = {
            "metadata": {"name": CONFIG_NAME, "namespace": self.namespace},
            "data": {k: v if isinstance(v, str) else json.dumps(v) for k, v in data.items()},
        }
        try:
            self.core.create_namespaced_config_map(self.namespace, body)
        except ApiException as e:
            if e.status != 409:
                raise
            self.core.replace_namespaced_config_map(CONFIG_NAME, self.namespace, body)

    def nodeslo(self, name: str) -> dict[str, Any] | None:
        return self._get(NODE_SLO_PLURAL, name)

    def nodemetric(self, name: str) -> dict[str, Any] | None:
        return self._get(NODE_METRIC_PLURAL, name)

    def nodeslo_part(self, name: str, part: str) -> dict[str, Any]:
        """One part of the node's NodeSLO spec (``{}`` while absent)."""
        slo = self.nodeslo(name) or {}
        return dict((slo.get("spec") or {}).get(part) or {})

    def collect_policy(self, name: str) -> dict[str, Any]:
        """The node's NodeMetric ``spec.metricCollectPolicy`` (``{}`` while absent)."""
        nm = self.nodemetric(name) or {}
        return dict((nm.get("spec") or {}).get("metricCollectPolicy") or {})

    def _get(self, plural: str, name: str) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = self.custom.get_cluster_custom_object(SLO_GROUP, SLO_VERSION, plural, name)
            return obj
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def create_cr(self, plural: str, kind: str, name: str, spec: dict[str, Any]) -> None:
        body = {"apiVersion": SLO_API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}
        self.custom.create_cluster_custom_object(SLO_GROUP, SLO_VERSION, plural, body)

    def config_events(self, reason: str) -> list[Any]:
        events = self.core.list_namespaced_event(
            self.namespace, field_selector=f"involvedObject.name={CONFIG_NAME}"
        ).items
        return [e for e in events if e.reason == reason]

    def sample(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0

    def cleanup(self) -> None:
        for node in self.core.list_node().items:
            if node.metadata.name.startswith(self.prefix):
                _ignore_404(self.core.delete_node, node.metadata.name)
        for plural in (NODE_SLO_PLURAL, NODE_METRIC_PLURAL):
            items = self.custom.list_cluster_custom_object(SLO_GROUP, SLO_VERSION, plural)["items"]
            for item in items:
                name = item["metadata"]["name"]
                if name.startswith(self.prefix):
                    _ignore_404(
                        self.custom.delete_cluster_custom_object, SLO_GROUP, SLO_VERSION, plural, name
                    )


def _ignore_404(fn: Callable[..., Any], *args: Any) -> None:
    try:
        fn(*args)
    except ApiException as e:
        if e.status != 404:
            raise


@pytest.fixture()
def harness(kube: Any, namespace: str) -> Iterator[Harness]:
    prefix = f"mgr-{uuid.uuid4().hex[:8]}-"
    hub: dict[str, dict[str, Any]] = {}
    built = build_slo_controllers(
        kube, namespace, CONFIG_NAME, CollectorRegistry(), EventRecorder(kube, "koord-manager"),
        identity="test", node_filter=lambda name: name.startswith(prefix), hub_lookup=hub.get,
    )  # fmt: skip
    gateway, manager, metrics, config = built.gateway, built.manager, built.metrics, built.config
    h = Harness(kube, namespace, prefix, metrics, gateway, config, manager, hub)
    stop = threading.Event()
    try:
        gateway.start(stop)
        assert gateway.wait_synced(20), "informers did not sync"
        manager.start(stop)
        yield h
    finally:
        stop.set()
        manager.stop()
        h.cleanup()
