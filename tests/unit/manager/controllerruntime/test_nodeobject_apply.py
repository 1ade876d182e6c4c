"""NodeObjectController._apply: which plans count as a write. A create refused with 409 AlreadyExists
(the controller's cache behind its own earlier create) wrote nothing and must not be counted as a
second successful create; any other failure propagates for the retry with backoff."""

from __future__ import annotations

from typing import Any

import pytest

from manager.controllers.nodeobject import NodeObjectController
from manager.controllers.specs import Plan
from manager.gateway import GatewayError


class _Writer(NodeObjectController):
    kind = "NodeMetric"

    def __init__(self, status: int | None) -> None:  # no informers: _apply touches only the hooks
        self.status = status
        self.calls: list[str] = []

    def create(self, name: str, spec: dict[str, Any]) -> Any:
        self.calls.append(f"create {name}")
        if self.status is not None:
            raise GatewayError("create", self.kind, name, self.status, RuntimeError("refused"))
        return {"metadata": {"name": name}, "spec": spec}

    def update(self, old: Any, spec: dict[str, Any]) -> Any:
        self.calls.append("update")
        return old

    def delete(self, name: str) -> bool:
        self.calls.append("delete")
        return True


def test_a_create_that_finds_the_object_already_there_is_not_a_write() -> None:
    w = _Writer(409)
    assert w._apply("n1", Plan("create", {"a": 1}, "createNodeMetric"), None) is False
    assert w.calls == ["create n1"]


def test_a_create_that_fails_otherwise_raises() -> None:
    with pytest.raises(GatewayError):
        _Writer(500)._apply("n1", Plan("create", {"a": 1}, "createNodeMetric"), None)


def test_writes_and_non_writes() -> None:
    w = _Writer(None)
    assert w._apply("n1", Plan("create", {"a": 1}, "createNodeMetric"), None) is True
    assert w._apply("n1", Plan("update", {"a": 2}, "updateNodeMetric"), {"spec": {}}) is True
    assert w._apply("n1", Plan("delete", reason="deleteNodeMetric"), None) is True
    assert w._apply("n1", Plan("none", {"a": 2}, "unchanged"), {"spec": {}}) is False
    assert w.calls == ["create n1", "update", "delete"]
