"""A pod in the scheduling queue (scheduler.queue) and the two tests the queue applies to events: whether
a pod's update can make it schedulable (kube's isPodUpdated) and whether a plugin's registered
ClusterEvent matches an event ("*" matches anything).
Imports: the standard library, apis, scheduler.framework.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apis.kubeobjects import Pod
from apis.pod import pod_key
from apis.qos import pod_priority
from scheduler.framework.interfaces import ClusterEvent

__all__ = ["WILDCARD", "QueuedPodInfo", "event_matches", "is_pod_updated"]

WILDCARD = "*"


@dataclass(slots=True, eq=False)
class QueuedPodInfo:
    """A pod in the queue. `timestamp` is when it last entered the queue (add or failure);
    `cycle` is the scheduling cycle it was last popped in."""

    pod: Pod
    timestamp: float
    added_timestamp: float
    initial_attempt_timestamp: float | None = None
    attempts: int = 0
    unschedulable_plugins: set[str] = field(default_factory=set)
    cycle: int = 0
    updated_in_flight: bool = False
    gated: bool = False  # refused by PreEnqueue: parked without an attempt, back without backoff
    activated_in_flight: bool = False  # `activate` found it in flight: it returns to activeQ

    @property
    def key(self) -> str:
        return pod_key(self.pod)

    @property
    def priority(self) -> int:
        return pod_priority(self.pod) or 0


def _strip(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod without the fields that change on every write and cannot make it schedulable."""
    out = {k: v for k, v in pod.items() if k != "status"}
    meta = dict(pod.get("metadata") or {})
    for k in ("resourceVersion", "generation", "managedFields"):
        meta.pop(k, None)
    out["metadata"] = meta
    return out


def is_pod_updated(old: Pod, new: Pod) -> bool:
    """True when `new` differs from `old` in more than status, resourceVersion, generation or
    managedFields (kube's isPodUpdated)."""
    return _strip(old) != _strip(new)


def event_matches(registered: ClusterEvent, event: ClusterEvent) -> bool:
    """A registered event matches `event` field by field; "*" matches anything."""
    return registered.resource in (WILDCARD, event.resource) and registered.action in (WILDCARD, event.action)
