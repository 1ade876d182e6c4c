"""The koord mapping of Volcano's session model (docs/rules/scheduler-jobreservation.md#jobs): a gang of
the Coscheduling gang cache as a Volcano job (its tasks, priority, min, phase and schedule start), and
the snapshot's nodes with their idle resources in Volcano units (docs/rules/scheduler-jobreservation.md#idle).
Pure: the gang, the failure stamps and the snapshot are given.
Imports: the standard library, numpy, apis (pod, quantity), scheduler.framework (snapshot, units),
scheduler.plugins (resourcemath, coscheduling.gang), this package's decisions.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator, Mapping
from typing import Any, Final

import numpy as np

from apis.pod import phase, pod_requests
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.coscheduling.gang import Gang
from scheduler.plugins.jobreservation.decisions import CPU, MEMORY, Job, NodeIdle, Task, is_ready, resource_of
from scheduler.plugins.resourcemath import is_scalar_resource

# docs/rules/scheduler-jobreservation.md#candidates: the PodGroup phases a gang maps to.
PHASE_PENDING: Final = "Pending"  # a candidate: elect may choose it
PHASE_INQUEUE: Final = "Inqueue"  # not ready, no failed attempt since it last was ready
PHASE_RUNNING: Final = "Running"  # ready

VALID_STATUSES: Final = frozenset({"Pending", "Allocated", "Binding", "Bound", "Running", "Succeeded"})

Pod = Mapping[str, Any]


def task_status(pod: Pod, bound: bool, waiting: bool) -> str:
    """docs/rules/scheduler-jobreservation.md#jobs: a terminated pod by its phase; a bound one Running
    (phase Running) or Bound; one held at Permit (assumed) Allocated; any other Pending."""
    ph = phase(pod)
    if ph in ("Succeeded", "Failed"):
        return ph
    if bound:
        return "Running" if ph == "Running" else "Bound"
    return "Allocated" if waiting else "Pending"


def priority(pod: Pod) -> int:
    value = (pod.get("spec") or {}).get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class Resreqs:
    """Each pending pod's requests in Volcano units, kept by pod object (a pod is recomputed only when
    the informer replaced it); entries of pods not asked for in a pass are dropped."""

    def __init__(self) -> None:
        self._by_key: dict[str, tuple[Pod, dict[str, float]]] = {}
        self._seen: set[str] = set()

    def of(self, key: str, pod: Pod) -> dict[str, float]:
        self._seen.add(key)
        found = self._by_key.get(key)
        if found is not None and found[0] is pod:
            return found[1]
        r = resource_of(pod_requests(pod))
        self._by_key[key] = (pod, r)
        return r

    def sweep(self) -> None:
        for key in [k for k in self._by_key if k not in self._seen]:
            del self._by_key[key]
        self._seen = set()


def valid_task_num(job: Job) -> int:
    """Volcano's ValidTaskNum: the tasks Pending, Allocated, Binding, Bound, Running or Succeeded (koord's
    mapping gives no Pipelined task); a job with fewer than its min is not in the session
    (docs/rules/scheduler-jobreservation.md#jobs)."""
    return sum(1 for t in job.tasks if t.status in VALID_STATUSES)


def job_of(gang: Gang, failed_since: _dt.datetime | None, resreqs: Resreqs) -> Job:
    """The gang as a Volcano job: min = minMember, priority = the highest `spec.priority` of its pods,
    phase Pending when it is a candidate (`failed_since` set: a failed attempt since it last was ready)
    and not ready, Running when ready, else Inqueue (docs/rules/scheduler-jobreservation.md#candidates)."""
    tasks = []
    top: int | None = None
    for key, pod in gang.children.items():
        p = priority(pod)
        top = p if top is None else max(top, p)
        status = task_status(pod, key in gang.bound, key in gang.waiting_for_bind)
        resreq = resreqs.of(key, pod) if status == "Pending" else {}
        tasks.append(Task(status, resreq))
    job = Job(gang.name, top or 0, PHASE_INQUEUE, failed_since, gang.min_required, tuple(tasks))
    if is_ready(job):
        return Job(job.name, job.priority, PHASE_RUNNING, None, job.min_available, job.tasks)
    if failed_since is not None:
        return Job(job.name, job.priority, PHASE_PENDING, failed_since, job.min_available, job.tasks)
    return job


def node_idles(snapshot: Snapshot) -> Iterator[NodeIdle]:
    """Every node of the snapshot in name order with Idle = allocatable − requested (the matrices
    NodeResourcesFit reads): cpu in milli-cores, memory in bytes, scalar resources ×1000 (milli-units);
    a node's scalars are the names of its allocatable or requested
    (docs/rules/scheduler-jobreservation.md#idle)."""
    n = snapshot.n
    if n == 0:
        return
    idle = snapshot.allocatable - snapshot.requested
    present = (snapshot.allocatable != 0) | (snapshot.requested != 0)
    col = snapshot.col
    cpu = idle[col[CPU]].tolist() if CPU in col else [0] * n
    mem = idle[col[MEMORY]].tolist() if MEMORY in col else [0] * n
    extra = [(name, j) for name, j in col.items() if is_scalar_resource(name)]
    scalar_rows = [(name, idle[j].tolist(), present[j].tolist()) for name, j in extra]
    names = snapshot.names
    for i in np.argsort(snapshot.name_rank, kind="stable").tolist():
        r: dict[str, float] = {CPU: float(cpu[i]), MEMORY: float(mem[i])}
        for name, values, has in scalar_rows:
            if has[i]:
                r[name] = float(values[i] * 1000)
        yield NodeIdle(names[i], r)
