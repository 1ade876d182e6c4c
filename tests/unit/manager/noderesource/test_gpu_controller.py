"""The NodeResource controller's GPU wiring on a fake gateway (docs/rules/manager.md#gpu-device-resources):
the Device's sums go into the status write and its labels into a label patch; a label-only change is a
patch without a status write; a small move is not written; a Device that does not decode keeps the node's
GPU resources and labels (one warning per distinct error); colocation off writes nothing of the GPU's;
Device events requeue the node only on create, delete and spec changes."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from apis.kubeobjects import Node
from apis.sloconfig import SLOControllerConfig, parse_slo_controller_config
from manager.controllers.config import ConfigController
from manager.controllers.noderesource import NodeResourceController
from manager.gateway import Gateway, SharedInformer
from manager.metrics import ManagerMetrics

GPU = ("koordinator.sh/gpu", "koordinator.sh/gpu-core", "koordinator.sh/gpu-memory",
       "koordinator.sh/gpu-memory-ratio")  # fmt: skip
LABELS = {"node.koordinator.sh/gpu-vendor": "nvidia", "node.koordinator.sh/gpu-model": "Tesla-V100-SXM2-16GB",
          "node.koordinator.sh/gpu-driver-version": "535.104.05"}  # fmt: skip


UPGRADED = {"node.koordinator.sh/gpu-driver-version": "550.54.15"}


class _Informer:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.handlers: list[tuple[Any, ...]] = []

    def add_handlers(self, *handlers: Any) -> None:
        self.handlers.append(handlers)

    def get(self, name: str) -> dict[str, Any] | None:
        return self.objects.get(name)


class _Gateway:
    def __init__(self) -> None:
        self.nodes = _Informer()
        self.nodemetrics = _Informer()
        self.node_obj: dict[str, Any] = {
            "metadata": {"name": "n1", "labels": {"zone": "a"}},
            "status": {"capacity": {"cpu": "32", "memory": "128Gi"},
                       "allocatable": {"cpu": "32", "memory": "128Gi"}},
        }  # fmt: skip
        self.status_writes = 0
        self.label_patches: list[dict[str, Any]] = []

    def node_names(self) -> list[str]:
        return ["n1"]

    def node(self, name: str) -> Node:
        return cast(Node, copy.deepcopy(self.node_obj))

    get_node = node

    def nodemetric(self, name: str) -> None:
        return None

    def pods_on_node(self, name: str) -> list[Any]:
        return []

    def update_node_status(self, name: str, mutate: Callable[[Node], Node | None]) -> Node | None:
        new = mutate(self.node(name))
        assert new is not None
        self.node_obj["status"] = copy.deepcopy(dict(new["status"]))
        self.status_writes += 1
        return self.node(name)

    def patch_node_metadata(
        self, name: str, annotations: Mapping[str, Any] | None = None, labels: Mapping[str, Any] | None = None
    ) -> Node:
        meta = self.node_obj["metadata"]
        for key, changes in (("annotations", annotations), ("labels", labels)):
            for k, v in (changes or {}).items():
                meta.setdefault(key, {})[k] = v
        if labels:
            self.label_patches.append(dict(labels))
        return self.node(name)


class _Config:
    def __init__(self, enable: bool) -> None:
        text = json.dumps({"enable": enable})
        self.cfg: SLOControllerConfig = parse_slo_controller_config({"colocation-config": text})[0]

    def available(self) -> bool:
        return True

    def current(self) -> SLOControllerConfig:
        return self.cfg

    def on_change(self, fn: Callable[[], None]) -> None:
        pass


def _device(
    unhealthy: frozenset[int] = frozenset(), memory: str = "16Gi", labels: dict[str, str] | None = None
) -> dict[str, Any]:
    cards = [{"type": "gpu", "minor": m, "health": m not in unhealthy,
              "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": memory,
                            "koordinator.sh/gpu-memory-ratio": "100"}} for m in range(4)]  # fmt: skip
    return {"metadata": {"name": "n1", "labels": {**LABELS, **(labels or {})}}, "spec": {"devices": cards}}


class World:
    def __init__(self, enable: bool = True) -> None:
        self.gateway = _Gateway()
        self.devices = _Informer()
        self.ctl = NodeResourceController(
            cast(Gateway, self.gateway), cast(ConfigController, _Config(enable)),
            ManagerMetrics(CollectorRegistry()), monotonic=lambda: 1000.0,
            devices=cast(SharedInformer[Any], self.devices),
        )  # fmt: skip

    def gpu(self) -> dict[str, str]:
        alloc = self.gateway.node_obj["status"]["allocatable"]
        assert {k: v for k, v in self.gateway.node_obj["status"]["capacity"].items() if k in GPU} == {
            k: v for k, v in alloc.items() if k in GPU
        }
        return {k: v for k, v in alloc.items() if k in GPU}

    def labels(self) -> dict[str, str]:
        return {k: v for k, v in self.gateway.node_obj["metadata"].get("labels", {}).items() if k in LABELS}


def test_sums_labels_small_moves_and_a_bad_device(caplog: pytest.LogCaptureFixture) -> None:
    w = World()
    w.devices.objects["n1"] = _device()
    w.ctl.reconcile("n1")
    assert w.gpu() == dict(zip(GPU, ("400", "400", "64Gi", "400"), strict=True))
    assert w.labels() == LABELS
    assert w.gateway.status_writes == 1

    # a driver upgrade only: the label is patched, the status is not written again
    w.devices.objects["n1"] = _device(labels=UPGRADED)
    w.ctl.reconcile("n1")
    assert w.gateway.label_patches[-1] == {"node.koordinator.sh/gpu-driver-version": "550.54.15"}
    assert w.gateway.status_writes == 1

    # 16Gi → 16.25Gi per card: 64Gi → 65Gi, 1Gi ≤ 64Gi × 0.1: not written on its own
    w.devices.objects["n1"] = _device(memory="16640Mi", labels=UPGRADED)
    w.ctl.reconcile("n1")
    assert w.gateway.status_writes == 1
    assert w.gpu()["koordinator.sh/gpu-memory"] == "64Gi"

    # a Device that does not decode: the node keeps its GPU resources and labels; one warning per error
    bad = _device()
    bad["spec"]["devices"][1]["health"] = "yes"
    w.devices.objects["n1"] = bad
    with caplog.at_level(logging.WARNING, logger="manager.controllers.noderesource"):
        w.ctl.reconcile("n1")
        w.ctl.reconcile("n1")
    warnings = [r.getMessage() for r in caplog.records if "does not decode" in r.getMessage()]
    assert warnings == [
        "noderesource: Device n1 does not decode, node GPU resources and labels kept: "
        "device.spec.devices[1].health='yes': must be a boolean"
    ]
    assert w.gpu() == dict(zip(GPU, ("400", "400", "64Gi", "400"), strict=True))
    assert w.labels()["node.koordinator.sh/gpu-driver-version"] == "550.54.15"

    # good again, minor 2 unhealthy: 300 / 48Gi, written (100000 milli > 400000 × 0.1)
    w.devices.objects["n1"] = _device(frozenset({2}))
    w.ctl.reconcile("n1")
    assert w.gpu() == dict(zip(GPU, ("300", "300", "48Gi", "300"), strict=True))
    assert w.gateway.status_writes == 2

    # the Device deleted: every GPU name removed, labels kept
    del w.devices.objects["n1"]
    w.ctl.reconcile("n1")
    assert w.gpu() == {}
    assert w.labels() == LABELS


def test_colocation_off_writes_nothing_of_the_gpus() -> None:
    w = World(enable=False)
    w.devices.objects["n1"] = _device()
    w.ctl.reconcile("n1")
    assert w.gpu() == {}
    assert w.labels() == {}


def test_device_events_requeue_on_create_delete_and_spec_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    w = World()
    queued: list[str] = []
    monkeypatch.setattr(w.ctl.controller, "enqueue", queued.append)
    [(on_add, on_update, on_delete)] = w.devices.handlers
    dev = _device()
    on_add(dev)
    on_update(dev, _device(labels={"node.koordinator.sh/gpu-model": "other"}))  # labels only: not requeued
    on_update(dev, _device(frozenset({0})))
    on_delete(dev)
    assert queued == ["n1", "n1", "n1"]
