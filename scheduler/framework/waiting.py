"""Pods held at Permit (docs/architecture.md#waiting-pods), as kube's framework keeps them: a
WaitingPod waits for every Permit plugin that answered Wait, each with its own timeout; one allow per
plugin, and the pod is released when none is left; one reject (or one plugin's timeout) rejects it.
WaitingPodMap is the profile's set of them, by pod key, which plugins iterate through their handle
(`waiting_pods`, kube's IterateOverWaitingPods) to allow or reject a gang's members.
Imports: standard library, apis.waits, scheduler.framework (interfaces, status).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from apis.waits import clamp_seconds
from scheduler.framework.interfaces import Pod
from scheduler.framework.interfaces import WaitingPod as WaitingPodProtocol
from scheduler.framework.status import Status


class WaitingPod:
    """A reserved pod `pod` (assumed on `node`) held by the plugins of `timeouts` (plugin -> seconds)."""

    def __init__(
        self, pod: Pod, node: str, timeouts: Mapping[str, float], clock: Callable[[], float] = time.monotonic
    ) -> None:
        meta = pod.get("metadata") or {}
        self.pod = pod
        self.key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        self.node = node
        self._clock = clock
        now = clock()
        self._deadlines = {
            plugin: now + clamp_seconds(t, f"{plugin or 'Permit'}: permit wait")
            for plugin, t in timeouts.items()
        }
        self._lock = threading.Lock()
        self._done = threading.Event()
        self.status = Status.success()
        if not self._deadlines:
            self._done.set()

    @property
    def pending_plugins(self) -> list[str]:
        with self._lock:
            return sorted(self._deadlines)

    def allow(self, plugin: str = "") -> None:
        """`plugin` no longer holds the pod (an empty name: every plugin lets it go)."""
        with self._lock:
            if plugin:
                self._deadlines.pop(plugin, None)
            else:
                self._deadlines.clear()
            if not self._deadlines:
                self._done.set()

    def reject(self, plugin: str, message: str = "") -> None:
        with self._lock:
            if self._done.is_set():
                return
            self.status = Status.unschedulable(message, plugin=plugin)
            self._done.set()

    def wait(self) -> Status:
        """Blocks until allowed by every plugin, rejected, or a plugin's timeout passes first."""
        while True:
            with self._lock:
                if self._done.is_set():
                    return self.status
                plugin, deadline = min(self._deadlines.items(), key=lambda kv: kv[1])
            left = deadline - self._clock()
            if left <= 0:
                with self._lock:
                    if self._done.is_set():
                        return self.status
                    self.status = Status.unschedulable(
                        f"pod {self.key} rejected while waiting on permit: timeout", plugin=plugin
                    )
                    self._done.set()
                    return self.status
            self._done.wait(left)


class WaitingPodMap(dict[str, WaitingPod]):
    """The pods held at Permit, by namespace/name; the handle Permit plugins iterate."""

    def waiting_pods(self) -> list[WaitingPodProtocol]:
        return list(self.values())
