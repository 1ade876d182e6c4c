"""JobReservation: Volcano's elect/reserve against the starvation of big jobs, on koord's gangs
(docs/rules/scheduler-jobreservation.md). Once per session (a periodic tick of the scheduling loop,
docs/rules/scheduler-jobreservation.md#sessions) it elects a target job among the gangs that wait
(docs/rules/scheduler-jobreservation.md#elect) and locks one more node for it
(docs/rules/scheduler-jobreservation.md#reserve); its Filter keeps every other pod off the locked nodes
(docs/rules/scheduler-jobreservation.md#filter). AfterPostFilter stamps a gang's first failed attempt
(docs/rules/scheduler-jobreservation.md#candidates).

The jobs are the gangs of the profile's Coscheduling plugin (`attach`); what the sessions decide goes to
an observer (Events and metrics: docs/rules/scheduler-jobreservation.md#events-and-metrics).
Imports: the standard library, numpy, apis (pod, podgroup), scheduler.framework, scheduler.plugins
(coscheduling, this package).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import numpy as np

from apis.pod import pod_key
from apis.podgroup import gang_id, gang_name
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import BoolArray, ClusterEvent, FilterResult, Pod
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.coscheduling.cache import GangCache
from scheduler.plugins.coscheduling.gang import GANG_FROM_POD_GROUP_CRD
from scheduler.plugins.coscheduling.plugin import Coscheduling
from scheduler.plugins.jobreservation import decisions as d
from scheduler.plugins.jobreservation.args import JobReservationArgs
from scheduler.plugins.jobreservation.jobs import PHASE_RUNNING, Resreqs, job_of, node_idles, valid_task_num

NAME: Final = "JobReservation"
MAX_EVENT_PODS: Final = 16  # an annotation gang's Events go to at most this many of its pods


def reason(target: str) -> str:
    """docs/rules/scheduler-jobreservation.md#filter"""
    return f'node(s) were reserved for job "{target}"'


@dataclass(frozen=True, slots=True)
class JobRef:
    """What an Event about a job needs: its id, whether a PodGroup object declares it, and some pods."""

    name: str
    pod_group: bool
    pods: tuple[Mapping[str, Any], ...] = field(default=())


class SessionObserver(Protocol):
    """Hears what the sessions decide (the scheduling thread, under the scheduler's lock: no I/O here)."""

    def elected(self, job: JobRef) -> None: ...

    def released(self, job: JobRef, why: str, unlocked: int) -> None:
        """`why`: ``ready`` or ``gone``; `unlocked`: how many nodes were locked."""
        ...

    def locked(self, job: JobRef | None, node: str | None, count: int) -> None:
        """After every session: the node locked in it (or None) and how many are locked."""
        ...


class _Quiet:
    def elected(self, job: JobRef) -> None:
        pass

    def released(self, job: JobRef, why: str, unlocked: int) -> None:
        pass

    def locked(self, job: JobRef | None, node: str | None, count: int) -> None:
        pass


def _utc(epoch: float) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(epoch, _dt.UTC)


class JobReservation:
    name = NAME

    def __init__(
        self,
        args: JobReservationArgs | None = None,
        activate: Callable[[list[Pod]], object] | None = None,
    ) -> None:
        """`activate`: moves parked pods to the queue's activeQ (kube's Handle.Activate), for the pods
        the lock rejected once it is released."""
        self.args = args or JobReservationArgs()
        self.activate = activate
        self.gangs: GangCache | None = None
        self.observer: SessionObserver = _Quiet()
        self.target: str | None = None
        self.target_ref: JobRef | None = None
        self.locked: frozenset[str] = frozenset()
        self.failed_since: dict[str, _dt.datetime] = {}  # gang id -> its first failed attempt
        self.rejected: dict[str, Pod] = {}  # pods the lock rejected, re-activated on release
        self.sessions = 0
        self._resreqs = Resreqs()
        self._mask_key: tuple[int, int, int] | None = None
        self._mask: BoolArray = np.zeros(0, np.bool_)
        self._version = 0  # bumped whenever the target or the locks change

    @classmethod
    def from_args(
        cls, args: Mapping[str, Any] | None, activate: Callable[[list[Pod]], object] | None = None
    ) -> JobReservation:
        return cls(JobReservationArgs.from_args(args), activate)

    def attach(self, coscheduling: Coscheduling) -> None:
        """The jobs are this Coscheduling plugin's gangs (docs/rules/scheduler-jobreservation.md#wiring)."""
        self.gangs = coscheduling.cache

    @property
    def session_period(self) -> float:
        return self.args.session_period_seconds

    def events_to_register(self) -> list[ClusterEvent]:
        """A pod the lock rejected is re-activated when the lock is released; meanwhile a node that
        joins (unlocked) or a pod that leaves one may let it fit elsewhere."""
        return [ClusterEvent("Node", "Add"), ClusterEvent("Pod", "Delete")]

    # --- Filter (docs/rules/scheduler-jobreservation.md#filter) -----------------------------------------
    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        target = self.target
        if target is None or not self.locked or (gang_name(pod) and gang_id(pod) == target):
            return FilterResult.all_pass(snapshot.n)
        mask = self._locked_rows(snapshot)
        if not mask.any():
            return FilterResult.all_pass(snapshot.n)
        self.rejected[pod_key(pod)] = pod
        return FilterResult.from_mask(mask, Status.unschedulable(reason(target), plugin=NAME))

    def _locked_rows(self, snapshot: Snapshot) -> BoolArray:
        key = (id(snapshot), snapshot.layout, self._version)
        if key != self._mask_key or len(self._mask) != snapshot.n:
            mask = np.zeros(snapshot.n, np.bool_)
            rows = [i for name in self.locked if (i := snapshot.index.get(name)) is not None]
            mask[rows] = True
            self._mask, self._mask_key = mask, key
        return self._mask

    # --- AfterPostFilter (docs/rules/scheduler-jobreservation.md#candidates) ----------------------------
    def after_post_filter(self, state: CycleState, pod: Pod, fit_error: str = "") -> Status:
        if gang_name(pod):
            self.failed_since.setdefault(gang_id(pod), _utc(state.now))
        return Status.success()

    # --- the session (docs/rules/scheduler-jobreservation.md#sessions) ----------------------------------
    def on_session(self, snapshot: Snapshot, now: float) -> None:
        """elect, then reserve: one step of each, as Volcano's actions in one session."""
        self.sessions += 1
        jobs = self._jobs()
        if self.target is None:
            self.target = d.elect(None, jobs, _utc(now))
            if self.target is not None:
                self._version += 1
                self.target_ref = self._ref(self.target) or JobRef(self.target, False)
                self.observer.elected(self.target_ref)
        step = d.lock_step(self.target, jobs, node_idles(snapshot), self.locked)
        if step.released:
            ref, unlocked = self.target_ref or JobRef(str(self.target), False), len(self.locked)
            self._release()
            self.observer.released(ref, step.released, unlocked)
        elif step.newly_locked is not None:
            self.locked = step.locked
            self._version += 1
        if self.target is not None:
            self.target_ref = self._ref(self.target) or self.target_ref
        self.observer.locked(self.target_ref, step.newly_locked, len(self.locked))

    def _jobs(self) -> list[d.Job]:
        """The session's jobs: every initialised gang that passes Volcano's gang JobValid
        (docs/rules/scheduler-jobreservation.md#jobs), in the gang cache's order; stamps of gangs ready
        or gone are dropped."""
        if self.gangs is None:
            return []
        jobs = []
        for gid, gang in self.gangs.gangs.items():
            if not gang.has_init:
                continue
            job = job_of(gang, self.failed_since.get(gid), self._resreqs)
            if job.phase == PHASE_RUNNING:
                self.failed_since.pop(gid, None)
            if valid_task_num(job) >= job.min_available:
                jobs.append(job)
        for gid in [g for g in self.failed_since if g not in self.gangs.gangs]:
            del self.failed_since[gid]
        self._resreqs.sweep()
        return jobs

    def _ref(self, target: str) -> JobRef | None:
        gang = None if self.gangs is None else self.gangs.gangs.get(target)
        if gang is None:
            return None
        pods = tuple(list(gang.children.values())[:MAX_EVENT_PODS])
        return JobRef(target, gang.gang_from == GANG_FROM_POD_GROUP_CRD, pods)

    def _release(self) -> None:
        """Reset: no target, no lock; the pods the lock rejected go back to activeQ."""
        self.target, self.target_ref, self.locked = None, None, frozenset()
        self._version += 1
        rejected, self.rejected = list(self.rejected.values()), {}
        if rejected and self.activate is not None:
            self.activate(rejected)
