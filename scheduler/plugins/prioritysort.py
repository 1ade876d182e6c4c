"""PrioritySort, kube-scheduler v1.20's QueueSort plugin: pod A goes before pod B when A's priority
is higher, or equal and A entered the queue earlier (``Less``; docs/rules/scheduler-basic.md#prioritysort).
A pod's priority is ``spec.priority``, 0 when unset (``corev1helpers.PodPriority``).

scheduler/queue.py orders its activeQ by the same rule through a heap key
(``(-priority, timestamp)``, then arrival order among exact ties, where kube's heap picks either);
``sort_key`` is that key, and ``less(a, b)`` holds exactly when ``sort_key(a) < sort_key(b)``.
Imports: standard library, apis.qos.
"""

from __future__ import annotations

from typing import Any, Final, Protocol

from apis.qos import pod_priority

NAME: Final = "PrioritySort"


class QueuedPod(Protocol):
    """What the rule reads of a queued pod (scheduler.queue.QueuedPodInfo has both)."""

    @property
    def pod(self) -> Any: ...

    @property
    def timestamp(self) -> float: ...


def priority(pod: Any) -> int:
    """``PodPriority``: ``spec.priority``, 0 when unset."""
    return pod_priority(pod) or 0


def less(a: QueuedPod, b: QueuedPod) -> bool:
    """``PrioritySort.Less``: higher priority first, then the earlier queue timestamp."""
    pa, pb = priority(a.pod), priority(b.pod)
    return pa > pb or (pa == pb and a.timestamp < b.timestamp)


def sort_key(info: QueuedPod) -> tuple[int, float]:
    """A heap key ordering as ``less`` does."""
    return (-priority(info.pod), info.timestamp)


class PrioritySort:
    """QueueSort plugin; see the module docstring."""

    @property
    def name(self) -> str:
        return NAME

    def less(self, a: QueuedPod, b: QueuedPod) -> bool:
        return less(a, b)
