"""bench/scheduler_scale.py's cluster (docs/testing.md#scheduler-scale-benchmark): the World (nodes, their
bound pods and NodeMetrics, filled to a share of capacity at the start), the Driver thread that offers pods
at a fixed rate and churns nodes, pods and NodeMetrics as a live cluster would, and the Recorder of what
the window measured. Every change reaches the scheduler as a watch event through the informer thread,
in the daemon's EventRouter handlers (bench/scheduler_scale.py), or as a batch written to every shard
process (bench/_shard_cluster.py, where the handlers are named, not called). `overcommitted_nodes` is the
end-of-run truth check: nodes the run's binds filled beyond what they hold.
Imports: the standard library, apis (kubeobjects, pod, quantity), bench._scheduler_world,
scheduler (framework).
"""

from __future__ import annotations

import heapq
import queue
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from apis.kubeobjects import CustomResource, Node
from apis.pod import pod_requests
from apis.quantity import parse_resource_list
from bench._scheduler_world import (
    BATCH_EVERY,
    MI,
    NAMESPACE,
    RICH_APPS,
    Obj,
    base_usage,
    make_node,
    make_pod,
    metric_object,
    node_capacity,
    pod_metric,
    pod_shape,
    rich_fields,
    time_string,
)
from scheduler.framework.interfaces import Pod
from scheduler.framework.status import Status
from scheduler.framework.units import to_values

METRIC_PERIOD = 60.0  # seconds between two NodeMetrics of a node (the koordlet's default report interval)
TICK = 0.005  # the driver's pacing step
MAX_PER_TICK = 20_000  # bounds one tick's work of each kind (catching up after a stall)


class Poster(Protocol):
    def post(self, handler: Any, *args: Any) -> None: ...


class Handlers(Protocol):
    """The watch handlers the driver posts to: EventRouter's bound methods in one process, their names
    when the events are written to shard processes."""

    @property
    def pod_add(self) -> Any: ...
    @property
    def pod_update(self) -> Any: ...
    @property
    def pod_delete(self) -> Any: ...
    @property
    def node_add(self) -> Any: ...
    @property
    def node_delete(self) -> Any: ...
    @property
    def nodemetric_upsert(self) -> Any: ...


class InitialSink(Protocol):
    """What receives the informers' first list (EventRouter, or nothing in the shards' cluster process)."""

    def node_add(self, node: Node) -> None: ...
    def pod_add(self, pod: Pod) -> None: ...
    def nodemetric_upsert(self, *objs: CustomResource) -> None: ...


@dataclass(slots=True)
class Pending:
    pod: Obj
    offered: float  # time.monotonic() when the driver created it


@dataclass(slots=True)
class LivePod:
    node: str
    pod: Obj
    cpu_m: int  # usage the koordlet reports for it
    mem: int
    entry: Obj  # its podsMetric entry (pod_metric), built once


@dataclass(slots=True)
class NodeState:
    node: Obj
    base: tuple[int, int]  # background (cpu millicores, memory bytes)
    pods: set[str] = field(default_factory=set)


def pod_usage(pod: Obj) -> tuple[int, int]:
    """What a pod uses: 40 % of its cpu request (50 % for batch), 60 % of its memory request."""
    cpu_m, mem_mi = pod_shape(pod)
    batch = "priorityClassName" in pod["spec"]
    return cpu_m * (50 if batch else 40) // 100, mem_mi * MI * 60 // 100


def _key(pod: Obj | Pod) -> str:
    return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"


class World:
    """The driver's view of the cluster. Not thread-safe: the driver thread alone owns it once running."""

    def __init__(self, seed: int, rich_share: float) -> None:
        self.rnd = random.Random(seed)
        self.rich_share = rich_share
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.nodes: dict[str, NodeState] = {}
        self.live: dict[str, LivePod] = {}
        self.expiry: list[tuple[float, str]] = []  # (seconds after the start, pod key)
        self.prefilled = 0
        self.node_serial = 0
        self.pod_serial = 0

    def new_node(self) -> NodeState:
        name = f"node-{self.node_serial:06d}"
        node, shape = make_node(name, self.node_serial, self.rnd)
        self.node_serial += 1
        state = NodeState(node, base_usage(shape, self.rnd))
        self.index[name] = len(self.names)
        self.names.append(name)
        self.nodes[name] = state
        return state

    def remove_random_node(self) -> NodeState:
        i = self.rnd.randrange(len(self.names))
        name, last = self.names[i], self.names[-1]
        self.names[i], self.index[last] = last, i
        self.names.pop()
        del self.index[name]
        return self.nodes.pop(name)

    def new_pod(self, prefix: str) -> Obj:
        k = self.pod_serial
        self.pod_serial += 1
        rich = None
        if self.rich_share and self.rnd.random() < self.rich_share:
            rich = rich_fields(self.rnd.randrange(RICH_APPS), spread=self.rnd.random() < 0.5)
        return make_pod(f"{prefix}-{k:07d}", f"{prefix}-uid-{k:07d}", k % BATCH_EVERY == 0, self.rnd, rich)

    def place(self, key: str, node: str, pod: Obj) -> None:
        cpu_m, mem = pod_usage(pod)
        entry = pod_metric(NAMESPACE, pod["metadata"]["name"], cpu_m, mem)
        self.live[key] = LivePod(node, pod, cpu_m, mem, entry)
        self.nodes[node].pods.add(key)

    def metric(self, name: str, stamp: float) -> Obj:
        """The node's NodeMetric CR: its background plus its pods' usage, each pod in podsMetric."""
        state = self.nodes[name]
        pods = [self.live[k] for k in state.pods]
        cpu = state.base[0] + sum(p.cpu_m for p in pods)
        mem = state.base[1] + sum(p.mem for p in pods)
        return metric_object(name, cpu, mem, stamp, [p.entry for p in pods])

    def apply_initial(self, router: InitialSink, lifetime: float) -> None:
        """The informers' first list: every node, its bound pods and its NodeMetric (node i's written
        i/n of a period before its first refresh), and each pod's remaining life drawn in [0, lifetime)."""
        now, n = time.time(), max(1, len(self.names))
        for i, name in enumerate(self.names):
            state = self.nodes[name]
            router.node_add(cast(Node, state.node))
            for key in state.pods:
                router.pod_add(cast(Pod, self.live[key].pod))
                self.expiry.append((self.rnd.uniform(0, lifetime), key))
            stamp = now - METRIC_PERIOD + METRIC_PERIOD * i / n
            router.nodemetric_upsert(cast(CustomResource, self.metric(name, stamp)))
        heapq.heapify(self.expiry)


def build_world(n_nodes: int, fill: float, rich_share: float, seed: int) -> World:
    """`n_nodes` nodes, each holding `fill` of its capacity (node_capacity) in bound pods of the mix,
    scheduled between 5 and 60 minutes ago."""
    world = World(seed, rich_share)
    wall = time.time()
    for _ in range(n_nodes):
        state = world.new_node()
        name = state.node["metadata"]["name"]
        shape = (int(state.node["status"]["allocatable"]["cpu"]),
                 int(state.node["status"]["allocatable"]["memory"].removesuffix("Gi")))  # fmt: skip
        for _ in range(round(fill * node_capacity(shape))):
            pod = world.new_pod("f")
            since = time_string(wall - world.rnd.uniform(300, 3600))
            pod["spec"]["nodeName"] = name
            pod["status"] = {"phase": "Running",
                             "conditions": [{"type": "PodScheduled", "status": "True",
                                             "lastTransitionTime": since}]}  # fmt: skip
            world.place(_key(pod), name, pod)
            world.prefilled += 1
    return world


def overcommitted_nodes(world: World) -> int:
    """Nodes the run's binds overcommitted: at the end, a resource requested beyond the node's
    allocatable (or more pods than it holds) by pods among which one bound during the run (not prefilled)
    requests that resource. Pods only leave a node between binds, so the latest such bind overcommitted
    it when it was made; a node the prefill alone left over (random draws, --fill near 1) does not count.
    No scheduler, sharded or not, may ever cause one."""
    prefilled = f"{NAMESPACE}/f-"
    over = 0
    for state in world.nodes.values():
        alloc = to_values(parse_resource_list(state.node["status"]["allocatable"]))
        used: dict[str, int] = {}
        bound: set[str] = set()  # resources the run's pods on it request
        for key in state.pods:
            requests = to_values(pod_requests(world.live[key].pod))
            for name, value in requests.items():
                used[name] = used.get(name, 0) + value
            if not key.startswith(prefilled):
                bound.update(name for name, value in requests.items() if value)
                bound.add("pods")
        used["pods"] = len(state.pods)
        over += any(value > alloc.get(name, 0) for name, value in used.items() if name in bound)
    return over


class Recorder:
    """Offers, binds and CPU marks; `window` is (start, end) in time.monotonic()."""

    def __init__(self) -> None:
        self.window = (float("inf"), float("inf"))
        self._lock = threading.Lock()
        self._offers = 0
        self._binds = 0
        self._latency: list[float] = []
        self.unschedulable_pods: set[str] = set()
        self.unschedulable_attempts = 0
        self._cpu: dict[str, list[float]] = {}

    def in_window(self, t: float) -> bool:
        return self.window[0] <= t < self.window[1]

    def offered(self, t: float) -> None:
        if self.in_window(t):
            self._offers += 1  # the driver thread alone

    def bound(self, p: Pending, now: float) -> None:
        with self._lock:
            if self.in_window(now):
                self._binds += 1
            if self.in_window(p.offered):
                self._latency.append(now - p.offered)

    def unschedulable(self, pod: Pod, status: Status) -> None:
        if self.in_window(time.monotonic()):
            with self._lock:
                self.unschedulable_attempts += 1
                self.unschedulable_pods.add(_key(pod))

    def cpu_mark(self, thread: str) -> None:
        """Called often by each measured thread: notes its CPU time as it crosses the window's edges."""
        marks = self._cpu.setdefault(thread, [])
        if len(marks) < 2 and time.monotonic() >= self.window[len(marks)]:
            marks.append(time.thread_time())

    def marked(self, threads: tuple[str, ...]) -> bool:
        """Whether each of `threads` has noted both edges of the window."""
        return all(len(self._cpu.get(t, ())) == 2 for t in threads)

    def cpu_in_window(self, thread: str) -> float | None:
        marks = self._cpu.get(thread, [])
        return marks[1] - marks[0] if len(marks) == 2 else None

    def offers_in_window(self) -> int:
        return self._offers

    def binds_in_window(self) -> int:
        return self._binds

    def window_pending(self, pending: dict[str, Pending]) -> int:
        return sum(1 for p in list(pending.values()) if self.in_window(p.offered))

    def latencies(self, pending: dict[str, Pending], end: float) -> list[float]:
        """Offer → bind of the window's pods; one still unbound counts as bound at `end` (a lower bound)."""
        with self._lock:
            out = list(self._latency)
        return out + [end - p.offered for p in list(pending.values()) if self.in_window(p.offered)]


class Driver:
    """Plays the cluster: offers, pod deletions, node churn and NodeMetric refreshes, each paced against
    the monotonic clock from `start`; hears of binds and preemption victims through `inbox`."""

    def __init__(
        self, world: World, informer: Poster, router: Handlers, pending: dict[str, Pending],
        inbox: queue.SimpleQueue[Any], rec: Recorder, rate: float, node_churn: float, lifetime: float,
        rich_share: float, offering: threading.Event,
    ) -> None:  # fmt: skip
        self.w, self.informer, self.router, self.pending = world, informer, router, pending
        self.inbox, self.rec, self.rate, self.churn = inbox, rec, rate, node_churn
        self.lifetime, self.offering = lifetime, offering
        self.metric_rate = len(world.names) / METRIC_PERIOD
        self.offers = self.node_events = self.metric_updates = self.pod_deletes = self.churned = 0
        self._metric_next = 0

    def run(self, stop: threading.Event, start: float) -> None:
        offer_start = start
        while not stop.is_set():
            now = time.monotonic()
            el = now - start
            self._drain_inbox(start)
            if self.offering.is_set():
                for _ in range(min(int((now - offer_start) * self.rate) - self.offers, MAX_PER_TICK)):
                    self._offer()
            expiry = self.w.expiry
            for _ in range(MAX_PER_TICK):
                if not expiry or expiry[0][0] > el:
                    break
                self._delete(heapq.heappop(expiry)[1])
            for _ in range(min(int(el * self.churn) - self.churned, MAX_PER_TICK)):
                self._replace_node()
            due = min(int(el * self.metric_rate) - self.metric_updates, MAX_PER_TICK)
            names = self.w.names
            for _ in range(due if names else 0):
                name = names[self._metric_next % len(names)]
                self._metric_next += 1
                self.informer.post(self.router.nodemetric_upsert, self.w.metric(name, time.time()))
                self.metric_updates += 1
            self.rec.cpu_mark("driver")
            stop.wait(TICK)

    def _offer(self) -> None:
        pod = self.w.new_pod("p")
        t = time.monotonic()
        self.pending[_key(pod)] = Pending(pod, t)
        self.rec.offered(t)
        self.offers += 1
        self.informer.post(self.router.pod_add, pod)

    def _drain_inbox(self, start: float) -> None:
        for _ in range(MAX_PER_TICK):
            try:
                msg = self.inbox.get_nowait()
            except queue.Empty:
                return
            if msg[0] == "victim":
                self._delete(msg[1])
                continue
            _, key, node, pod, t = msg
            if node in self.w.nodes:
                self.w.place(key, node, pod)
                heapq.heappush(self.w.expiry, (t - start + self.lifetime, key))
            else:  # bound to a node deleted meanwhile: the pod garbage collector deletes it
                self.informer.post(self.router.pod_delete, pod)
                self.pod_deletes += 1

    def _delete(self, key: str) -> None:
        lp = self.w.live.pop(key, None)
        if lp is None:  # gone with its node, or a victim already
            return
        self.w.nodes[lp.node].pods.discard(key)
        self.informer.post(self.router.pod_delete, lp.pod)
        self.pod_deletes += 1

    def _replace_node(self) -> None:
        self.churned += 1
        if self.w.names:
            gone = self.w.remove_random_node()
            self.informer.post(self.router.node_delete, gone.node)
            self.node_events += 1
            for key in gone.pods:
                lp = self.w.live.pop(key)
                self.informer.post(self.router.pod_delete, lp.pod)
                self.pod_deletes += 1
        fresh = self.w.new_node()
        name = fresh.node["metadata"]["name"]
        self.informer.post(self.router.node_add, fresh.node)
        self.informer.post(self.router.nodemetric_upsert, self.w.metric(name, time.time()))
        self.node_events += 1
