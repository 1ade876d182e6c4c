"""The informer handlers' side of sharding (docs/shards.md#wiring), used by scheduler.gateway's
EventRouter only when sharding is on: every pod event passes through ``seen``/``gone`` under ``lock``,
which keep the pending pods of this scheduler (owned or not) and forward the pod to the arbiter's host;
``reshard(members)`` (the heartbeat's membership change) takes the same lock, so it decides from exactly
the pods the handlers have seen so far: a pod bound or deleted just before can never be queued again by
a stale copy, and a pod a handler is about to queue is either in the set already or comes after, with
the new members.
Imports: apis, scheduler.scheduler, scheduler.shards (admission, host), the standard library.
"""

from __future__ import annotations

import threading

from apis.kubeobjects import Pod
from apis.pod import pod_key
from scheduler.scheduler import Scheduler
from scheduler.shards.admission import ShardGate
from scheduler.shards.host import ArbiterHost

__all__ = ["ShardRouting"]


class ShardRouting:
    """``gate`` decides which pending pods this shard queues; ``host`` hears every pod (and, through the
    router, node) event; ``sched``'s queue and nominated pods are what a membership change moves."""

    def __init__(self, gate: ShardGate, host: ArbiterHost, sched: Scheduler) -> None:
        self.gate, self.host, self.s = gate, host, sched
        # Held by the router around each pod event and by reshard: one decides at a time.
        self.lock = threading.Lock()
        self._pending: dict[str, Pod] = {}  # key -> the latest pending pod of this scheduler

    def seen(self, pod: Pod, pending: bool) -> None:
        """A pod's latest state (under ``lock``): ``pending`` when unassigned and this scheduler's."""
        self.host.set_pod(pod)
        if pending:
            self._pending[pod_key(pod)] = pod
        else:
            self._pending.pop(pod_key(pod), None)

    def gone(self, pod: Pod) -> None:
        """A pod deleted (under ``lock``)."""
        self.host.remove_pod(pod)
        key = pod_key(pod)
        kept = self._pending.get(key)
        if kept is not None and _uid(kept) == _uid(pod):  # not a newer pod of the same name
            del self._pending[key]

    def reshard(self, members: list[str]) -> tuple[int, int]:
        """Adopt ``members``: the pending pods whose owner changed leave the queue (and the nominated
        pods) or join them (docs/shards.md#partition). Returns (dropped, added)."""
        # The scheduler's lock first, then ours: the order the router's pod handlers take them in.
        with self.s.lock, self.lock:
            moves = self.gate.update(members, list(self._pending.values()))
            for pod in moves.drop:
                self.s.nominated.delete(pod)
                self.s.queue.delete(pod)
            for pod in moves.add:
                self.s.nominated.add(pod)
                self.s.queue.add(pod)
        return len(moves.drop), len(moves.add)


def _uid(pod: Pod) -> object:
    return (pod.get("metadata") or {}).get("uid")
