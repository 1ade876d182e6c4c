"""``koord simulate`` for kind ``JobReservation`` (docs/simulate.md#jobreservation): the pure decisions of
elect, reserve and the locked nodes (scheduler.plugins.jobreservation.decisions) on jobs and nodes given
as Volcano sees them. Operations ``elect``, ``lockStep`` and ``allowedNodes``. Bad input raises ValueError
naming the field and its value. Pure: the clock is the scenario's ``now``.
Imports: the standard library, apis (quantity, rfc3339), this package's decisions.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any, Final

from apis.quantity import Quantity, QuantityError
from apis.rfc3339 import parse_rfc3339
from scheduler.plugins.jobreservation import decisions as d

EPOCH: Final = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
OPERATIONS: Final = ("elect", "lockStep", "allowedNodes")
INT32: Final = 1 << 31


def _fail(where: str, value: object, expected: str) -> ValueError:
    return ValueError(f"{where}={value!r:.80}: expected {expected}")


def _str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise _fail(where, value, "a string")
    return value


def _opt_str(value: object, where: str) -> str | None:
    return None if value is None else _str(value, where)


def _int32(value: object, where: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not -INT32 <= value < INT32:
        raise _fail(where, value, "an int32")
    return value


def _list(value: object, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _fail(where, value, "a list")
    return value


def _object(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, value, "an object")
    return value


def _time(value: object, where: str) -> _dt.datetime | None:
    if value is None:
        return None
    try:
        return parse_rfc3339(value)
    except ValueError as e:
        raise ValueError(f"{where}={value!r:.80}: {e}") from None


def _resources(value: object, where: str) -> dict[str, float]:
    """A ResourceList (absent or null: empty) in Volcano units."""
    if value is None:
        return {}
    raw = _object(value, where)
    parsed: dict[str, Quantity] = {}
    for name, item in raw.items():
        try:
            parsed[name] = Quantity.from_json(item)
        except QuantityError as e:
            raise ValueError(f"{where}.{name}: {e}") from None
    return d.resource_of(parsed)


def _task(value: object, where: str) -> d.Task:
    raw = _object(value, where)
    return d.Task(
        _str(raw.get("status"), f"{where}.status"), _resources(raw.get("resreq"), f"{where}.resreq")
    )


def _job(value: object, where: str) -> d.Job:
    raw = _object(value, where)
    _opt_str(raw.get("uid"), f"{where}.uid")
    phase = raw.get("podGroupPhase")
    return d.Job(
        name=_str(raw.get("name"), f"{where}.name"),
        priority=_int32(raw.get("priority"), f"{where}.priority", 0),
        phase=d.PENDING if phase is None else _str(phase, f"{where}.podGroupPhase"),
        schedule_start=_time(raw.get("scheduleStartTimestamp"), f"{where}.scheduleStartTimestamp"),
        min_available=_int32(raw.get("minAvailable"), f"{where}.minAvailable", 0),
        tasks=tuple(
            _task(t, f"{where}.tasks[{i}]") for i, t in enumerate(_list(raw.get("tasks"), f"{where}.tasks"))
        ),
    )


def _node(value: object, where: str) -> d.NodeIdle:
    """`{"name", "idle"}`; for allowedNodes a bare name is accepted too."""
    if isinstance(value, str):
        return d.NodeIdle(value, {})
    raw = _object(value, where)
    return d.NodeIdle(_str(raw.get("name"), f"{where}.name"), _resources(raw.get("idle"), f"{where}.idle"))


def _names(value: object, where: str) -> list[str]:
    return [_str(v, f"{where}[{i}]") for i, v in enumerate(_list(value, where))]


def simulate(scenario: Mapping[str, Any]) -> dict[str, Any]:
    operation = scenario.get("operation")
    if operation not in OPERATIONS:
        raise ValueError(f"operation={operation!r:.80}: expected one of {', '.join(OPERATIONS)}")
    now = _time(scenario.get("now"), "now") or EPOCH
    target = _opt_str(scenario.get("targetJob"), "targetJob")
    jobs = [_job(j, f"jobs[{i}]") for i, j in enumerate(_list(scenario.get("jobs"), "jobs"))]
    nodes = [_node(n, f"nodes[{i}]") for i, n in enumerate(_list(scenario.get("nodes"), "nodes"))]
    locked = _names(scenario.get("lockedNodes"), "lockedNodes")
    if operation == "elect":
        return {"targetJob": d.elect(target, jobs, now)}
    if operation == "lockStep":
        step = d.lock_step(target, jobs, nodes, locked)
        return {
            "targetJob": step.target,
            "lockedNodes": sorted(step.locked),
            "newlyLocked": step.newly_locked,
        }
    job = _str(scenario.get("job"), "job")
    return {"nodes": d.allowed_nodes(target, locked, job, [n.name for n in nodes])}
