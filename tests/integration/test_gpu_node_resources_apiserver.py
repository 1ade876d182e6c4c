"""koord-manager's NodeResource controller writes a Node's GPU resources and labels from its Device on the
real API server (docs/rules/manager.md#gpu-device-resources): a Device of 4 cards of 16Gi gives the Node
400 / 400 / 64Gi / 400 and the Device's gpu labels; a card marked unhealthy takes its share away
(300 / 48Gi); deleting the Device removes every GPU resource and keeps the labels; with colocation off
nothing is written.
Imports: apis, manager (controllers through build_slo_controllers), the manager test harness, kubernetes,
pytest and the standard library."""

from __future__ import annotations

import contextlib
import copy
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry

from apis.device import DEVICE_GROUP, DEVICE_PLURAL, DEVICE_VERSION
from kube.events import EventRecorder
from manager.controllers.setup import build_slo_controllers
from tests.integration.manager.conftest import CONFIG_NAME, Harness, wait_for

pytestmark = pytest.mark.apiserver

GPU_NAMES = ("koordinator.sh/gpu", "koordinator.sh/gpu-core", "koordinator.sh/gpu-memory",
             "koordinator.sh/gpu-memory-ratio")  # fmt: skip
LABELS = {"node.koordinator.sh/gpu-vendor": "nvidia", "node.koordinator.sh/gpu-model": "Tesla-V100-SXM2-16GB",
          "node.koordinator.sh/gpu-driver-version": "535.104.05"}  # fmt: skip


@pytest.fixture()
def harness(kube: Any, namespace: str) -> Iterator[Harness]:
    """The manager's SLO controllers (NodeResource with the Device informer), scoped to this test's nodes."""
    prefix = f"gpu-{uuid.uuid4().hex[:8]}-"
    built = build_slo_controllers(
        kube, namespace, CONFIG_NAME, CollectorRegistry(), EventRecorder(kube, "koord-manager"),
        identity="test", node_filter=lambda name: name.startswith(prefix),
    )  # fmt: skip
    h = Harness(kube, namespace, prefix, built.metrics, built.gateway, built.config, built.manager)
    stop = threading.Event()
    try:
        built.gateway.start(stop)
        assert built.gateway.wait_synced(20), "informers did not sync"
        built.manager.start(stop)
        yield h
    finally:
        stop.set()
        built.manager.stop()
        for item in h.custom.list_cluster_custom_object(DEVICE_GROUP, DEVICE_VERSION, DEVICE_PLURAL)["items"]:
            if item["metadata"]["name"].startswith(prefix):
                with contextlib.suppress(ApiException):
                    h.custom.delete_cluster_custom_object(
                        DEVICE_GROUP, DEVICE_VERSION, DEVICE_PLURAL, item["metadata"]["name"]
                    )
        h.cleanup()


def _device(name: str, unhealthy: frozenset[int] = frozenset()) -> dict[str, Any]:
    cards = [
        {"type": "gpu", "minor": minor, "id": f"GPU-{minor}", "health": minor not in unhealthy,
         "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "16Gi",
                       "koordinator.sh/gpu-memory-ratio": "100"}}
        for minor in range(4)
    ]  # fmt: skip
    return {"apiVersion": f"{DEVICE_GROUP}/{DEVICE_VERSION}", "kind": "Device",
            "metadata": {"name": name, "labels": dict(LABELS)}, "spec": {"devices": cards}}  # fmt: skip


def _gpu(h: Harness, node: str, part: str = "allocatable") -> dict[str, str]:
    status = h.core.read_node(node).status
    found = getattr(status, part) or {}
    return {k: v for k, v in found.items() if k in GPU_NAMES}


def _labels(h: Harness, node: str) -> dict[str, str]:
    labels = h.core.read_node(node).metadata.labels or {}
    return {k: v for k, v in labels.items() if k in LABELS}


def test_gpu_resources_follow_the_device(harness: Harness) -> None:
    h = harness
    h.set_config({"colocation-config": {"enable": True}})
    node = h.create_node("a")
    h.custom.create_cluster_custom_object(DEVICE_GROUP, DEVICE_VERSION, DEVICE_PLURAL, _device(node))

    # 4 healthy cards: gpu-core 4 × 100, gpu-memory 4 × 16Gi = 64Gi, ratio 4 × 100; koordinator.sh/gpu =
    # Σ gpu-core because the vendor label is nvidia
    four = dict(zip(GPU_NAMES, ("400", "400", "64Gi", "400"), strict=True))
    wait_for(lambda: _gpu(h, node) == four, 20, "the Device's sums on the node")
    assert _gpu(h, node, "capacity") == four
    assert h.core.read_node(node).status.allocatable["cpu"] == "8"  # the rest of the status is kept
    wait_for(lambda: _labels(h, node) == LABELS, 10, "the Device's gpu labels on the node")

    # minor 2 fails its health check: 3 × 100, 3 × 16Gi = 48Gi
    dev = h.custom.get_cluster_custom_object(DEVICE_GROUP, DEVICE_VERSION, DEVICE_PLURAL, node)
    dev["spec"] = copy.deepcopy(_device(node, frozenset({2}))["spec"])
    h.custom.replace_cluster_custom_object(DEVICE_GROUP, DEVICE_VERSION, DEVICE_PLURAL, node, dev)
    three = dict(zip(GPU_NAMES, ("300", "300", "48Gi", "300"), strict=True))
    wait_for(lambda: _gpu(h, node) == three, 20, "the unhealthy card's share removed")
    assert _gpu(h, node, "capacity") == three

    # no Device: every GPU resource removed; the labels are never removed
    h.custom.delete_cluster_custom_object(DEVICE_GROUP, DEVICE_VERSION, DEVICE_PLURAL, node)
    wait_for(lambda: _gpu(h, node) == {}, 20, "GPU resources removed with the Device")
    assert _gpu(h, node, "capacity") == {}
    assert _labels(h, node) == LABELS


def test_with_colocation_off_nothing_is_written(harness: Harness) -> None:
    h = harness
    h.set_config({"colocation-config": {"enable": False}})
    node = h.create_node("off")
    h.custom.create_cluster_custom_object(DEVICE_GROUP, DEVICE_VERSION, DEVICE_PLURAL, _device(node))

    def reconciled() -> float:
        return sum(
            h.sample("slo_controller_node_resource_reconcile_count", status="succeeded", reason=r)
            for r in ("DisableInConfig", "updated", "unchanged")
        )

    wait_for(reconciled, 20, "a reconcile of the node")
    time.sleep(1.0)  # and the Device's own event has been handled too: still nothing
    assert _gpu(h, node) == {}
    assert _labels(h, node) == {}
