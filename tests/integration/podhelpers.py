"""Helpers for tests that schedule pods on the real API server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.helpers.polling import eventually


def wait_for(cond: Callable[[], object], timeout: float = 30.0) -> bool:
    """Whether ``cond`` turns truthy within ``timeout`` seconds, polled every 0.1 s (for ``assert``)."""
    return eventually(cond, timeout, 0.1)


def make_pod(
    core: Any,
    ns: str,
    name: str,
    cpu: str = "500m",
    selector: dict[str, str] | None = None,
    scheduler_name: str = "koord-scheduler",
) -> None:
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "containers": [
            {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}
        ],
    }
    if selector:
        spec["nodeSelector"] = selector
    core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": spec})


def node_of(core: Any, ns: str, name: str) -> str | None:
    return core.read_namespaced_pod(name, ns).spec.node_name  # type: ignore[no-any-return]
