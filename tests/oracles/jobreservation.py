"""Readable oracle of JobReservation (docs/rules/scheduler-jobreservation.md), written apart from
scheduler/plugins/jobreservation: LessEqual dimension by dimension, elect as "the smallest of
(−priority, −wait, position)", the max-idle scan as a fold, a job's readiness by counting tasks, the
nodes a job may use, one node's Idle from its NodeInfo, and the Filter of one node. Property tests
compare the production code with it.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence
from functools import reduce
from typing import Any

from scheduler.framework.snapshot import NodeInfo
from scheduler.plugins.resourcemath import is_scalar_resource

TOLERANCE = {"cpu": 10.0, "memory": 1.0}
SCALAR_TOLERANCE = 10.0
GO_ZERO = _dt.datetime(1, 1, 1, tzinfo=_dt.UTC)


def close_or_less(a: float, b: float, tolerance: float) -> bool:
    return a < b or abs(a - b) < tolerance


def fits(small: Mapping[str, float], big: Mapping[str, float]) -> bool:
    """LessEqual(small, big)."""
    for dim, tol in TOLERANCE.items():
        if not close_or_less(small.get(dim, 0.0), big.get(dim, 0.0), tol):
            return False
    big_scalars = {k: v for k, v in big.items() if k not in TOLERANCE}
    checked = [(k, v) for k, v in small.items() if k not in TOLERANCE and v > SCALAR_TOLERANCE]
    if checked and not big_scalars:
        return False
    return all(close_or_less(v, big_scalars.get(k, 0.0), SCALAR_TOLERANCE) for k, v in checked)


def empty(r: Mapping[str, float]) -> bool:
    return (
        r.get("cpu", 0.0) < 10
        and r.get("memory", 0.0) < 1
        and not any(v >= 10 for k, v in r.items() if k not in TOLERANCE)
    )


def ready(min_available: int, tasks: Iterable[tuple[str, Mapping[str, float]]]) -> bool:
    counted = {"Bound", "Binding", "Running", "Allocated", "Succeeded"}
    n = len([s for s, r in tasks if s in counted or (s == "Pending" and empty(r))])
    return n >= min_available


def wait_ns(start: _dt.datetime | None, now: _dt.datetime) -> int:
    ns = (now - (start or GO_ZERO)) // _dt.timedelta(microseconds=1) * 1000
    return min(max(ns, -(2**63)), 2**63 - 1)


def elect(target: str | None, jobs: Sequence[Any], now: _dt.datetime) -> str | None:
    """`jobs` carry name, priority, phase, schedule_start."""
    if target is not None:
        return target
    ranked = [
        ((-j.priority, -wait_ns(j.schedule_start, now), i), j.name)
        for i, j in enumerate(jobs)
        if j.phase == "Pending"
    ]
    return min(ranked)[1] if ranked else None


def max_idle(nodes: Sequence[tuple[str, Mapping[str, float]]], locked: set[str]) -> str | None:
    unlocked = [n for n in nodes if n[0] not in locked]
    if not unlocked:
        return None
    return reduce(lambda best, node: node if fits(best[1], node[1]) else best, unlocked)[0]


def allowed(target: str | None, locked: set[str], job: str, nodes: Sequence[str]) -> list[str]:
    if target is not None and locked and job != target:
        return [n for n in nodes if n not in locked]
    return list(nodes)


def idle(info: NodeInfo) -> dict[str, float]:
    """One node's Idle in Volcano units from its NodeInfo (snapshot units: scalars are whole units)."""
    out = {
        "cpu": float(info.allocatable.get("cpu", 0) - info.requested.get("cpu", 0)),
        "memory": float(info.allocatable.get("memory", 0) - info.requested.get("memory", 0)),
    }
    for name in {*info.allocatable, *info.requested}:
        value = info.allocatable.get(name, 0) - info.requested.get(name, 0)
        if is_scalar_resource(name) and (info.allocatable.get(name, 0) or info.requested.get(name, 0)):
            out[name] = float(value * 1000)
    return out


def rejects(target: str | None, locked: set[str], pod_job: str | None, node: str) -> bool:
    """The Filter on one node: locked, a target exists, and the pod is not of the target."""
    return target is not None and node in locked and pod_job != target
