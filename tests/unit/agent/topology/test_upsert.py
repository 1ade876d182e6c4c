"""upsert: create when nothing is known, read back on 409 and patch only a difference, leave an equal
object alone, and let any other failure through."""

from __future__ import annotations

from typing import Any

import pytest

from agent.topology.upsert import upsert


class _RefusedError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


def _calls(existing: dict[str, Any] | None, refuse: int | None = None) -> tuple[dict[str, Any], list[str]]:
    log: list[str] = []

    def create() -> dict[str, Any]:
        log.append("create")
        if refuse is not None:
            raise _RefusedError(refuse)
        return {"v": 2}

    def read() -> dict[str, Any] | None:
        log.append("read")
        return existing

    def patch(current: dict[str, Any]) -> dict[str, Any]:
        log.append(f"patch {current['v']}")
        return {"v": 2}

    return {"create": create, "read": read, "patch": patch, "changed": lambda o: o["v"] != 2}, log


def test_nothing_known_is_created() -> None:
    kw, log = _calls(None)
    assert upsert(None, **kw) == ("created", {"v": 2})
    assert log == ["create"]


def test_a_conflict_reads_back_and_patches_only_a_difference() -> None:
    kw, log = _calls({"v": 1}, refuse=409)
    assert upsert(None, **kw) == ("updated", {"v": 2})
    assert log == ["create", "read", "patch 1"]
    kw, log = _calls({"v": 2}, refuse=409)
    assert upsert(None, **kw) == ("unchanged", {"v": 2})
    assert log == ["create", "read"]


def test_a_known_object_is_patched_or_left_alone() -> None:
    kw, log = _calls(None)
    assert upsert({"v": 1}, **kw) == ("updated", {"v": 2})
    assert upsert({"v": 2}, **kw) == ("unchanged", {"v": 2})
    assert log == ["patch 1"]


@pytest.mark.parametrize(("refuse", "existing"), [(500, {"v": 1}), (409, None)])
def test_other_failures_propagate(refuse: int, existing: dict[str, Any] | None) -> None:
    kw, _ = _calls(existing, refuse=refuse)
    with pytest.raises(_RefusedError):
        upsert(None, **kw)
