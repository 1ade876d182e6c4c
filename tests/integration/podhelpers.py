"""Helpers for tests that schedule pods on the real API server."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(cond: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return False


def make_pod(
    core: Any, ns: str, name: str, cpu: str = "500m", selector: dict[str, str] | None = None
) -> None:
    spec: dict[str, Any] = {
        "schedulerName": "koord-scheduler",
        "containers": [
            {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}
        ],
    }
    if selector:
        spec["nodeSelector"] = selector
    core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": spec})


def node_of(core: Any, ns: str, name: str) -> str | None:
    return core.read_namespaced_pod(name, ns).spec.node_name  # type: ignore[no-any-return]
