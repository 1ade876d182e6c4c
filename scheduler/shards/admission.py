"""Which pending pods a shard admits to its queue (docs/shards.md#partition): those whose partition key
it owns over the members it last saw (scheduler.shards.ring). The key is the pod's UID, except for a
gang's pods, which all share one key so a gang (and a gang group) is scheduled by one shard: its
members wait for each other at Permit, which one shard's waiting pods cannot see across shards.
On a membership change ``update`` says which pending pods to drop from the queue (owned before, not
now) and which to add from the informer's store (owned now, not before); pods owned before and after
are left where they are, so a join or a leave touches only the ~1/N of the pods that change owner.

A pod dropped while its old shard is already binding it is safe: the arbiter refuses a bind of a pod
that another shard holds as accepted (docs/shards.md#arbiter), and the API server binds a pod once.
Imports: apis.kubeobjects, apis.podgroup, scheduler.shards.ring, the standard library.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from apis.kubeobjects import Pod
from apis.podgroup import ANNOTATION_GANG_GROUPS, gang_id, gang_name, parse_gang_groups
from scheduler.shards.ring import owns

__all__ = ["Moves", "ShardGate", "partition_key"]


@dataclass(slots=True)
class Moves:
    """What a membership change asks of the queue."""

    drop: list[Pod] = field(default_factory=list)
    add: list[Pod] = field(default_factory=list)


GroupOf = Callable[[Pod], str | None]


def partition_key(pod: Pod, group_of: GroupOf | None = None) -> str:
    """What the ring hashes for ``pod`` ("" for a pod without a UID: never created, owned by nobody).
    A gang's pods hash ``gang/<id>`` where ``<id>`` is the smallest gang id of their gang group, so
    every gang of a group lands on one shard (docs/shards.md#gangs). ``group_of`` (the gang cache's
    answer, which also knows groups declared on PodGroups) gives that id when it knows the gang;
    otherwise it is the smallest of the pod's own gang and its groups annotation."""
    meta = pod.get("metadata") or {}
    uid = str(meta.get("uid") or "")
    if not uid or not gang_name(pod):
        return uid
    if group_of is not None and (first := group_of(pod)):
        return "gang/" + first
    annotations = meta.get("annotations") or {}
    text = annotations.get(ANNOTATION_GANG_GROUPS, "") if isinstance(annotations, dict) else ""
    group = [g for g in parse_gang_groups(text if isinstance(text, str) else "") if g]
    return "gang/" + min([gang_id(pod), *group])


class ShardGate:
    """Thread-safe: ``admits`` runs on informer threads, ``update`` on the heartbeat's."""

    def __init__(self, identity: str, members: Sequence[str] = ()) -> None:
        self.identity = identity
        self._members: tuple[str, ...] = tuple(sorted(members))
        self._lock = threading.Lock()
        # Set by the wiring when Coscheduling runs: the smallest gang id of a pod's gang group.
        self.group_of: GroupOf | None = None

    @property
    def members(self) -> tuple[str, ...]:
        return self._members

    def admits(self, pod: Pod) -> bool:
        """Whether this shard owns the pod now (a pod without a UID is owned by nobody: never created)."""
        key = partition_key(pod, self.group_of)
        return bool(key) and owns(self.identity, key, self._members)

    def update(self, members: Sequence[str], pending: Iterable[Pod]) -> Moves:
        """Adopt ``members``; ``pending`` is every pending pod of this scheduler in the informer's store."""
        new = tuple(sorted(members))
        with self._lock:
            old, self._members = self._members, new
        moves = Moves()
        if old == new:
            return moves
        for pod in pending:
            key = partition_key(pod, self.group_of)
            if not key:
                continue
            was, now = owns(self.identity, key, old), owns(self.identity, key, new)
            if was and not now:
                moves.drop.append(pod)
            elif now and not was:
                moves.add.append(pod)
        return moves
