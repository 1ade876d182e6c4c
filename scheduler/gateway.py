"""koord-scheduler's Kubernetes gateway, named like the agent's and the manager's: every API call of the
scheduler but the leader-election Lease (kube.leaderelection). It binds through `pods/binding` (a `Scheduled`
Event per bound pod, off the bind threads), reports
unschedulable pods (PodScheduled=False with the reasons, and a FailedScheduling Event), and routes
informer events:
pending pods of this scheduler to the queue; assigned pods, nodes and NodeMetrics to the cache and
the plugins; and every change that can unblock pods to the queue as a ClusterEvent. Sharded
(docs/shards.md#wiring), only the pending pods this shard owns are queued, a membership change moves
the pods whose owner changed, and node and pod events also reach the arbiter's ledger while this shard
hosts it.

Pods, nodes and NodeMetrics are typed with apis.kubeobjects; the informers are where the JSON becomes them.
Imports: the kubernetes client, kube (informer, events), apis, scheduler.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from apis.kubeobjects import CustomResource, KubeObject, Node
from apis.nodemetric import NodeMetric
from apis.pod import is_terminated
from kube.events import EventRecorder
from kube.informer import Informer
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import ClusterEvent, NodeMetricEventHandler, Pod, PodEventHandler
from scheduler.framework.listers import (
    ClusterObjects,
)
from scheduler.framework.runtime import ScheduleResult
from scheduler.framework.status import Status
from scheduler.framework.volumes import VolumeObjects
from scheduler.metricsource import FreshestMerger
from scheduler.pdbstore import PDBStore
from scheduler.plugins.defaultpreemption import PreemptionAPI, PreemptionResult, apply_preemption
from scheduler.scheduler import Scheduler
from scheduler.shards.admission import ShardGate
from scheduler.shards.host import ArbiterHost
from scheduler.shards.routing import ShardRouting

log = logging.getLogger(__name__)
CR_SOURCE = "cr"
AnyInformer = Informer[Node] | Informer[Pod] | Informer[CustomResource] | Informer[KubeObject]
# The router's ClusterEvents (immutable: one object each, not one per informer event)
POD_DELETE = ClusterEvent("Pod", "Delete")
METRIC_UPDATE, METRIC_DELETE = ClusterEvent("NodeMetric", "Update"), ClusterEvent("NodeMetric", "Delete")


class APIBinder:
    """Binds with a `Binding` subresource create (the DefaultBinder); `on_bound(pod, node)` hears of
    every pod bound."""

    def __init__(self, api: Any, on_bound: Callable[[Pod, str], None] | None = None) -> None:
        self.core = client.CoreV1Api(api)
        self.on_bound = on_bound

    def bind(self, pod: Pod, node: str) -> Status:
        meta = pod["metadata"]
        body = client.V1Binding(
            metadata=client.V1ObjectMeta(
                name=meta["name"], namespace=meta.get("namespace"), uid=meta.get("uid")
            ),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
        )
        try:
            # The Python client cannot decode the Status this returns: take the raw response, and read
            # it so urllib3 returns the connection to its pool (unread, every bind opened a new TLS
            # connection and half of the scheduler's time went to handshakes).
            resp: Any = self.core.create_namespaced_binding(  # raw urllib3 response, not V1Binding
                meta.get("namespace", "default"), body, _preload_content=False
            )
            resp.read()
            resp.release_conn()
        except ApiException as e:
            where = f"{meta.get('namespace')}/{meta['name']} to {node}"
            return Status.error(f"binding {where}: {e.status} {e.reason}", plugin="DefaultBinder")
        if self.on_bound is not None:
            self.on_bound(pod, node)
        return Status.success()


class ProfileRecorders:
    """One EventRecorder per profile: an Event about a pod names the profile that scheduled it
    (`spec.schedulerName`) as its source, as kube-scheduler's profiles do."""

    def __init__(self, api: Any, profiles: Collection[str]) -> None:
        self._by_name = {name: EventRecorder(api, name) for name in profiles}
        self._first = next(iter(self._by_name.values()))

    def for_pod(self, pod: Pod) -> EventRecorder:
        return self._by_name.get(str((pod.get("spec") or {}).get("schedulerName")), self._first)


class ScheduledReporter:
    """The `Scheduled` Event of every bound pod (`Successfully assigned <ns>/<name> to <node>`, as
    kube-scheduler records), written off the bind threads. At most `backlog` wait: beyond that an Event
    is dropped and counted (`dropped`), as kube's event broadcaster drops when its queue is full —
    binding never waits for Events."""

    def __init__(self, api: Any, profiles: str | Collection[str], backlog: int = 1000) -> None:
        self.events = ProfileRecorders(api, [profiles] if isinstance(profiles, str) else profiles)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scheduled-events")
        self._slots = threading.BoundedSemaphore(backlog)
        self.dropped = 0

    def __call__(self, pod: Pod, node: str) -> None:
        if not self._slots.acquire(blocking=False):
            self.dropped += 1
            return
        meta = pod["metadata"]
        message = f"Successfully assigned {meta.get('namespace')}/{meta['name']} to {node}"
        self._pool.submit(self._record, pod, message)

    def _record(self, pod: Pod, message: str) -> None:
        try:
            ref = {"kind": "Pod", "apiVersion": "v1", **pod}
            self.events.for_pod(pod).event(ref, "Normal", "Scheduled", message)
        finally:
            self._slots.release()

    def close(self) -> None:
        self._pool.shutdown(wait=True)


class UnschedulableReporter:
    """Writes PodScheduled=False and a FailedScheduling Event, off the scheduling thread."""

    def __init__(self, api: Any, profiles: str | Collection[str], workers: int = 4) -> None:
        self.core = client.CoreV1Api(api)
        self.events = ProfileRecorders(api, [profiles] if isinstance(profiles, str) else profiles)
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="unschedulable")

    def __call__(self, pod: Pod, status: Status) -> None:
        self.pool.submit(self._report, pod, status.message())

    def _report(self, pod: Pod, message: str) -> None:
        meta = pod["metadata"]
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                     "message": message, "lastTransitionTime": now}  # fmt: skip
        try:
            self.core.patch_namespaced_pod_status(
                meta["name"], meta["namespace"], {"status": {"conditions": [condition]}}
            )
        except ApiException as e:
            if e.status != 404:
                log.warning("PodScheduled condition of %s/%s: %s", meta["namespace"], meta["name"], e.reason)
        ref = {"kind": "Pod", "apiVersion": "v1", **pod}
        self.events.for_pod(pod).event(ref, "Warning", "FailedScheduling", message)

    def close(self) -> None:
        self.pool.shutdown(wait=True)


class Preemptor:
    """Carries out the preemption a cycle decided (docs/rules/scheduler-preemption.md#effects): the
    nominations change at once, under the scheduler's lock (the next cycles count the pod on its node),
    and the API calls — victims deleted, nominations cleared and set, `Preempted` Events — run off the
    scheduling thread, on `pool` (the unschedulable reporter's). When a victim cannot be deleted the
    pod's nomination is withdrawn again. `wait=True` runs them inline (simulations)."""

    def __init__(self, sched: Scheduler, api: PreemptionAPI, pool: ThreadPoolExecutor | None = None) -> None:
        self.s, self.api, self.pool = sched, api, pool
        self.nominated: dict[str, str | None] = {}  # last outcome per pod key (tests, simulations)

    def __call__(self, pod: Pod, state: CycleState, result: ScheduleResult) -> None:
        res = PreemptionResult.of(state)
        if res is None:
            return
        nominated = self.s.nominated
        if res.node is None:
            nominated.delete(pod)
        else:
            for p in res.clear_nominated:
                nominated.delete(p)
            nominated.add(pod, res.node)
        if self.pool is None:
            self._apply(pod, res)
        else:
            self.pool.submit(self._apply, pod, res)

    def _apply(self, pod: Pod, res: PreemptionResult) -> None:
        try:
            node = apply_preemption(self.api, pod, res)
        except Exception as e:  # a connection error, say: the pod is retried, not nominated
            log.warning("preemption for %s: %s: %s", _pod_name(pod), type(e).__name__, e)
            node = None
        self.nominated[_pod_name(pod)] = node
        if res.node is not None and node is None:
            with self.s.lock:
                self.s.nominated.delete(pod)


def _pod_name(pod: Pod) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _assigned(pod: Pod) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


def _uid(pod: Pod) -> object:
    return (pod.get("metadata") or {}).get("uid")


class EventRouter:
    """Informer handlers: keeps the scheduler's queue, cache and plugins in step with the cluster."""

    def __init__(
        self,
        sched: Scheduler,
        scheduler_name: str | Collection[str],
        objects: ClusterObjects | None = None,
        pdbs: PDBStore | None = None,
        volumes: VolumeObjects | None = None,
    ) -> None:
        """`scheduler_name`: the profiles' names; pending pods naming one of them are queued. `objects`,
        `pdbs` and `volumes` (when given) are kept by informers (scheduler.watches)."""
        self.s = sched
        self.pdbs = pdbs
        self.volumes = volumes
        self.names = frozenset({scheduler_name} if isinstance(scheduler_name, str) else scheduler_name)
        self.objects = objects
        plugins = [p for fw in sched.frameworks.values() for p in fw.plugins]
        self._pod_hooks = [p for p in plugins if isinstance(p, PodEventHandler)]
        self._metric_hooks = [p for p in plugins if isinstance(p, NodeMetricEventHandler)]
        self.merger = FreshestMerger(self._node_metric)
        # Sharded only (docs/shards.md#wiring): which pending pods this shard owns, the arbiter's host
        # that hears every node and pod event (a no-op unless it serves). None: unsharded.
        self.gate: ShardGate | None = None
        self.host: ArbiterHost | None = None
        self.shards: ShardRouting | None = None
        self._moves: AbstractContextManager[object] = nullcontext()

    def shard(self, gate: ShardGate, host: ArbiterHost) -> None:
        """Turn sharding on (before the informers start)."""
        self.gate, self.host = gate, host
        self.shards = ShardRouting(gate, host, self.s)
        # Membership changes (heartbeat thread) and pod events (informer thread) decide and move pods
        # under one lock, so a pod is never both dropped by one and queued by the other.
        self._moves = self.shards.lock

    def _schedulable(self, pod: Pod) -> bool:
        spec = pod.get("spec") or {}
        meta = pod.get("metadata") or {}
        return (
            spec.get("schedulerName") in self.names
            and not meta.get("deletionTimestamp")
            and not is_terminated(pod)
        )

    def _ours(self, pod: Pod) -> bool:
        return self._schedulable(pod) and (self.gate is None or self.gate.admits(pod))

    def reshard(self, members: list[str]) -> tuple[int, int]:
        """A membership change: the pending pods whose owner changed move (ShardRouting.reshard)."""
        return (0, 0) if self.shards is None else self.shards.reshard(members)

    # --- pods (the `_pod_*` bodies run under the scheduler's lock: their callers take it) -----------------
    def pod_add(self, pod: Pod) -> None:
        with self.s.lock, self._moves:  # in that order everywhere (ShardRouting.reshard too)
            self._pod_add(pod)

    def _pod_add(self, pod: Pod) -> None:
        assigned = _assigned(pod)
        if self.shards is not None:
            self.shards.seen(pod, not assigned and self._schedulable(pod))
        if assigned:
            self.s.cache.add_pod(pod)
            for p in self._pod_hooks:
                p.on_pod_add(pod)
        elif self._ours(pod):
            self.s.nominated.add(pod)
            self.s.queue.add(pod)

    def pod_update(self, old: Pod, new: Pod) -> None:
        with self.s.lock, self._moves:
            self._pod_update(old, new)

    def _pod_update(self, old: Pod, new: Pod) -> None:
        assigned = _assigned(new)
        if self.shards is not None:
            self.shards.seen(new, not assigned and self._schedulable(new))
        if assigned:
            if not _assigned(old):
                self.s.queue.delete(old)  # bound: it leaves the queue and enters the cache
            self.s.nominated.delete(old)
            self.s.cache.update_pod(old, new)
            for p in self._pod_hooks:
                p.on_pod_update(old, new)
        elif self._ours(new):
            self.s.nominated.update(old, new)
            self.s.queue.update(old, new)
        else:
            self.s.nominated.delete(old)
            self.s.queue.delete(old)

    def pod_delete(self, pod: Pod) -> None:
        with self.s.lock, self._moves:
            self._pod_delete(pod)

    def _pod_delete(self, pod: Pod) -> None:
        if self.shards is not None:
            self.shards.gone(pod)
        # A pod the scheduler assumed may be gone before the informer saw it bound (a relist finds it
        # deleted, last known pending): it is let go like a bound one, or the cache would hold it until
        # its assumption expired and the plugins' per-pod state (Reserve's) for good.
        if _assigned(pod):
            self._let_go(pod)
            return
        cached = self.s.cache.get_pod(pod)
        if cached is not None and _uid(cached) == _uid(pod):  # assumed
            self._let_go(pod)
        self.s.nominated.delete(pod)
        self.s.queue.delete(pod)

    def _let_go(self, pod: Pod) -> None:
        self.s.cache.remove_pod(pod)
        for p in self._pod_hooks:
            p.on_pod_delete(pod)
        self.s.on_event(POD_DELETE)

    # --- nodes ------------------------------------------------------------------------------------------
    def node_add(self, node: Node) -> None:
        if self.host is not None:
            self.host.set_node(node)
        self.s.cache.add_node(node)
        self.s.on_event(ClusterEvent("Node", "Add"))

    def node_update(self, old: Node, new: Node) -> None:
        if self.host is not None:
            self.host.set_node(new)
        self.s.cache.update_node(new)
        self.s.on_event(ClusterEvent("Node", "Update"))

    def node_delete(self, node: Node) -> None:
        if self.host is not None:
            self.host.remove_node(node["metadata"]["name"])
        self.s.cache.remove_node(node)

    # --- node metrics (CR informer; the hub watcher feeds the same merger) -------------------------------
    def nodemetric_upsert(self, *objs: CustomResource) -> None:
        obj = objs[-1]
        try:
            nm = NodeMetric.from_dict(obj)
        except ValueError as e:
            log.warning("NodeMetric %s ignored: %s", obj.get("metadata", {}).get("name"), e)
            return
        self.merger.update(CR_SOURCE, nm.metadata["name"], nm)

    def nodemetric_delete(self, obj: CustomResource) -> None:
        self.merger.update(CR_SOURCE, obj["metadata"]["name"], None)

    def _node_metric(self, name: str, nm: NodeMetric | None) -> None:
        # Posted, not waited for: the merger calls this under its own lock, from the CR informer's
        # thread or the hub watcher's, and the decoding stays on those threads
        # (docs/architecture.md#informer-mailbox).
        self.s.lock.post(self._apply_node_metric, name, nm)

    def _apply_node_metric(self, name: str, nm: NodeMetric | None) -> None:
        for p in self._metric_hooks:
            p.on_node_metric(name, nm)
        self.s.on_event(METRIC_DELETE if nm is None else METRIC_UPDATE)


def start_informers(informers: list[AnyInformer], stop: threading.Event, timeout: float = 60.0) -> None:
    """Starts the informers and waits until each has listed once (nodes before pods is not needed:
    the cache keeps pods whose node it does not know yet)."""
    for inf in informers:
        inf.start(stop)
    for inf in informers:
        if not inf.has_synced.wait(timeout):
            raise TimeoutError(f"informer {inf.name}: not synced after {timeout:.0f}s")
