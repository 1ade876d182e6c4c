"""The pure decisions of job reservation (docs/rules/scheduler-jobreservation.md), as Volcano v1.1.0's
elect and reserve actions and reservation plugin take them: `less_equal` and `is_empty` on Volcano
resources, `ready_task_num`, `elect` (docs/rules/scheduler-jobreservation.md#elect), `lock_step`
(docs/rules/scheduler-jobreservation.md#reserve) and `allowed_nodes`
(docs/rules/scheduler-jobreservation.md#locked-nodes). The scheduler plugin and `koord simulate` kind
`JobReservation` both run them. No clock is read: `now` is given.
Imports: the standard library, apis (quantity), scheduler.plugins.resourcemath.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from apis.quantity import Quantity
from scheduler.plugins.resourcemath import is_scalar_resource

# docs/rules/scheduler-jobreservation.md#lessequal: Volcano's tolerances.
MIN_MILLI_CPU: Final = 10.0
MIN_MEMORY: Final = 1.0
MIN_MILLI_SCALAR: Final = 10.0
CPU: Final = "cpu"
MEMORY: Final = "memory"
# docs/rules/scheduler-jobreservation.md#ready-task-num: the task statuses that occupy resources.
ALLOCATED_STATUSES: Final = frozenset({"Bound", "Binding", "Running", "Allocated"})
PENDING: Final = "Pending"
SUCCEEDED: Final = "Succeeded"
# Go's zero time.Time and time.Duration's range (Sub saturates at it).
ZERO_TIME: Final = _dt.datetime(1, 1, 1, tzinfo=_dt.UTC)
MAX_DURATION: Final = (1 << 63) - 1
MIN_DURATION: Final = -(1 << 63)

Resource = Mapping[str, float]
"""A Volcano Resource: ``cpu`` in milli-cores, ``memory`` in bytes, every other key a scalar resource in
milli-units (float64, as Volcano keeps them)."""


def resource_of(resources: Mapping[str, Quantity]) -> dict[str, float]:
    """Volcano's NewResource of a ResourceList (docs/rules/scheduler-jobreservation.md#lessequal): cpu as
    MilliValue, memory as Value, scalar resource names (extended, hugepages, ``kubernetes.io/``-prefixed)
    as MilliValue; `pods`, `ephemeral-storage` and other names are not dimensions."""
    out: dict[str, float] = {}
    for name, q in resources.items():
        if name == CPU:
            out[CPU] = out.get(CPU, 0.0) + float(q.milli_value())
        elif name == MEMORY:
            out[MEMORY] = out.get(MEMORY, 0.0) + float(q.value())
        elif is_scalar_resource(name):
            out[name] = out.get(name, 0.0) + float(q.milli_value())
    return out


def scalars(r: Resource) -> dict[str, float]:
    return {k: v for k, v in r.items() if k not in (CPU, MEMORY)}


def _le(a: float, b: float, tolerance: float) -> bool:
    return a < b or abs(a - b) < tolerance


def less_equal(left: Resource, right: Resource) -> bool:
    """docs/rules/scheduler-jobreservation.md#lessequal: cpu, then memory, then each scalar of `left`
    above 10 milli-units against `right`'s (false when `right` has no scalar at all; 0 when it lacks
    that one). Scalars only `right` has are ignored."""
    if not _le(float(left.get(CPU, 0.0)), float(right.get(CPU, 0.0)), MIN_MILLI_CPU):
        return False
    if not _le(float(left.get(MEMORY, 0.0)), float(right.get(MEMORY, 0.0)), MIN_MEMORY):
        return False
    theirs = scalars(right)
    for name, value in scalars(left).items():
        if value <= MIN_MILLI_SCALAR:
            continue
        if not theirs:
            return False
        if not _le(float(value), float(theirs.get(name, 0.0)), MIN_MILLI_SCALAR):
            return False
    return True


def is_empty(r: Resource) -> bool:
    """docs/rules/scheduler-jobreservation.md#ready-task-num: cpu < 10 milli, memory < 1 byte and every
    scalar < 10 milli-units."""
    if not (r.get(CPU, 0.0) < MIN_MILLI_CPU and r.get(MEMORY, 0.0) < MIN_MEMORY):
        return False
    return all(v < MIN_MILLI_SCALAR for v in scalars(r).values())


@dataclass(frozen=True, slots=True)
class Task:
    status: str  # Volcano's TaskStatus name: Pending, Allocated, Binding, Bound, Running, Succeeded, ...
    resreq: Resource = field(default_factory=dict)  # its InitResreq


@dataclass(frozen=True, slots=True)
class Job:
    """What elect and reserve read of a Volcano JobInfo. `schedule_start` None is the zero time."""

    name: str
    priority: int = 0
    phase: str = PENDING  # the PodGroup phase; only Pending jobs are elected
    schedule_start: _dt.datetime | None = None
    min_available: int = 0
    tasks: tuple[Task, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeIdle:
    name: str
    idle: Resource


def ready_task_num(job: Job) -> int:
    """docs/rules/scheduler-jobreservation.md#ready-task-num: tasks Bound, Binding, Running, Allocated or
    Succeeded, plus Pending tasks whose InitResreq is empty."""
    occupied = ALLOCATED_STATUSES | {SUCCEEDED}
    return sum(1 for t in job.tasks if t.status in occupied or (t.status == PENDING and is_empty(t.resreq)))


def is_ready(job: Job) -> bool:
    return ready_task_num(job) >= job.min_available


def waiting_ns(job: Job, now: _dt.datetime) -> int:
    """`now − scheduleStartTimestamp` as a Go Duration: nanoseconds, saturated to int64 (a zero stamp
    has waited the longest)."""
    start = job.schedule_start or ZERO_TIME
    delta = now - start
    ns = (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
    return max(MIN_DURATION, min(MAX_DURATION, ns))


def elect(target: str | None, jobs: Sequence[Job], now: _dt.datetime) -> str | None:
    """docs/rules/scheduler-jobreservation.md#elect: kept when there is a target; else among the Pending
    jobs those of the highest priority, and of them the first with the strictly longest wait."""
    if target is not None:
        return target
    candidates = [j for j in jobs if j.phase == PENDING]
    if not candidates:
        return None
    highest = max(j.priority for j in candidates)
    best: Job | None = None
    best_wait = 0
    for job in (j for j in candidates if j.priority == highest):
        wait = waiting_ns(job, now)
        if best is None or wait > best_wait:
            best, best_wait = job, wait
    return None if best is None else best.name


@dataclass(frozen=True, slots=True)
class LockStep:
    """One reserve action's outcome: the target, the locked node names, the node locked now (if any)
    and, on a reset, why (``gone`` or ``ready``)."""

    target: str | None
    locked: frozenset[str]
    newly_locked: str | None = None
    released: str = ""


def max_idle(nodes: Iterable[NodeIdle], locked: frozenset[str] | set[str]) -> NodeIdle | None:
    """docs/rules/scheduler-jobreservation.md#reserve: the unlocked node with the maximum idle, scanning
    in order; a node replaces the maximum when the maximum's idle is LessEqual its own (so the last of
    equal nodes wins, and of incomparable ones the first seen stays)."""
    best: NodeIdle | None = None
    for node in nodes:
        if node.name in locked:
            continue
        if best is None or less_equal(best.idle, node.idle):
            best = node
    return best


def lock_step(
    target: str | None, jobs: Sequence[Job], nodes: Iterable[NodeIdle], locked: Iterable[str]
) -> LockStep:
    """docs/rules/scheduler-jobreservation.md#reserve: nothing without a target; a reset when the target
    is gone or ready; else one more node locked (none when every node is locked). `nodes` is read only
    in that last case."""
    held = frozenset(locked)
    if target is None:
        return LockStep(None, held)
    job = next((j for j in jobs if j.name == target), None)
    if job is None:
        return LockStep(None, frozenset(), released="gone")
    if is_ready(job):
        return LockStep(None, frozenset(), released="ready")
    node = max_idle(nodes, held)
    if node is None:
        return LockStep(target, held)
    return LockStep(target, held | {node.name}, node.name)


def allowed_nodes(target: str | None, locked: Iterable[str], job: str, nodes: Sequence[str]) -> list[str]:
    """docs/rules/scheduler-jobreservation.md#locked-nodes: while there is a target and a locked node,
    every job but the target gets only the unlocked nodes; otherwise every node."""
    held = frozenset(locked)
    if target is None or not held or job == target:
        return list(nodes)
    return [n for n in nodes if n not in held]
