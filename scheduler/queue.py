"""The scheduling queue of koord-scheduler: pods waiting for a scheduling cycle, modelled on
kube-scheduler's PriorityQueue.

Three places a pending pod can be:

* activeQ — a heap ordered by `spec.priority` (higher first, missing = 0), then by the time the pod
  last entered the queue, then by arrival order (FIFO). `pop` takes its head.
* backoffQ — pods that failed and must wait `initial * 2**(attempts-1)` seconds (capped at `maximum`)
  from the moment they failed; ordered by backoff expiry. `flush_backoff` (and `pop`, before it waits)
  moves expired ones to activeQ.
* unschedulable — a map of parked pods with the plugin names that rejected them. Only a cluster event
  one of those plugins registered for (`move_to_active_or_backoff`), a meaningful update of the pod,
  or `flush_unschedulable` after `max_age` seconds brings them back.

A pod a PreEnqueue plugin refused (`gate`) is parked there too, marked gated: it was not attempted, so
it comes back without backoff, on the same events or on `activate` (docs/architecture.md#gated-pods);
`take` hands a NextPod plugin's pod to the scheduler ahead of the head.

A popped pod is "in flight" until `done`. Kube's moveRequestCycle rule: when a move request happens
while a pod is in flight, `add_unschedulable` sends that pod to backoffQ rather than parking it, so
the event that might have made it schedulable is not lost.

Thread-safe (one lock, one condition). Timestamps and backoffs use the injectable `clock`; the `pop`
timeout is wall time (`time.monotonic`) so a fake clock never makes `pop` hang. Every wait is bounded.
Imports: the standard library, apis, scheduler.framework, scheduler.keyedheap, scheduler.queuedpod.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping

from apis.kubeobjects import Pod
from apis.pod import pod_key
from scheduler.framework.interfaces import ClusterEvent
from scheduler.keyedheap import KeyedHeap
from scheduler.queuedpod import WILDCARD, QueuedPodInfo, event_matches, is_pod_updated

Clock = Callable[[], float]

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
UNSCHEDULABLE_TIMEOUT = ClusterEvent("Pod", "UnschedulableTimeout")
_MAX_WAIT = 1.0  # seconds: the longest single condition wait (re-checks backoff expiry and close)


class SchedulingQueue:
    """activeQ + backoffQ + unschedulable pods; see the module docstring."""

    def __init__(
        self,
        clock: Clock = time.monotonic,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
    ) -> None:
        self._clock = clock
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._active: KeyedHeap[QueuedPodInfo] = KeyedHeap(lambda i: (-float(i.priority), i.timestamp))
        self._backoff: KeyedHeap[QueuedPodInfo] = KeyedHeap(lambda i: (self.backoff_expiry(i),))
        self._unschedulable: dict[str, QueuedPodInfo] = {}
        self._in_flight: dict[str, QueuedPodInfo] = {}
        self._deleted_in_flight: set[str] = set()
        self._scheduling_cycle = 0
        self._move_request_cycle = -1
        self._closed = False

    # --- backoff -------------------------------------------------------------------------------

    def backoff_duration(self, attempts: int) -> float:
        """`initial * 2**(attempts-1)` capped at the maximum; 0 for a pod never attempted."""
        if attempts <= 0:
            return 0.0
        duration = self._initial_backoff
        for _ in range(attempts - 1):
            duration *= 2
            if duration >= self._max_backoff:
                return self._max_backoff
        return min(duration, self._max_backoff)

    def backoff_expiry(self, info: QueuedPodInfo) -> float:
        return info.timestamp + self.backoff_duration(info.attempts)

    def _backing_off(self, info: QueuedPodInfo, now: float) -> bool:
        return self.backoff_expiry(info) > now

    # --- informer path -------------------------------------------------------------------------

    def add(self, pod: Pod) -> None:
        """A new pending pod (or a re-add): to activeQ, out of the other queues."""
        now = self._clock()
        key = pod_key(pod)
        with self._cond:
            self._deleted_in_flight.discard(key)
            old = self._active.remove(key) or self._backoff.remove(key) or self._unschedulable.pop(key, None)
            info = QueuedPodInfo(pod, now, old.added_timestamp if old else now)
            if old is not None:
                info.attempts, info.initial_attempt_timestamp = old.attempts, old.initial_attempt_timestamp
            self._active.push(info)
            self._cond.notify()

    def update(self, old: Pod | None, new: Pod) -> None:
        """An update of a pending pod. Queued in activeQ/backoffQ: updated in place. Parked: a
        meaningful update (see `is_pod_updated`) moves it to backoffQ while it is still backing off,
        else to activeQ; a status-only update just replaces the object. In flight: the record is
        updated and, if meaningful, a later `add_unschedulable` sends it to backoffQ instead of parking
        it. Unknown: added to activeQ."""
        key = pod_key(new)
        now = self._clock()
        with self._cond:
            if (info := self._active.get(key)) is not None:
                priority, info.pod = info.priority, new
                if info.priority != priority:
                    self._active.push(info)  # re-sorted; same priority keeps its FIFO place
                return
            if (info := self._backoff.get(key)) is not None:
                info.pod = new
                return
            if (info := self._unschedulable.get(key)) is not None:
                updated = old is None or is_pod_updated(old, new)
                info.pod = new
                if updated:
                    del self._unschedulable[key]
                    self._requeue(info, now)
                return
            if (info := self._in_flight.get(key)) is not None:
                if old is None or is_pod_updated(old, new):
                    info.updated_in_flight = True
                info.pod = new
                return
        self.add(new)

    def delete(self, pod: Pod) -> None:
        key = pod_key(pod)
        with self._cond:
            self._active.remove(key)
            self._backoff.remove(key)
            self._unschedulable.pop(key, None)
            if self._in_flight.pop(key, None) is not None:
                self._deleted_in_flight.add(key)

    # --- scheduling cycle ----------------------------------------------------------------------

    def pop(self, timeout: float | None = None) -> QueuedPodInfo | None:
        """The head of activeQ, waiting up to `timeout` wall-clock seconds (None: until a pod or
        `close`). None on timeout or once closed. Expired backoff pods are flushed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self._closed:
                    return None
                now = self._clock()
                self._flush_backoff_locked(now)
                info = self._active.pop()
                if info is not None:
                    return self._start(info, now)
                wait = _MAX_WAIT
                if deadline is not None:
                    wait = min(wait, deadline - time.monotonic())
                    if wait <= 0:
                        return None
                head = self._backoff.peek()
                if head is not None:
                    wait = min(wait, max(self.backoff_expiry(head) - now, 0.001))
                self._cond.wait(wait)

    def _start(self, info: QueuedPodInfo, now: float) -> QueuedPodInfo:
        self._scheduling_cycle += 1
        info.cycle = self._scheduling_cycle
        info.attempts += 1
        if info.initial_attempt_timestamp is None:
            info.initial_attempt_timestamp = now
        info.updated_in_flight = info.gated = info.activated_in_flight = False
        self._in_flight[info.key] = info
        self._deleted_in_flight.discard(info.key)
        return info

    def take(self, pod: Pod) -> QueuedPodInfo | None:
        """Takes `pod` out of whichever queue holds it, in flight as if popped; a pod no queue holds yet
        (its informer event is on its way) starts its first attempt. None when it is in flight already."""
        key = pod_key(pod)
        with self._cond:
            if key in self._in_flight:
                return None
            now = self._clock()
            info = self._active.remove(key) or self._backoff.remove(key) or self._unschedulable.pop(key, None)
            return self._start(info or QueuedPodInfo(pod, now, now), now)

    def gate(self, info: QueuedPodInfo, plugin: str) -> None:
        """A popped pod PreEnqueue refused: parked gated, its attempt not counted (unless it left the
        queue's hands meanwhile: deleted, or queued again)."""
        key = info.key
        with self._cond:
            if self._in_flight.get(key) is info:
                del self._in_flight[key]
            if key in self._deleted_in_flight:
                self._deleted_in_flight.discard(key)
                return
            if key in self._active or key in self._backoff or key in self._unschedulable:
                return
            info.attempts -= 1
            info.gated, info.unschedulable_plugins = True, {plugin} - {""}
            if self._move_request_cycle >= info.cycle or info.updated_in_flight or info.activated_in_flight:
                self._active.push(info)  # an event or activation came while it was checked: check again
                self._cond.notify()
            else:
                self._unschedulable[key] = info

    def activate(self, pods: Iterable[Pod]) -> int:
        """Moves these pods from unschedulable or backoffQ to activeQ (kube's Activate); a pod in
        flight is marked so that it goes to activeQ when its attempt fails or is gated (kube's
        ForceActivate: an activation that races PreEnqueue's refusal must not be lost); others are left
        where they are. Returns how many moved now."""
        n = 0
        with self._cond:
            for pod in pods:
                key = pod_key(pod)
                info = self._unschedulable.pop(key, None) or self._backoff.remove(key)
                if info is not None:
                    self._active.push(info)
                    n += 1
                elif (flying := self._in_flight.get(key)) is not None:
                    flying.activated_in_flight = True
            if n:
                self._cond.notify_all()
        return n

    def done(self, pod: Pod) -> None:
        """The scheduling (and binding) attempt of `pod` is over."""
        key = pod_key(pod)
        with self._cond:
            self._in_flight.pop(key, None)
            self._deleted_in_flight.discard(key)

    def add_unschedulable(self, info: QueuedPodInfo, rejected_by: set[str]) -> None:
        """A popped pod failed. Parked with its rejecting plugins, unless a move request happened
        since it was popped, it was meaningfully updated meanwhile or nothing rejected it (an error):
        then backoffQ. Ignored when the pod was deleted meanwhile or is already queued again. Either
        way the attempt is over, as with `done`: the pod is no longer in flight, so a pod that failed
        and is then deleted or bound leaves no record behind."""
        key = info.key
        now = self._clock()
        with self._cond:
            if self._in_flight.get(key) is info:
                del self._in_flight[key]
            if key in self._deleted_in_flight:
                self._deleted_in_flight.discard(key)
                return
            if key in self._active or key in self._backoff or key in self._unschedulable:
                return
            info.unschedulable_plugins = set(rejected_by)
            info.timestamp = now
            to_backoff = self._move_request_cycle >= info.cycle or not rejected_by or info.updated_in_flight
            activated, info.updated_in_flight = info.activated_in_flight, False
            if activated:
                self._active.push(info)
                self._cond.notify()
            elif to_backoff:
                self._backoff.push(info)
            else:
                self._unschedulable[key] = info

    # --- moving pods back ----------------------------------------------------------------------

    def move_to_active_or_backoff(
        self, event: ClusterEvent, interested: Mapping[str, set[ClusterEvent]]
    ) -> int:
        """Moves parked pods that `event` may make schedulable; returns how many moved. A pod moves when
        the event is the wildcard `ClusterEvent("*", "*")`, when nothing rejected it, or when one of its
        rejecting plugins registered a matching event in `interested`; a plugin absent from
        `interested` counts as registered for every event (kube's default for plugins without
        EnqueueExtensions). Records a move request either way (the moveRequestCycle rule)."""
        with self._cond:
            if not self._unschedulable:  # (every pod delete lands here: nothing to wake anyone for)
                self._move_request_cycle = self._scheduling_cycle
                return 0
            moved = [info for info in self._unschedulable.values() if self._matches(info, event, interested)]
            self._move_locked(moved, self._clock())
            return len(moved)

    @staticmethod
    def _matches(
        info: QueuedPodInfo, event: ClusterEvent, interested: Mapping[str, set[ClusterEvent]]
    ) -> bool:
        if (event.resource, event.action) == (WILDCARD, WILDCARD) or not info.unschedulable_plugins:
            return True
        for plugin in info.unschedulable_plugins:
            registered = interested.get(plugin)
            if registered is None or any(event_matches(r, event) for r in registered):
                return True
        return False

    def _move_locked(self, infos: Iterable[QueuedPodInfo], now: float) -> None:
        for info in infos:
            del self._unschedulable[info.key]
            self._requeue(info, now)
        self._move_request_cycle = self._scheduling_cycle
        self._cond.notify_all()

    def _requeue(self, info: QueuedPodInfo, now: float) -> None:
        if not info.gated and self._backing_off(info, now):
            self._backoff.push(info)
        else:
            self._active.push(info)
            self._cond.notify()

    def flush_backoff(self) -> int:
        """Moves pods whose backoff expired to activeQ; returns how many."""
        with self._cond:
            return self._flush_backoff_locked(self._clock())

    def _flush_backoff_locked(self, now: float) -> int:
        n = 0
        while (head := self._backoff.peek()) is not None and self.backoff_expiry(head) <= now:
            self._backoff.pop()
            self._active.push(head)
            n += 1
        if n:
            self._cond.notify_all()
        return n

    def flush_unschedulable(self, max_age: float = 300.0) -> int:
        """Moves pods parked for longer than `max_age` seconds to activeQ (backoffQ while still
        backing off); returns how many."""
        with self._cond:
            now = self._clock()
            old = [i for i in self._unschedulable.values() if now - i.timestamp > max_age]
            if old:
                self._move_locked(old, now)
            return len(old)

    # --- introspection and shutdown ------------------------------------------------------------

    def pending(self) -> dict[str, int]:
        """Pod counts per queue, for the pending_pods metric."""
        with self._cond:
            return {
                ACTIVE: len(self._active),
                BACKOFF: len(self._backoff),
                UNSCHEDULABLE: len(self._unschedulable),
            }

    def where(self, pod: Pod) -> str | None:
        """Which queue holds `pod` ("active", "backoff", "unschedulable", "in_flight") or None."""
        key = pod_key(pod)
        with self._cond:
            if key in self._active:
                return ACTIVE
            if key in self._backoff:
                return BACKOFF
            if key in self._unschedulable:
                return UNSCHEDULABLE
            return "in_flight" if key in self._in_flight else None

    def close(self) -> None:
        """Wakes every `pop`; from now on `pop` returns None."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed
