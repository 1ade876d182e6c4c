"""The scheduler cache of koord-scheduler: the nodes and the pods assigned to them (bound, and assumed
by the scheduler ahead of the API server), kept as NodeInfos, and the incremental update of the
scheduling Snapshot from it — modelled on kube-scheduler's internal cache.

Every change bumps a global generation counter and stamps it on the NodeInfo it changed; NodeInfos are
kept ordered by that generation (most recently changed last), so `update_snapshot` walks back only
over the NodeInfos changed since the snapshot was last synced: O(changed), for any number of
snapshots. Assumed pods: `assume_pod` → `finish_binding` starts a `ttl` expiry → the informer's
`add_pod`/`update_pod` confirms it, or `cleanup_expired_assumed` drops it (a deadline heap: O(expired),
not O(assumed)), or `forget_pod` undoes it.
Pods whose node is not (yet) known live on an "imaginary" NodeInfo that never enters a snapshot.

Thread-safe (one lock); the clock is injectable. Pod and node dicts are treated as immutable.
Imports: the standard library, apis (kubeobjects, pod), scheduler.framework.
"""

from __future__ import annotations

import heapq
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apis.kubeobjects import Node, Pod
from apis.pod import is_terminated, pod_key
from scheduler.framework.snapshot import NodeInfo, PodInfo, Snapshot

Clock = Callable[[], float]
NODE_LOG_LIMIT = 4096  # node joins and leaves remembered for snapshots synced since (at least)


@dataclass(slots=True)
class _PodState:
    info: PodInfo
    node: str
    assumed: bool = False
    binding_finished: bool = False
    deadline: float | None = None


def copy_node_info(info: NodeInfo) -> NodeInfo:
    """The snapshot's copy of a cache NodeInfo (``NodeInfo.copy``): later cache changes don't touch it."""
    return info.copy()


def _name(node_or_name: Node | str) -> str:
    return node_or_name if isinstance(node_or_name, str) else str(node_or_name["metadata"]["name"])


def _key(pod_or_key: Pod | str) -> str:
    return pod_or_key if isinstance(pod_or_key, str) else pod_key(pod_or_key)


class SchedulerCache:
    """Nodes (NodeInfo) and the pods on them, with assumed pods; see the module docstring."""

    def __init__(self, ttl: float = 30.0, clock: Clock = time.monotonic) -> None:
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._generation = 0
        # Every NodeInfo (known and imaginary), ordered by generation: most recently changed last.
        self._infos: OrderedDict[str, NodeInfo] = OrderedDict()
        self._known: set[str] = set()  # names of nodes the informer reported
        self._node_set_version = 0  # bumped whenever `_known` changes
        # The node whose membership changed at each version from `_node_log_base` on: a snapshot
        # synced since then learns which nodes joined or left in O(changes)
        self._node_log: list[str] = []
        self._node_log_base = 0
        self._pods: dict[str, _PodState] = {}
        self._assumed: set[str] = set()
        # (deadline, seq, key, state) of every binding finished: expiry pops only what is due; entries
        # of pods confirmed or forgotten since are skipped when they come up (their state moved on).
        self._deadlines: list[tuple[float, int, str, _PodState]] = []
        self._deadline_seq = 0
        # snapshot -> (generation, node set version, layout) it was last synced at
        self._synced: weakref.WeakKeyDictionary[Snapshot, tuple[int, int, int]] = weakref.WeakKeyDictionary()

    # --- bookkeeping ---------------------------------------------------------------------------

    def _next_generation(self, info: NodeInfo) -> int:
        self._generation += 1
        self._infos.move_to_end(info.name)
        return self._generation

    def _info(self, name: str) -> NodeInfo:
        info = self._infos.get(name)
        if info is None:  # an imaginary NodeInfo until the node arrives
            info = NodeInfo(name, {"metadata": {"name": name}})
            self._infos[name] = info
        return info

    def _attach(self, state: _PodState) -> None:
        info = self._info(state.node)
        info.add_pod(state.info, self._next_generation(info))

    def _detach(self, state: _PodState) -> None:
        info = self._infos.get(state.node)
        if info is None:
            return
        info.remove_pod(state.info.key, self._next_generation(info))
        if not info.pods and info.name not in self._known:
            del self._infos[info.name]

    # --- nodes ---------------------------------------------------------------------------------

    def add_node(self, node: Node) -> None:
        """A node the informer reported (an existing one is updated)."""
        name = _name(node)
        with self._lock:
            info = self._info(name)
            info.set_node(node, self._next_generation(info))
            if name not in self._known:
                self._known.add(name)
                self._log_node(name)

    def update_node(self, node: Node) -> None:
        self.add_node(node)

    def remove_node(self, node: Node | str) -> None:
        """The node is gone; its pods stay on an imaginary NodeInfo until they are removed."""
        name = _name(node)
        with self._lock:
            if name not in self._known:
                return
            self._known.discard(name)
            self._log_node(name)
            info = self._infos[name]
            if info.pods:
                info.set_node({"metadata": {"name": name}}, self._next_generation(info))
            else:
                del self._infos[name]

    def _log_node(self, name: str) -> None:
        self._node_set_version += 1
        self._node_log.append(name)
        if len(self._node_log) > 2 * NODE_LOG_LIMIT:  # snapshots synced before the cut use a set difference
            del self._node_log[:NODE_LOG_LIMIT]
            self._node_log_base += NODE_LOG_LIMIT

    def _node_set_changes(self, snapshot: Snapshot, since: int) -> tuple[list[str], list[str]]:
        """The known nodes `snapshot` lacks and the nodes it holds that are no longer known, sorted (so
        the snapshot's draws repeat): from the log of changes since version `since` when it reaches
        back that far, else by set difference (O(nodes), in C)."""
        held = snapshot.index
        if since >= self._node_log_base:
            touched = set(self._node_log[since - self._node_log_base :])
            joined = [n for n in touched if n in self._known and n not in held]
            left = [n for n in touched if n not in self._known and n in held]
        else:
            joined, left = list(self._known.difference(held)), list(held.keys() - self._known)
        return sorted(joined), sorted(left)

    # --- pods: informer path -------------------------------------------------------------------

    def add_pod(self, pod: Pod) -> None:
        """An assigned pod from the informer. Confirms an assumed pod (moving it if the informer put
        it on another node); a terminated pod is removed; a pod without `spec.nodeName` is ignored."""
        self._set_pod(pod)

    def update_pod(self, old: Pod | None, new: Pod) -> None:
        """Like `add_pod` for `new` (an update of an unknown pod adds it; of an assumed pod confirms
        it; of a pod whose node changed moves it). `old` is unused: the cache has its own copy."""
        self._set_pod(new)

    def _set_pod(self, pod: Pod) -> None:
        if is_terminated(pod):
            self.remove_pod(pod)
            return
        info = PodInfo.of(pod)
        if not info.node_name:
            return
        with self._lock:
            state = self._pods.get(info.key)
            if state is not None:
                self._detach(state)
            self._assumed.discard(info.key)
            state = _PodState(info, info.node_name)
            self._pods[info.key] = state
            self._attach(state)

    def remove_pod(self, pod: Pod | str) -> None:
        """The pod is gone (deleted or terminated), assumed or not."""
        key = _key(pod)
        with self._lock:
            state = self._pods.pop(key, None)
            if state is not None:
                self._assumed.discard(key)
                self._detach(state)

    # --- pods: scheduler path ------------------------------------------------------------------

    def assume_pod(self, pod: Pod, node_name: str) -> Pod:
        """Adds `pod` to `node_name` as if bound; returns the assumed copy (`spec.nodeName` set).
        ValueError when the pod is already in the cache."""
        assumed: Pod = {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": node_name}}
        info = PodInfo.of(assumed)
        with self._lock:
            if info.key in self._pods:
                raise ValueError(f"pod {info.key} is already in the scheduler cache")
            state = _PodState(info, node_name, assumed=True)
            self._pods[info.key] = state
            self._assumed.add(info.key)
            self._attach(state)
        return assumed

    def finish_binding(self, pod: Pod | str) -> None:
        """Binding is over: an assumed pod not confirmed within `ttl` seconds from now expires."""
        key = _key(pod)
        with self._lock:
            state = self._pods.get(key)
            if state is not None and state.assumed and key in self._assumed:
                state.binding_finished = True
                state.deadline = self._clock() + self._ttl
                self._deadline_seq += 1
                heapq.heappush(self._deadlines, (state.deadline, self._deadline_seq, key, state))

    def forget_pod(self, pod: Pod | str) -> bool:
        """Un-assumes the pod (binding failed); False when it is not assumed (e.g. already confirmed)."""
        key = _key(pod)
        with self._lock:
            if key not in self._assumed:
                return False
            self._assumed.discard(key)
            self._detach(self._pods.pop(key))
            return True

    def cleanup_expired_assumed(self) -> list[str]:
        """Drops assumed pods whose binding finished more than `ttl` seconds ago; returns their keys."""
        with self._lock:
            now = self._clock()
            expired: list[str] = []
            heap = self._deadlines
            while heap and heap[0][0] <= now:
                deadline, _, key, state = heapq.heappop(heap)
                if self._pods.get(key) is state and key in self._assumed and state.deadline == deadline:
                    self._assumed.discard(key)
                    self._detach(self._pods.pop(key))
                    expired.append(key)
            return sorted(expired)

    def is_assumed(self, pod: Pod | str) -> bool:
        with self._lock:
            return _key(pod) in self._assumed

    # --- reads ---------------------------------------------------------------------------------

    def get_pod(self, pod: Pod | str) -> Pod | None:
        """The cached pod object (the assumed copy for an assumed pod)."""
        with self._lock:
            state = self._pods.get(_key(pod))
            return None if state is None else state.info.pod

    def list_nodes(self) -> list[Node]:
        with self._lock:
            return [self._infos[n].node for n in sorted(self._known)]

    def list_pods(self) -> list[Pod]:
        """Every cached pod, bound and assumed, on known and unknown nodes."""
        with self._lock:
            return [s.info.pod for s in self._pods.values()]

    @property
    def generation(self) -> int:
        return self._generation

    def dump(self) -> dict[str, Any]:
        """For the debug endpoint: known nodes → pod keys, imaginary nodes → pod keys, assumed keys."""
        with self._lock:
            infos = sorted(self._infos.values(), key=lambda i: i.name)
            return {
                "generation": self._generation,
                "nodes": {i.name: sorted(i.pods) for i in infos if i.name in self._known},
                "unknown_nodes": {i.name: sorted(i.pods) for i in infos if i.name not in self._known},
                "assumed": sorted(self._assumed),
            }

    # --- snapshot ------------------------------------------------------------------------------

    def update_snapshot(self, snapshot: Snapshot) -> None:
        """Brings `snapshot` up to date with the cache (known nodes only, assumed pods included).

        NodeInfos changed since this snapshot's last sync are found by walking the generation-ordered
        NodeInfos back from the newest — O(changed) — and re-copied (`snapshot.refresh`). When nodes
        joined or left since, those nodes (from the log of node-set changes: O(changes)) go to
        `snapshot.apply_nodes`, which moves O(1) rows per node. A snapshot
        never synced here (or rebuilt by someone else) is rebuilt from every known node, rows in a
        random order drawn from its own generator, so they are a uniform permutation from the start
        (docs/scheduler-scale.md#node-list). The snapshot gets *copies* of the NodeInfos
        (`copy_node_info`): later cache changes never mutate what it holds."""
        with self._lock:
            synced = self._synced.get(snapshot)
            if synced is None or synced[2] != snapshot.layout:
                infos = [copy_node_info(self._infos[n]) for n in sorted(self._known)]  # sorted: repeatable
                snapshot.rng.shuffle(infos)
                snapshot.rebuild(infos)
            else:
                changed: list[NodeInfo] = []
                for info in reversed(self._infos.values()):
                    if info.generation <= synced[0]:
                        break
                    if info.name in self._known:
                        changed.append(info)
                if synced[1] != self._node_set_version:
                    joined, left = self._node_set_changes(snapshot, synced[1])
                    new = set(joined)
                    snapshot.apply_nodes(
                        [copy_node_info(self._infos[n]) for n in joined],
                        left,
                        [copy_node_info(i) for i in changed if i.name not in new],
                    )
                elif changed:
                    snapshot.refresh([copy_node_info(i) for i in changed])
            self._synced[snapshot] = (self._generation, self._node_set_version, snapshot.layout)
