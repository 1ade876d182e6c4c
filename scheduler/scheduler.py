"""The scheduling loop: pop a pod, bring the snapshot up to date (incrementally), run the profile,
Reserve, assume the pod in the cache, and bind asynchronously on a bounded worker pool. A failed
bind (an error status, or an exception such as the API server refusing connections) forgets the
assumed pod, runs Unreserve and sends the pod back to the queue (backoff). A pod the cache already
holds when the cycle would assume it (someone else bound it after the pop) is rolled back, not bound.
Unschedulable pods are parked with the plugins that rejected them and reported to a callback (the
API adapter turns that into the PodScheduled=False condition and an Event).

The Binder is injected: the API binder in production, a recording binder in benchmarks and tests.
A profile with PreEnqueue plugins has each popped pod checked first: a refused pod is parked as gated
(no attempt counted, no backoff). A profile's NextPod plugins may offer the pod to schedule next (a
gang's next member), taken out of the queue ahead of its head (docs/architecture.md#gated-pods).
Pods a Permit plugin holds wait in `waiting` (scheduler.framework.waiting), the plugins' handle.
SessionPlugins run between cycles, each every its period (`run_sessions`).
Imports: standard library, scheduler.framework, scheduler.queue, scheduler.cache, scheduler.eventlock.
"""

from __future__ import annotations

import copy
import gc
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Protocol

from scheduler.cache import SchedulerCache
from scheduler.eventlock import EventLock
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import ClusterEvent, Pod, SessionPlugin
from scheduler.framework.nominated import NominatedPods
from scheduler.framework.runtime import Framework, ScheduleResult
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.framework.waiting import WaitingPod, WaitingPodMap
from scheduler.queue import SchedulingQueue
from scheduler.queuedpod import QueuedPodInfo

log = logging.getLogger(__name__)


class Binder(Protocol):
    def bind(self, pod: Pod, node: str) -> Status: ...


@dataclass(slots=True)
class Decision:
    """What happened to one pod in one attempt (for metrics, tests and benchmarks)."""

    pod: str
    node: str | None
    status: Status
    seconds: float


@dataclass(slots=True)
class _Session:
    profile: str
    plugin: SessionPlugin
    due: float = 0.0  # monotonic time of its next session


class Scheduler:
    """`framework` is one profile, or several by schedulerName (one queue, one cache): a pod runs the
    profile its `spec.schedulerName` names, else the first. Each profile has a snapshot of its own, as
    its plugins keep their own views of the rows."""

    def __init__(
        self,
        framework: Framework | Mapping[str, Framework],
        cache: SchedulerCache,
        queue: SchedulingQueue,
        binder: Binder,
        *,
        clock: Callable[[], float] = time.time,
        bind_workers: int = 16,
        on_unschedulable: Callable[[Pod, Status], None] | None = None,
        on_decision: Callable[[Decision], None] | None = None,
        on_post_filter: Callable[[Pod, CycleState, ScheduleResult], None] | None = None,
        waiting: WaitingPodMap | None = None,
    ) -> None:
        """`on_post_filter(pod, state, result)` hears of every unschedulable result under the lock
        (the gateway carries out a preemption the cycle state holds). `waiting`: the map of pods held
        at Permit that the plugins were given (their Handle's), else a new one."""
        self.frameworks: dict[str, Framework] = (
            {"": framework} if isinstance(framework, Framework) else dict(framework)
        )
        if not self.frameworks:
            raise ValueError("Scheduler: no profile")
        self.framework = next(iter(self.frameworks.values()))
        self._snapshots = {name: Snapshot() for name in self.frameworks}
        self.cache = cache
        self.queue = queue
        self.binder = binder
        self.clock = clock
        self.snapshot = next(iter(self._snapshots.values()))
        self.on_unschedulable = on_unschedulable
        self.on_decision = on_decision
        self.on_post_filter = on_post_filter
        # The pods nominated to nodes, shared with the profiles' Filters
        # (docs/rules/scheduler-preemption.md#nominated-pods): kept by the event router, and by this
        # loop when a pod is assumed.
        found = self.framework.nominated
        self.nominated = found if found is not None else NominatedPods()
        # Plugin state is touched by cycles (this thread), bind failures (bind threads) and informer
        # events (their threads): one lock serialises them. Held for a cycle, never during a bind call.
        # Informers post their events to it rather than wait (scheduler.eventlock): they run between
        # cycles, in one batch, on this thread.
        self.lock = EventLock()
        # bind_workers=0 binds inline on the scheduling thread: for in-process binders (benchmarks,
        # simulation) where there is no I/O to overlap and thread hand-offs would only cost time.
        self._inline_bind = bind_workers == 0
        self._binds = ThreadPoolExecutor(max_workers=max(1, bind_workers), thread_name_prefix="bind")
        self._inflight = threading.Semaphore(max(1, bind_workers) * 4)  # bounds queued bind work
        self._futures: set[Future[None]] = set()
        self._futures_lock = threading.Lock()
        self.waiting = waiting if waiting is not None else WaitingPodMap()  # held by Permit, by ns/name
        # Only profiles with these points pay for them (the default profile has none).
        self._gated = any(fw.pre_enqueues for fw in self.frameworks.values())
        self._next_pods = [fw for fw in self.frameworks.values() if fw.next_pods]
        # SessionPlugins, each with the monotonic time of its next session
        # (docs/rules/scheduler-jobreservation.md#sessions).
        self._sessions = [_Session(name, p) for name, fw in self.frameworks.items() for p in fw.sessions]
        self.interested: dict[str, set[ClusterEvent]] = {}
        for fw in self.frameworks.values():
            for p in fw.plugins:
                events = getattr(p, "events_to_register", None)
                if callable(events):
                    self.interested.setdefault(p.name, set()).update(events())

    def profile_of(self, pod: Pod) -> tuple[Framework, Snapshot]:
        """The profile a pod runs, and its snapshot."""
        name = str((pod.get("spec") or {}).get("schedulerName") or "")
        if name in self.frameworks:
            return self.frameworks[name], self._snapshots[name]
        return self.framework, self.snapshot

    # --- one cycle ------------------------------------------------------------------------------------
    def schedule_one(self, timeout: float | None = None) -> bool:
        """Schedules the next pod; False when nothing was popped (timeout, or queue closed)."""
        qpi = self._next_pod() if self._next_pods else None
        if qpi is None:
            qpi = self.queue.pop(timeout)
            if qpi is None:
                return False
            if self._gated:
                fw = self.profile_of(qpi.pod)[0]
                with self.lock:
                    st = fw.pre_enqueue(qpi.pod)
                if not st.is_success():
                    self.queue.gate(qpi, st.plugin)
                    return True
        self.schedule_pod(qpi)
        return True

    def _next_pod(self) -> QueuedPodInfo | None:
        """The pod a NextPod plugin offers, taken out of the queue; None when none offers one the queue
        holds (a pod in flight or gone is skipped: the plugin has marked it attempted)."""
        with self.lock:
            for fw in self._next_pods:
                while (pod := fw.next_pod()) is not None:
                    qpi = self.queue.take(pod)
                    if qpi is not None:
                        return qpi
        return None

    def schedule_pod(self, qpi: QueuedPodInfo) -> ScheduleResult:
        start = time.perf_counter()
        pod = qpi.pod
        taken: Status | None = None
        waiting: WaitingPod | None = None
        fw, snapshot = self.profile_of(pod)
        with self.lock:
            self.cache.update_snapshot(snapshot)
            state = CycleState(self.clock())
            result = fw.schedule(state, pod, snapshot)
            if result.node is not None:
                node = result.node
                assumed = _with_node(pod, node)
                st = fw.reserve(state, assumed, node)
                if st.is_success():
                    try:
                        self.cache.assume_pod(assumed, node)
                    except ValueError as e:  # bound by someone else since the pop: the cache has it
                        fw.unreserve(state, assumed, node)
                        taken = Status.error(str(e))
                    else:
                        self.nominated.delete(pod)
                        st, waits = fw.permit_waits(state, assumed, node)
                        if st.is_rejected() or st.code == Code.ERROR:
                            self.cache.forget_pod(assumed)
                            fw.unreserve(state, assumed, node)
                        elif st.code == Code.WAIT:  # registered under the lock: plugins allow it from here on
                            waiting = WaitingPod(assumed, node, waits)
                            self.waiting[waiting.key] = waiting
            elif self.on_post_filter is not None and result.status.code != Code.ERROR:
                self.on_post_filter(pod, state, result)
        if taken is not None:
            # Not unschedulable (no condition, no Event on a bound pod), nothing to bind: an error, which
            # the queue ignores when the pod left it meanwhile (the informer saw it bound).
            self.queue.add_unschedulable(qpi, set())
            self._decided(pod, None, taken, start)
            return ScheduleResult(None, taken)
        if result.node is None:
            self._unschedulable(qpi, result)
            self._decided(pod, None, result.status, start)
            return result
        if not st.is_success() and st.code != Code.WAIT:
            self._unschedulable(qpi, ScheduleResult(None, st))
            self._decided(pod, None, st, start)
            return result
        if self._inline_bind and waiting is None:
            self._inflight.acquire()
            self._bind(qpi, state, assumed, node, start)
            return result
        self._inflight.acquire()
        fut = self._binds.submit(self._bind, qpi, state, assumed, node, start, waiting)
        with self._futures_lock:
            self._futures.add(fut)
        fut.add_done_callback(self._forget_future)
        return result

    def _bind(
        self, qpi: QueuedPodInfo, state: CycleState, pod: Pod, node: str, start: float,
        waiting: WaitingPod | None = None,
    ) -> None:  # fmt: skip
        fw = self.profile_of(pod)[0]
        try:
            st = Status.success()
            if waiting is not None:
                st = waiting.wait()
                with self.lock:
                    if self.waiting.get(waiting.key) is waiting:
                        del self.waiting[waiting.key]
                if not st.is_success():
                    with self.lock:
                        self.cache.forget_pod(pod)
                        fw.unreserve(state, pod, node)
                    self._unschedulable(qpi, ScheduleResult(None, st))
                    self._decided(pod, None, st, start)
                    return
            try:
                st = fw.pre_bind(state, pod, node)
                if st.is_success():
                    st = self.binder.bind(pod, node)
            except Exception as e:  # a connection error, say: the bind failed, the pod must not be lost
                st = Status.error(
                    f"binding {_key(pod)} to {node}: {type(e).__name__}: {e}", plugin="DefaultBinder"
                )
                log.warning("%s", st.message())
            if not st.is_success():
                with self.lock:
                    self.cache.forget_pod(pod)
                    fw.unreserve(state, pod, node)
                self.queue.add_unschedulable(qpi, set())  # an error, not unschedulability: backoff
                self._decided(pod, None, st, start)
                return
            self.cache.finish_binding(pod)
            fw.post_bind(state, pod, node)
            self.queue.done(pod)
            self._decided(pod, node, st, start)
        finally:
            self._inflight.release()

    def _unschedulable(self, qpi: QueuedPodInfo, result: ScheduleResult) -> None:
        if result.status.code == Code.ERROR:
            rejected: set[str] = set()  # errors retry after backoff whatever the events
        else:
            rejected = result.rejections.plugins() | {result.status.plugin}
        self.queue.add_unschedulable(qpi, rejected - {""})
        if self.on_unschedulable is not None:
            self.on_unschedulable(qpi.pod, result.status)

    def _decided(self, pod: Pod, node: str | None, status: Status, start: float) -> None:
        if self.on_decision is not None:
            self.on_decision(Decision(_key(pod), node, status, time.perf_counter() - start))

    # --- cluster events -----------------------------------------------------------------------------
    def on_event(self, event: ClusterEvent) -> None:
        """Moves parked pods whose rejecting plugins care about this event."""
        self.queue.move_to_active_or_backoff(event, self.interested)

    # --- loop ------------------------------------------------------------------------------------------
    def run_sessions(self) -> int:
        """Runs the SessionPlugins whose period has passed, each under the lock with its profile's
        snapshot brought up to date (docs/rules/scheduler-jobreservation.md#sessions); how many ran."""
        ran = 0
        for session in self._sessions:
            if time.monotonic() < session.due:
                continue
            with self.lock:
                snapshot = self._snapshots[session.profile]
                self.cache.update_snapshot(snapshot)
                session.plugin.on_session(snapshot, self.clock())
            session.due = time.monotonic() + session.plugin.session_period
            ran += 1
        return ran

    def run(self, stop: threading.Event, flush_every: float = 1.0) -> None:
        next_flush = time.monotonic() + flush_every
        while not stop.is_set():
            self.schedule_one(timeout=0.2)
            self.lock.flush()  # events posted while the last batch ran (scheduler.eventlock)
            self.run_sessions()
            if time.monotonic() >= next_flush:
                self.queue.flush_backoff()
                self.queue.flush_unschedulable()
                self.cache.cleanup_expired_assumed()
                next_flush = time.monotonic() + flush_every

    def _forget_future(self, fut: Future[None]) -> None:
        with self._futures_lock:
            self._futures.discard(fut)

    def drain_binds(self, timeout: float | None = None) -> bool:
        """Waits until the binds submitted so far have finished; False on timeout."""
        with self._futures_lock:
            pending = list(self._futures)
        _, not_done = wait(pending, timeout=timeout)
        return not not_done

    def wait_for_binds(self) -> None:
        """Blocks until every submitted bind has finished, then shuts the bind pool down."""
        self._binds.shutdown(wait=True)


def freeze_heap() -> None:
    """Call once the initial sync is done: moves everything allocated so far (the cluster state) to
    CPython's permanent generation, so the cyclic collector stops rescanning it on every full pass.
    Reference counting still frees those objects when they are dropped."""
    gc.collect()
    gc.freeze()


def _key(pod: Pod) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _with_node(pod: Pod, node: str) -> Pod:
    """A copy of pod with spec.nodeName set (the assumed pod); metadata and spec are copied shallowly."""
    out = pod.copy()
    out["spec"] = {**(pod.get("spec") or {}), "nodeName": node}
    out["metadata"] = copy.copy(pod.get("metadata") or {})
    return out
