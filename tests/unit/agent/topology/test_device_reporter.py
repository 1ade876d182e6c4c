"""The Device reporter loop (docs/rules/koordlet-gpu.md#reporting) over a recording fake of the custom-object
API and the fake card tree: create when missing, no write when unchanged, a merge patch when a card
changes, failures counted and retried on the next tick, nothing before the Node is observed."""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent.gateway import KubeGateway
from agent.system.gpu import FakeGPUBackend
from agent.topology.device_reporter import DeviceAPI, DeviceReporter
from tests.fixtures.gpus import FakeCard, write_card_tree

GROUP = ("scheduling.koordinator.sh", "v1alpha1", "devices")


def _merge(target: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """RFC 7386 JSON merge patch."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        elif isinstance(value, Mapping):
            target[key] = _merge({}, value)
        else:
            target[key] = copy.deepcopy(value)
    return target


class GatewayLikeError(RuntimeError):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class FakeAPI:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.calls: list[str] = []
        self.fail: str = ""

    def _check(self, what: str) -> None:
        self.calls.append(what)
        if self.fail == what:
            raise GatewayLikeError(f"devices: {what} failed: 503 Service Unavailable", 503)

    def get_custom_object(self, group: str, version: str, plural: str, name: str) -> Mapping[str, Any] | None:
        assert (group, version, plural) == GROUP
        self._check("get")
        obj = self.objects.get(name)
        return copy.deepcopy(obj) if obj is not None else None

    def create_custom_object(self, group: str, version: str, plural: str, body: Mapping[str, Any]) -> Any:
        assert (group, version, plural) == GROUP
        self._check("create")
        name = body["metadata"]["name"]
        if name in self.objects:
            raise GatewayLikeError(f"devices/{name}: POST failed: 409 Conflict", 409)
        self.objects[name] = copy.deepcopy(dict(body))

    def merge_patch_custom_object(
        self, group: str, version: str, plural: str, name: str, patch: Mapping[str, Any]
    ) -> Any:
        assert (group, version, plural) == GROUP
        self._check("patch")
        _merge(self.objects[name], patch)


def _reporter(tmp_path: Path, api: FakeAPI, uid: str | None = "node-uid") -> tuple[DeviceReporter, list[str]]:
    results: list[str] = []
    reporter = DeviceReporter(
        api,
        FakeGPUBackend(tmp_path),
        "node-a",
        node_uid=lambda: uid,
        on_result=results.append,
        clock=lambda: datetime(2026, 11, 27, 21, 0, tzinfo=UTC),
    )
    return reporter, results


def test_create_then_unchanged_then_update(tmp_path: Path) -> None:
    write_card_tree(tmp_path, [FakeCard(f"GPU-{i}", i, bus_id=f"0000:{0x3B + i:02x}:00.0") for i in range(4)])
    api = FakeAPI()
    reporter, results = _reporter(tmp_path, api)
    assert reporter.tick() == "created"
    created = api.objects["node-a"]
    assert created["metadata"]["ownerReferences"][0]["uid"] == "node-uid"
    assert [d["minor"] for d in created["spec"]["devices"]] == [0, 1, 2, 3]

    api.calls.clear()
    assert reporter.tick() == "unchanged"
    assert api.calls == ["get"]  # no write when nothing changed

    (tmp_path / "gpus" / "2" / "healthy").write_text("false\n")
    assert reporter.tick() == "updated"
    assert [d["health"] for d in api.objects["node-a"]["spec"]["devices"]] == [True, True, False, True]
    assert reporter.tick() == "unchanged"
    assert results == ["succeeded", "succeeded"]  # writes only
    assert reporter.failures == 0


def test_failed_write_is_counted_and_retried(tmp_path: Path) -> None:
    write_card_tree(tmp_path, [FakeCard("GPU-0", 0)])
    api = FakeAPI()
    reporter, results = _reporter(tmp_path, api)
    api.fail = "create"
    assert reporter.tick() == "failed"
    assert reporter.tick() == "failed"
    assert reporter.failures == 2
    api.fail = ""
    assert reporter.tick() == "created"
    (tmp_path / "gpus" / "0" / "memory_total_bytes").write_text(str(40 * 1024**3))
    api.fail = "patch"
    assert reporter.tick() == "failed"
    api.fail = ""
    assert reporter.tick() == "updated"
    assert api.objects["node-a"]["spec"]["devices"][0]["resources"]["koordinator.sh/gpu-memory"] == "40Gi"
    assert reporter.failures == 3
    assert results == ["failed", "failed", "succeeded", "failed", "succeeded"]


def test_created_meanwhile_is_read_back(tmp_path: Path) -> None:
    write_card_tree(tmp_path, [FakeCard("GPU-0", 0)])
    api = FakeAPI()
    reporter, results = _reporter(tmp_path, api)
    reporter.tick()
    (tmp_path / "gpus" / "0" / "healthy").write_text("0")
    real_get = api.get_custom_object
    misses = iter([None])  # the first get misses the object (e.g. another koordlet run just created it)

    def get(group: str, version: str, plural: str, name: str) -> Mapping[str, Any] | None:
        return next(misses, real_get(group, version, plural, name))

    api.get_custom_object = get  # type: ignore[method-assign]
    assert reporter.tick() == "updated"  # 409 on create: read back and patched
    assert api.objects["node-a"]["spec"]["devices"][0]["health"] is False
    assert reporter.failures == 0 and results == ["succeeded", "succeeded"]


def test_get_failure_is_a_failed_tick(tmp_path: Path) -> None:
    api = FakeAPI()
    api.fail = "get"
    reporter, _ = _reporter(tmp_path, api)
    assert reporter.tick() == "failed"
    assert api.calls == ["get"]


def test_bad_card_tree_is_a_failed_tick_without_api_calls(tmp_path: Path) -> None:
    write_card_tree(tmp_path, [FakeCard("GPU-0", 0, memory_total_bytes="x")])  # type: ignore[arg-type]
    api = FakeAPI()
    reporter, _ = _reporter(tmp_path, api)
    assert reporter.tick() == "failed"
    assert api.calls == []


def test_nothing_before_the_node_is_observed(tmp_path: Path) -> None:
    api = FakeAPI()
    reporter, _ = _reporter(tmp_path, api, uid=None)
    assert reporter.tick() == "skipped"
    assert api.calls == []


def test_node_without_cards_gets_an_empty_device(tmp_path: Path) -> None:
    api = FakeAPI()
    reporter, _ = _reporter(tmp_path, api)
    assert reporter.tick() == "created"
    assert api.objects["node-a"]["spec"] == {}


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="node name"):
        DeviceReporter(FakeAPI(), FakeGPUBackend(Path("/nonexistent")), "", node_uid=lambda: "u")
    with pytest.raises(ValueError, match="--node-topology-sync-interval"):
        DeviceReporter(FakeAPI(), FakeGPUBackend(Path("/nonexistent")), "n", 0, node_uid=lambda: "u")


class _StopAfter(threading.Event):
    """A stop event that sets itself on the n-th wait (no sleeping, no timing)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout or 0.0)
        if len(self.waits) >= self.n:
            self.set()
        return self.is_set()


def test_run_ticks_at_once_then_every_interval(tmp_path: Path) -> None:
    api = FakeAPI()
    reporter, results = _reporter(tmp_path, api)
    stop = _StopAfter(3)
    reporter.run(stop)
    assert results == ["succeeded"]
    assert api.calls == ["get", "create", "get", "get"]
    assert stop.waits == [3.0, 3.0, 3.0]  # upstream's 3 s default


def _gateway_is_a_device_api(gateway: KubeGateway) -> DeviceAPI:
    """mypy checks that the koordlet's gateway can be handed to the reporter as is."""
    return gateway
