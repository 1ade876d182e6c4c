"""The cluster process of `bench/scheduler_scale.py --shards N` (docs/testing.md#scheduler-scale-benchmark):
N shard processes (bench/_shard_proc.py) schedule one simulated cluster that this process plays, as the
API server and the driver: the World and Driver of bench/_scale_driver.py offer pods at `--rate`, delete
bound pods after their lifetime, churn nodes and rewrite NodeMetrics, and every watch event (pod
add/update/delete, node add/delete, NodeMetric update, and each bind as a pod update with
spec.nodeName) is written to every shard, as each shard's informer would receive it: batched every
FLUSH seconds, pickled once per batch, the same bytes written to each shard's pipe. Every shard sees
every pod and queues only its own (ShardGate); binds go through the shard arbiter on shard 0.

This process is the truth: a bind of a pod no longer pending counts in `bound_twice`, and at the end
`overcommitted_nodes` checks every node against the pods it holds. Every wait is bounded; the shard
processes are always stopped and reaped (STOP, then SIGTERM, then SIGKILL; they also die with this
process and end on their pipe's EOF).
Imports: the standard library, koord.localcluster.procs, bench (scheduler_scale, _scale_driver,
_scheduler_world, _shard_proc's wire types).
"""

from __future__ import annotations

import dataclasses
import heapq
import os
import pickle
import queue
import subprocess
import sys
import threading
import time
from collections import Counter
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from bench._scale_driver import (
    MAX_PER_TICK,
    Driver,
    Pending,
    Recorder,
    World,
    build_world,
    overcommitted_nodes,
)
from bench._scheduler_world import time_string
from bench._shard_proc import STOP, Go, Init, identities
from bench.scheduler_scale import Settings, guarded, percentile, vm_hwm_mib
from koord.localcluster.procs import die_with_parent_argv

REPO = Path(__file__).resolve().parent.parent
FLUSH = 0.002  # seconds between two event batches
DONE_TIMEOUT = 60.0  # a stopped shard's binds, ledger and gRPC server wound down
STOP_BATCH = pickle.dumps([(STOP, ())], protocol=pickle.HIGHEST_PROTOCOL)


class Ops:
    """The handlers, by name: each shard calls its EventRouter's method of that name."""

    pod_add = "pod_add"
    pod_update = "pod_update"
    pod_delete = "pod_delete"
    node_add = "node_add"
    node_delete = "node_delete"
    nodemetric_upsert = "nodemetric_upsert"


class NullSink:
    """The informers' first list, here: each shard applies its own copy (same seed, same world)."""

    def node_add(self, node: Any) -> None:
        pass

    def pod_add(self, pod: Any) -> None:
        pass

    def nodemetric_upsert(self, *objs: Any) -> None:
        pass


class FanOut:
    """The driver's Poster: events gathered, then flushed every FLUSH seconds as one batch, pickled
    once, that a writer thread per shard writes to its pipe, so a slow shard delays only itself (its
    backlog waits here, as the in-process informer's queue). Thread-safe."""

    def __init__(self) -> None:
        self._batch: list[tuple[str, tuple[Any, ...]]] = []
        self._lock = threading.Lock()  # the batch
        self._send = threading.Lock()  # batches are queued in order
        self._queues: list[queue.SimpleQueue[bytes | None]] = []
        self._writers: list[threading.Thread] = []
        self.closed = False  # no more events; writers drop what they hold and write STOP
        self.posted = 0  # events, every shard gets each
        self.batches = 0
        self.written = 0  # bytes, per shard

    @property
    def started(self) -> bool:
        return bool(self._writers)

    def start(self, conns: list[Connection]) -> None:
        for k, conn in enumerate(conns):
            q: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
            t = threading.Thread(target=self._write, args=(conn, q), name=f"shard-{k}-writer")
            self._queues.append(q)
            self._writers.append(t)
            t.start()

    def post(self, handler: str, *args: Any) -> None:
        with self._lock:
            if not self.closed:
                self._batch.append((handler, args))
                self.posted += 1

    def flush(self) -> None:
        with self._send:
            with self._lock:
                batch, self._batch = self._batch, []
            if not batch:
                return
            data = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
            self.batches += 1
            self.written += len(data)
            for q in self._queues:
                q.put(data)

    def backlog(self) -> int:
        """Batches not yet written to the slowest shard."""
        return max((q.qsize() for q in self._queues), default=0)

    def close(self) -> None:
        """The run is over: each shard gets STOP after the batch it is being written, not the backlog
        (the in-process run's informer also stops with events left)."""
        with self._send, self._lock:
            self.closed = True
            self._batch = []
            for q in self._queues:
                q.put(None)

    def join(self, timeout: float) -> None:
        for t in self._writers:
            t.join(timeout=timeout)

    def _write(self, conn: Connection, q: queue.SimpleQueue[bytes | None]) -> None:
        while True:
            data = q.get()
            last = data is None  # queued by close, after every batch
            if self.closed and not last:
                continue  # the backlog is dropped
            try:
                conn.send_bytes(STOP_BATCH if data is None else data)
            except OSError:  # the shard is gone: its collector reports it
                return
            if last:
                return

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.flush()
            stop.wait(FLUSH)


class ShardProc:
    """One shard process, its two pipes and the thread collecting what it writes."""

    def __init__(
        self, k: int, inbox: queue.SimpleQueue[Any], lost: threading.Event, errors: list[str]
    ) -> None:
        self.k, self.inbox, self.lost, self.errors = k, inbox, lost, errors
        self.ready: dict[str, Any] | None = None
        self.done: dict[str, Any] | None = None
        self.finishing = False  # set before STOP: an exit is expected from then on
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        try:
            argv = die_with_parent_argv([sys.executable, "-m", "bench._shard_proc", str(to_r), str(from_w)])
            self.proc = subprocess.Popen(argv, cwd=REPO, pass_fds=(to_r, from_w), stdin=subprocess.DEVNULL,
                                         stdout=2)  # fmt: skip
        except BaseException:
            os.close(to_w)
            os.close(from_r)
            raise
        finally:
            os.close(to_r)
            os.close(from_w)
        self.to = Connection(to_w, readable=False)
        self.frm = Connection(from_r, writable=False)
        self.thread = threading.Thread(target=self._collect, name=f"shard-{k}-collector")
        self.thread.start()

    def send(self, obj: Any) -> None:
        self.to.send_bytes(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))

    def _collect(self) -> None:
        while True:
            try:
                msg = pickle.loads(self.frm.recv_bytes())
            except (EOFError, OSError):
                if self.done is None:
                    self._lose(f"shard {self.k} exited (code {self.proc.poll()})")
                return
            kind = msg[0]
            if kind in ("bind", "victim"):
                self.inbox.put(msg)
            elif kind == "ready":
                self.ready = msg[1]
            elif kind == "done":
                self.done = msg[1]
                if msg[1]["error"]:
                    self._lose(f"shard {self.k}: {msg[1]['error']}")
                elif not self.finishing:
                    self._lose(f"shard {self.k} stopped before the end")
                return
            elif kind == "failed":
                self._lose(f"shard {self.k} failed: {msg[1].strip().splitlines()[-1]}")

    def _lose(self, what: str) -> None:
        self.errors.append(what)
        self.lost.set()

    def stop(self, deadline: float, eof: bool) -> None:
        """Waits for the process until `deadline` (it ends on STOP, or at once on EOF when `eof`: no
        writer thread holds its pipe), then SIGTERM, then SIGKILL."""
        if eof:
            self.to.close()
        try:
            self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def close(self) -> None:
        """Once the process is gone and no writer holds its pipe: the collector, the pipes."""
        self.thread.join(timeout=10)
        self.to.close()
        self.frm.close()


class ClusterDriver(Driver):
    """The Driver, also the API server's bind: the pod leaves pending (once: a second bind of it counts
    in `bound_twice`), its latency is recorded and every shard hears the bound pod."""

    def __init__(self, *args: Any, shards: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bound_keys: set[str] = set()
        self.bound_twice = 0
        self.binds_by_shard = [0] * shards

    def _drain_inbox(self, start: float) -> None:
        for _ in range(MAX_PER_TICK):
            try:
                msg = self.inbox.get_nowait()
            except queue.Empty:
                return
            self.handle(msg, start)

    def handle(self, msg: tuple[Any, ...], start: float) -> None:
        if msg[0] == "victim":
            self._delete(msg[1])
            return
        _, shard, key, node, t = msg
        if key in self.bound_keys:
            self.bound_twice += 1
            return
        offered: Pending | None = self.pending.pop(key, None)
        if offered is None:  # never offered (cannot happen)
            return
        self.bound_keys.add(key)
        self.binds_by_shard[shard] += 1
        self.rec.bound(offered, t)
        pod = offered.pod
        cond = {"type": "PodScheduled", "status": "True", "lastTransitionTime": time_string(time.time())}
        bound = {
            **pod,
            "spec": {**pod["spec"], "nodeName": node},
            "status": {"phase": "Pending", "conditions": [cond]},
        }
        self.informer.post(self.router.pod_update, pod, bound)
        if node in self.w.nodes:
            self.w.place(key, node, bound)
            heapq.heappush(self.w.expiry, (t - start + self.lifetime, key))
        else:  # bound to a node deleted meanwhile: the pod garbage collector deletes it
            self.informer.post(self.router.pod_delete, bound)
            self.pod_deletes += 1


def run_sharded(cfg: Settings, n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """One run with `n` shard processes: the result (the in-process run's keys) and its `shards` entry's
    own keys (bench.scheduler_scale.shard_entry)."""
    t_setup = time.monotonic()
    world: World = build_world(cfg.nodes, cfg.fill, cfg.rich_share, cfg.seed)
    lifetime = cfg.pod_lifetime or max(1.0, len(world.live) / cfg.rate)
    world.apply_initial(NullSink(), lifetime)  # the same draws as every run's, so the same pods follow
    digest = (len(world.live), world.pod_serial, world.node_serial)
    members = identities(n)
    inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
    stop = threading.Event()  # the run's end, or a failure anywhere
    errors: list[str] = []
    rec = Recorder()
    pending: dict[str, Pending] = {}
    procs: list[ShardProc] = []
    threads: list[threading.Thread] = []
    fan = FanOut()
    offering = threading.Event()
    offering.set()
    driver = ClusterDriver(world, fan, Ops(), pending, inbox, rec, cfg.rate, cfg.node_churn, lifetime,
                           cfg.rich_share, offering, shards=n)  # fmt: skip
    timed_out = False
    cpu0 = cpu1 = 0.0
    posted_end = pending_at_end = fan_backlog = 0
    start = time.monotonic()
    ok = False  # the run went to its end (else the shards are not waited for long)
    try:
        settings = dataclasses.asdict(cfg)
        for k in range(n):
            procs.append(ShardProc(k, inbox, stop, errors))
            procs[-1].send(Init(settings, k, members))
        ready_by = time.monotonic() + 300 + cfg.nodes * 0.1
        while not all(p.ready is not None for p in procs):
            if stop.is_set() or time.monotonic() > ready_by:
                raise RuntimeError(f"shards not ready: {errors or 'timed out'}")
            stop.wait(0.05)
        ready = [p.ready for p in procs if p.ready is not None]
        if any(r["digest"] != digest for r in ready):
            raise RuntimeError(f"the shards' worlds differ from the cluster's: {digest}, {ready}")
        setup_s = time.monotonic() - t_setup
        start = time.monotonic()
        rec.window = (start + cfg.warmup, start + cfg.warmup + cfg.seconds)
        go = Go(f"127.0.0.1:{ready[0]['port']}", start, rec.window)
        for p in procs:
            p.send(go)
        hard = start + cfg.warmup + cfg.seconds + 60
        fan.start([p.to for p in procs])
        threads = [
            threading.Thread(target=guarded(name, fn, stop, errors), args=args, name=name)
            for name, fn, args in (("driver", driver.run, (stop, start)), ("fanout", fan.run, (stop,)))
        ]
        for t in threads:
            t.start()
        stop.wait(max(0.0, rec.window[0] - time.monotonic()))
        cpu0 = time.process_time()
        stop.wait(max(0.0, rec.window[1] - time.monotonic()))
        cpu1 = time.process_time()
        posted_end, pending_at_end, fan_backlog = fan.posted, len(pending), fan.backlog()
        offering.clear()
        drain_end = min(time.monotonic() + cfg.drain, hard)
        while time.monotonic() < drain_end and rec.window_pending(pending):
            stop.wait(0.05)
        marks_end = min(time.monotonic() + 1.0, hard)
        while time.monotonic() < marks_end and not rec.marked(("driver",)):
            stop.wait(0.01)
        timed_out = time.monotonic() >= hard
        ok = True
        drained = time.monotonic()  # before the shards wind down, as the in-process run's end
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
        for p in procs:
            p.finishing = True
        writing = fan.started
        fan.close()  # STOP: each shard winds down (binds finished, arbiter stopped) and reports
        done_by = time.monotonic() + (DONE_TIMEOUT if ok else 5.0)
        for p in procs:
            p.stop(done_by, eof=not writing)
        fan.join(timeout=10)  # a writer to a killed shard ended on EPIPE
        for p in procs:
            p.close()
    end = drained
    binds = rec.binds_in_window()
    lat = rec.latencies(pending, end)
    unbound = rec.window_pending(pending)
    # The binds the driver had not heard of yet reach the truth (nothing is sent any more).
    while not inbox.empty():
        driver.handle(inbox.get_nowait(), start)
    done = [p.done for p in procs if p.done is not None]
    complete = len(done) == n

    def total(key: str) -> float | None:
        values = [d[key] for d in done]
        return sum(values) if complete and None not in values else None

    shard_cpu = total("cpu_s")
    cluster_cpu = cpu1 - cpu0

    def per_pod(cpu: float | None) -> float | None:
        return round(cpu * 1000 / binds, 3) if binds and cpu is not None else None

    applied = [d["applied_at_end"] for d in done]
    ledger = next((d["ledger"] for d in done if d["ledger"] is not None), None)
    result = {
        "nodes": cfg.nodes,
        "offered_pods_per_s": round(rec.offers_in_window() / cfg.seconds, 1),
        "pods_per_s": round(binds / cfg.seconds, 1),
        "p50_ms": percentile(lat, 50),
        "p99_ms": percentile(lat, 99),
        "p999_ms": percentile(lat, 99.9),
        "max_ms": percentile(lat, 100),
        "cpu_ms_per_pod": per_pod(cluster_cpu + shard_cpu if shard_cpu is not None else None),
        "sched_cpu_ms_per_pod": per_pod(total("sched_cpu_s")),
        "informer_cpu_ms_per_pod": per_pod(total("informer_cpu_s")),
        "driver_cpu_ms_per_pod": per_pod(rec.cpu_in_window("driver")),
        "unschedulable": len({k for d in done for k in d["unschedulable_pods"]}),
        "unschedulable_attempts": sum(d["unschedulable_attempts"] for d in done),
        "preemption_victims": sum(d["victims"] for d in done),
        "node_events": driver.node_events,
        "metric_updates": driver.metric_updates,
        "pod_deletes": driver.pod_deletes,
        "pending_at_end": pending_at_end,
        "unbound_after_drain": unbound,
        "informer_backlog_at_end": max(posted_end - a for a in applied)
        if applied and None not in applied
        else None,
        "keeps_up": pending_at_end <= cfg.rate * 1.0 and not timed_out and not errors,
        "timed_out": timed_out,
        "error": errors[0] if errors else None,
        "rate": cfg.rate,
        "seconds": cfg.seconds,
        "warmup": cfg.warmup,
        "node_churn": cfg.node_churn,
        "percentage": cfg.percentage,
        "rich_share": cfg.rich_share,
        "bind_workers": cfg.bind_workers,
        "prefilled_pods": world.prefilled,
        "pod_lifetime_s": round(lifetime, 1),
        "setup_s": round(setup_s, 1),
        "prime_s": max((r["prime_s"] for r in ready), default=None),
        "rss_mib": max((d["rss_mib"] for d in done if d["rss_mib"] is not None), default=None),
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }
    checks = {
        "overcommitted_nodes": overcommitted_nodes(world),
        "bound_twice": driver.bound_twice,
        "arbiter_rejections": sum(d["rejections"] for d in done),
        "binds_by_shard": driver.binds_by_shard,
        "mode": "processes",
        "cluster_cpu_ms_per_pod": per_pod(cluster_cpu),
        "cluster_rss_mib": vm_hwm_mib(),
        "arbiter": ledger,
        "event_batches": fan.batches,
        "event_mib_per_shard": round(fan.written / 2**20, 1),
        "fanout_backlog_at_end": fan_backlog,
        "arbiter_reasons": dict(sum((Counter(d["reasons"]) for d in done), Counter())),
    }
    return result, checks
