"""The arbiter's ledger (docs/shards.md#arbiter): per node, its allocatable and the pods on it, both
those its informer shows bound and those the arbiter has ACCEPTED from a shard that the informer has not
shown bound yet. Every bind from every shard is decided here, one at a time (a lock), by the pure rule
of scheduler.shards.arbiter, so two shards that picked the same free room on their own snapshots cannot
both get it.

An accepted pod counts until the informer shows it bound (it then counts as bound: the same UID, never
twice), until its shard says its API bind failed (``forget``), or until ``ttl`` seconds pass without
either, as the scheduler cache's assumed pods expire (a shard that died between the two steps). A
retried bind of an accepted pod to the same node is accepted again without counting twice; to another
node it moves if the same shard asks (its own API bind failed), and is rejected if another shard asks
(the pod changed owner while its old shard was binding it: only one of them may). A pod the informer
shows bound elsewhere is rejected (another scheduler took it).

Nodes and pods are kept in the snapshot's own NodeInfo/PodInfo (scheduler.framework.snapshot), keyed by
pod UID, so the sums wrap in int64 exactly as the shards' snapshots do.
Imports: apis (pod), scheduler.framework (snapshot, units), scheduler.shards.arbiter, the standard library.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from apis.kubeobjects import Node, Pod
from apis.pod import is_terminated, pod_requests
from scheduler.framework.snapshot import NodeInfo, PodInfo
from scheduler.framework.units import to_values
from scheduler.shards.arbiter import BindRequest, decide

__all__ = ["REASON_WARMING_UP", "Decision", "Ledger"]

DEFAULT_TTL = 30.0
REASON_WARMING_UP = "arbiter warming up"


@dataclass(frozen=True, slots=True)
class Decision:
    accepted: bool
    reason: str = ""


@dataclass(slots=True)
class _Accepted:
    node: str
    expires: float
    shard: str


class Ledger:
    """Thread-safe. Fed by an informer (``set_node``/``remove_node``, ``set_pod``/``remove_pod``) and
    asked by shards (``bind``, ``forget``)."""

    def __init__(
        self, ttl: float = DEFAULT_TTL, clock: Callable[[], float] = time.monotonic, warmup: float = 0.0
    ) -> None:
        if not ttl > 0:
            raise ValueError(f"ttl={ttl}: must be > 0")
        if warmup < 0:
            raise ValueError(f"warmup={warmup}: must be >= 0")
        self.ttl = float(ttl)
        self._clock = clock
        # A new arbiter does not know what its predecessor accepted: binds still in flight must reach
        # its informer first (docs/shards.md#arbiter).
        self._ready_at = clock() + warmup
        self._lock = threading.Lock()
        self._nodes: dict[str, NodeInfo] = {}
        self._bound: dict[str, str] = {}  # uid -> node, from the informer
        self._accepted: dict[str, _Accepted] = {}  # uid -> node, accepted, not yet seen bound; expiry order
        self._generation = 0
        self.accepted_total = 0
        self.rejected_total = 0
        self.expired_total = 0

    # -- informer ------------------------------------------------------------------------------------

    def set_node(self, node: Node) -> None:
        name = str(node["metadata"]["name"])
        with self._lock:
            info = self._nodes.get(name)
            if info is None:
                self._nodes[name] = NodeInfo.of(node, self._next())
            else:
                info.set_node(node, self._next())

    def remove_node(self, name: str) -> None:
        """The node is gone: it rejects every bind; its pods stay counted until removed themselves."""
        with self._lock:
            info = self._nodes.get(name)
            if info is not None:
                if info.pods:
                    info.set_node({}, self._next())
                    info.allocatable = {}
                else:
                    del self._nodes[name]

    def set_pod(self, pod: Pod) -> None:
        """A pod from the informer: bound pods count on their node (replacing an accepted entry of the
        same UID); terminated pods and pods without a node are dropped."""
        uid = _uid(pod)
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if not uid:
            return
        if is_terminated(pod) or not node:
            if is_terminated(pod):
                self.remove_pod(pod)
            return
        info = PodInfo(uid, pod, to_values(pod_requests(pod)), (0, 0))
        with self._lock:
            self._detach(uid)
            self._accepted.pop(uid, None)
            self._bound[uid] = node
            self._row(node).add_pod(info, self._next())

    def remove_pod(self, pod: Pod | str) -> None:
        uid = pod if isinstance(pod, str) else _uid(pod)
        with self._lock:
            self._detach(uid)
            self._bound.pop(uid, None)
            self._accepted.pop(uid, None)

    def sync_pods(self, pods: Iterable[Pod]) -> None:
        for p in pods:
            self.set_pod(p)

    # -- shards --------------------------------------------------------------------------------------

    def bind(self, req: BindRequest) -> Decision:
        """Accept ``req`` iff the pod fits its node given every bound and accepted pod."""
        with self._lock:
            self._expire()
            if self._clock() < self._ready_at:
                return self._rejected(REASON_WARMING_UP)
            if not req.uid:
                return self._rejected("pod has no uid")
            on = self._bound.get(req.uid)
            if on is not None:
                if on == req.node:
                    return self._accept()
                return self._rejected(f"pod {req.key} is already bound to {on}")
            held = self._accepted.get(req.uid)
            if held is not None:
                if held.node == req.node:  # a retry: renewed (moved last, in expiry order)
                    del self._accepted[req.uid]
                    held.expires = self._clock() + self.ttl
                    self._accepted[req.uid] = held
                    return self._accept()
                if held.shard != req.shard:  # the pod changed owner while its old shard was binding it
                    return self._rejected(f"pod {req.key} is being bound to {held.node} by {held.shard}")
                self._detach(req.uid)
                del self._accepted[req.uid]
            row = self._nodes.get(req.node)
            ok, reason = decide(row, req.requests, req.checked)
            if not ok or row is None:
                return self._rejected(f"node {req.node}: {reason}")
            row.add_pod(PodInfo(req.uid, {}, dict(req.requests), (0, 0)), self._next())
            self._accepted[req.uid] = _Accepted(req.node, self._clock() + self.ttl, req.shard)
            return self._accept()

    def forget(self, uid: str) -> bool:
        """The shard's API bind of an accepted pod failed: give its room back. True if it was held."""
        with self._lock:
            if uid not in self._accepted:
                return False
            self._detach(uid)
            del self._accepted[uid]
            return True

    # -- reading -------------------------------------------------------------------------------------

    def row(self, name: str) -> NodeInfo | None:
        """A copy of the node's row (for tests and debugging)."""
        with self._lock:
            self._expire()
            info = self._nodes.get(name)
            return info.copy() if info is not None else None

    def pending(self) -> int:
        """Accepted pods not yet seen bound."""
        with self._lock:
            self._expire()
            return len(self._accepted)

    # -- inside the lock -----------------------------------------------------------------------------

    def _next(self) -> int:
        self._generation += 1
        return self._generation

    def _row(self, node: str) -> NodeInfo:
        info = self._nodes.get(node)
        if info is None:  # pods seen before their node: a row that rejects binds until the node comes
            info = self._nodes[node] = NodeInfo(node, {})
        return info

    def _detach(self, uid: str) -> None:
        node = self._bound.get(uid) or (a.node if (a := self._accepted.get(uid)) else None)
        if node is None:
            return
        info = self._nodes.get(node)
        if info is not None:
            info.remove_pod(uid, self._next())
            if not info.node and not info.pods:
                del self._nodes[node]

    def _expire(self) -> None:
        # Entries are kept in expiry order (one ttl, a renewed entry moves last): stop at the first live one.
        now = self._clock()
        late: list[str] = []
        for uid, a in self._accepted.items():
            if a.expires > now:
                break
            late.append(uid)
        for uid in late:
            self._detach(uid)
            del self._accepted[uid]
        self.expired_total += len(late)

    def _accept(self) -> Decision:
        self.accepted_total += 1
        return Decision(True)

    def _rejected(self, reason: str) -> Decision:
        self.rejected_total += 1
        return Decision(False, reason)


def _uid(pod: Pod | Any) -> str:
    return str((pod.get("metadata") or {}).get("uid") or "")
