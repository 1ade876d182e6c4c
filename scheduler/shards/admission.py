"""Which pending pods a shard admits to its queue (docs/shards.md#partition): those whose UID it owns
over the members it last saw (scheduler.shards.ring). On a membership change ``update`` says which
pending pods to drop from the queue (owned before, not now) and which to add from the informer's store
(owned now, not before); pods owned before and after are left where they are, so a join or a leave
touches only the ~1/N of the pods that change owner.

A pod dropped while its old shard is already binding it is safe: the arbiter refuses a bind of a pod
that another shard holds as accepted (docs/shards.md#arbiter), and the API server binds a pod once.
Imports: apis.kubeobjects, scheduler.shards.ring, the standard library.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from apis.kubeobjects import Pod
from scheduler.shards.ring import owns

__all__ = ["Moves", "ShardGate"]


@dataclass(slots=True)
class Moves:
    """What a membership change asks of the queue."""

    drop: list[Pod] = field(default_factory=list)
    add: list[Pod] = field(default_factory=list)


def _uid(pod: Pod) -> str:
    return str((pod.get("metadata") or {}).get("uid") or "")


class ShardGate:
    """Thread-safe: ``admits`` runs on informer threads, ``update`` on the heartbeat's."""

    def __init__(self, identity: str, members: Sequence[str] = ()) -> None:
        self.identity = identity
        self._members: tuple[str, ...] = tuple(sorted(members))
        self._lock = threading.Lock()

    @property
    def members(self) -> tuple[str, ...]:
        return self._members

    def admits(self, pod: Pod) -> bool:
        """Whether this shard owns the pod now (a pod without a UID is owned by nobody: never created)."""
        uid = _uid(pod)
        return bool(uid) and owns(self.identity, uid, self._members)

    def update(self, members: Sequence[str], pending: Iterable[Pod]) -> Moves:
        """Adopt ``members``; ``pending`` is every pending pod of this scheduler in the informer's store."""
        new = tuple(sorted(members))
        with self._lock:
            old, self._members = self._members, new
        moves = Moves()
        if old == new:
            return moves
        for pod in pending:
            uid = _uid(pod)
            if not uid:
                continue
            was, now = owns(self.identity, uid, old), owns(self.identity, uid, new)
            if was and not now:
                moves.drop.append(pod)
            elif now and not was:
                moves.add.append(pod)
        return moves
