"""Helpers shared by the kube/ integration tests: polling, handler recording and pod bodies."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from tests.helpers import polling

T = TypeVar("T")


def wait_for(cond: Callable[[], T], timeout: float = 10.0, interval: float = 0.02, what: str = "") -> T:
    """``tests.helpers.polling.wait_for`` polling often: the local API server answers within milliseconds."""
    return polling.wait_for(cond, timeout, interval, what)


def pod(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """An unscheduled pod (no kubelet runs here; an unscheduled pod is deleted at once)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [{"name": "c", "image": "registry.invalid/pause:1"}]},
    }


class Recorder:
    """Handler callbacks that record (kind, name, old, new) in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any] | None, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def on_add(self, obj: dict[str, Any]) -> None:
        with self.lock:
            self.events.append(("add", obj["metadata"]["name"], None, obj))

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        with self.lock:
            self.events.append(("update", new["metadata"]["name"], old, new))

    def on_delete(self, obj: dict[str, Any]) -> None:
        with self.lock:
            self.events.append(("delete", obj["metadata"]["name"], None, obj))

    def handlers(self) -> dict[str, Callable[..., None]]:
        return {"on_add": self.on_add, "on_update": self.on_update, "on_delete": self.on_delete}

    def of(
        self, kind: str, name: str | None = None
    ) -> list[tuple[str, str, dict[str, Any] | None, dict[str, Any]]]:
        with self.lock:
            return [e for e in self.events if e[0] == kind and (name is None or e[1] == name)]

    def names(self, kind: str) -> list[str]:
        return [e[1] for e in self.of(kind)]
