"""The Device reporter loop (docs/rules/koordlet-gpu.md#reporting): every interval (upstream's
``--node-topology-sync-interval``, 3 s) it reads the GPUs, builds this node's ``Device`` object, creates it
when the API server has none, and merge-patches it only when it differs (agent.topology.device). A failed
read or write is logged, counted and simply retried on the next tick; nothing is written while the Node
has not been observed (its UID owns the Device).

It talks to the API server only through the small ``DeviceAPI`` protocol (the koordlet's gateway
implements it) and to the cards only through a ``GPUBackend``.
Imports: standard library, apis.{device,rfc3339}, agent.system.gpu, agent.topology.{device,upsert}.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from agent.system.gpu import GPUBackend, GPUError
from agent.topology.device import build_device, device_changed, device_patch
from agent.topology.upsert import upsert
from apis.device import DEVICE_GROUP, DEVICE_PLURAL, DEVICE_VERSION
from apis.rfc3339 import format_rfc3339

__all__ = ["DEFAULT_INTERVAL_SECONDS", "DeviceAPI", "DeviceReporter"]

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_SECONDS: Final = 3.0
"""Upstream's ``--node-topology-sync-interval`` default."""


class DeviceAPI(Protocol):
    """Generic custom-object access (cluster-scoped objects); errors are raised as exceptions naming the
    object. ``get_custom_object`` returns None when the object does not exist (HTTP 404)."""

    def get_custom_object(
        self, group: str, version: str, plural: str, name: str
    ) -> Mapping[str, Any] | None: ...

    def create_custom_object(self, group: str, version: str, plural: str, body: Mapping[str, Any]) -> Any: ...

    def merge_patch_custom_object(
        self, group: str, version: str, plural: str, name: str, patch: Mapping[str, Any]
    ) -> Any: ...


def _utcnow() -> datetime:
    return datetime.now(UTC)


class DeviceReporter:
    """One node's Device reporter. ``node_uid`` returns the Node's UID once observed (None before).
    ``tick()`` returns ``created``, ``updated``, ``unchanged``, ``skipped`` (Node not observed yet) or
    ``failed``; ``on_result(status)`` hears each write's ``succeeded`` or ``failed`` (an unchanged or
    skipped tick writes nothing), as the NodeResourceTopology reporter's does."""

    def __init__(
        self,
        api: DeviceAPI,
        backend: GPUBackend,
        node_name: str,
        interval_seconds: float = DEFAULT_INTERVAL_SECONDS,
        *,
        node_uid: Callable[[], str | None],
        on_result: Callable[[str], None] | None = None,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        if not node_name:
            raise ValueError("node name is required (flag --node-name or env NODE_NAME)")
        if not interval_seconds > 0:
            raise ValueError(f"--node-topology-sync-interval: {interval_seconds} s must be > 0")
        self.api = api
        self.backend = backend
        self.node_name = node_name
        self.interval_seconds = interval_seconds
        self._node_uid = node_uid
        self._on_result = on_result
        self._clock = clock
        self.failures = 0
        """Ticks whose read or write failed (each retried on the next tick)."""
        self.last_result = ""
        self._last_error = ""

    def _done(self, result: str) -> str:
        self.last_result = result
        status = {"created": "succeeded", "updated": "succeeded", "failed": "failed"}.get(result)
        if status is not None and self._on_result is not None:
            self._on_result(status)
        return result

    def _failed(self, what: str, error: Exception) -> str:
        self.failures += 1
        message = f"{what}: {error}"
        # Logged at warning once per distinct error, so an API server outage is not a log line a tick.
        if message != self._last_error:
            log.warning(
                "devices/%s not reported: %s (retried every %.0f s)",
                self.node_name,
                message,
                self.interval_seconds,
            )
        self._last_error = message
        return self._done("failed")

    def tick(self) -> str:
        """One report; returns the result (see the class docstring)."""
        uid = self._node_uid()
        if not uid:
            log.debug("devices/%s: node not observed yet", self.node_name)
            return self._done("skipped")
        try:
            inventory = self.backend.inventory()
        except GPUError as e:
            return self._failed("reading the GPUs", e)
        desired = build_device(self.node_name, uid, inventory, format_rfc3339(self._clock()))
        args = (DEVICE_GROUP, DEVICE_VERSION, DEVICE_PLURAL)

        def read() -> Mapping[str, Any] | None:
            return self.api.get_custom_object(*args, self.node_name)

        try:
            result, _ = upsert(
                read(),
                create=lambda: self.api.create_custom_object(*args, desired) or desired,
                read=read,
                changed=lambda current: device_changed(desired, current),
                patch=lambda current: self.api.merge_patch_custom_object(
                    *args, self.node_name, device_patch(desired, current)
                ),
            )
        except Exception as e:  # the gateway's errors name the object; one failed tick is not fatal
            return self._failed("API", e)
        if self._last_error:
            log.info("devices/%s reported again (%s)", self.node_name, result)
            self._last_error = ""
        elif result != "unchanged":
            log.info("devices/%s %s: %d GPU(s)", self.node_name, result, len(inventory.gpus))
        return self._done(result)

    def run(self, stop: threading.Event) -> None:
        """Tick at once, then every interval until ``stop`` (a supervised thread's body)."""
        try:
            while not stop.is_set():
                self.tick()
                stop.wait(self.interval_seconds)
        finally:
            if stop.is_set():  # a crashed tick is restarted by the supervisor with the backend still open
                self.backend.close()
