"""The arbiter's decision, pure (docs/shards.md#arbiter): does a pod still fit a node given everything
already on it, bound or accepted from any shard? It is NodeResourcesFit's Filter rule
(docs/rules/scheduler.md#noderesourcesfit) on one node: ``Too many pods`` when ``pods + 1 >
allocatable pods``, then ``Insufficient <resource>`` for every resource the Filter checks for this pod
(``scheduler.plugins.noderesources.pre_filter_state``: the same list, in the same reason order) where
``allocatable < requested + request`` in Go's wrapping int64. A node the arbiter does not know (not in
its informer, or deleted) rejects every pod.

``BindRequest`` is what a shard asks; ``checked_of`` computes its ``checked`` names from a pod with the
plugin's own code, so the arbiter and the shards' Filter cannot disagree on which resources count.
Imports: apis (gonum, pod), scheduler.framework (snapshot, units), scheduler.plugins.noderesources.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from apis.kubeobjects import Pod
from apis.pod import pod_key
from scheduler.framework.snapshot import NodeInfo
from scheduler.plugins.noderesources import insufficient, pre_filter_state

__all__ = ["BindRequest", "checked_of", "decide", "request_of"]

REASON_UNKNOWN_NODE: Final = "node not found"


@dataclass(frozen=True, slots=True)
class BindRequest:
    """A shard's optimistic bind: the pod (UID and ``namespace/name``), the node, the pod's effective
    requests in snapshot units (``PodInfo.requests``), the resources Fit checks for it (reason order),
    and the shard asking (for logs and metrics)."""

    uid: str
    key: str
    node: str
    requests: Mapping[str, int] = field(default_factory=dict)
    checked: tuple[str, ...] = ()
    shard: str = ""


def checked_of(pod: Pod) -> tuple[tuple[str, ...], dict[str, int]]:
    """The names NodeResourcesFit checks for ``pod`` (reason order) and its requests (snapshot units)."""
    s = pre_filter_state(pod)
    return tuple(r for r, _ in s.checked), s.requests


def request_of(pod: Pod, node: str, shard: str = "") -> BindRequest:
    """The BindRequest for binding ``pod`` to ``node``."""
    checked, requests = checked_of(pod)
    uid = str((pod.get("metadata") or {}).get("uid") or "")
    return BindRequest(uid, pod_key(pod), node, requests, checked, shard)


def decide(row: NodeInfo | None, requests: Mapping[str, int], checked: tuple[str, ...]) -> tuple[bool, str]:
    """Pure: ``(True, "")`` when a pod with ``requests`` fits ``row`` (its allocatable, its pods and
    their summed requests), else ``(False, reasons)`` with Fit's reasons joined by ``", "``."""
    if row is None or not row.node:
        return False, REASON_UNKNOWN_NODE
    reasons = insufficient(
        row.allocatable, row.requested, len(row.pods), [(r, requests.get(r, 0)) for r in checked]
    )
    return (False, ", ".join(reasons)) if reasons else (True, "")
