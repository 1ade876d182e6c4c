"""One shard process of `bench/scheduler_scale.py --shards N` (docs/testing.md#scheduler-scale-benchmark):
the real Scheduler, SchedulingQueue, SchedulerCache and EventRouter with the full default profile, built
as bench/scheduler_scale.py's in-process run builds them, sharded as the daemon shards them
(docs/shards.md#wiring): a ShardGate over the run's fixed members admits the pending pods this shard
owns, and every bind goes through the Binder chain MemberGatedBinder → ArbitratedBinder →
LocalFirstArbiter (the ledger in-process on shard 0, which hosts the ArbiterHost as the leader's host
does; CoalescingArbiter over gRPC on 127.0.0.1 on the others) → the "API" bind, which tells the cluster
process (bench/_shard_cluster.py) and returns, as the in-process run's binder does.

Wire (two pipes, multiprocessing.connection framing, pickle): the cluster writes the Init, then the Go,
then batches of watch events `[(handler name, args), ...]` that the informer thread applies in order
through the EventRouter, ending with STOP; the shard writes `("ready", info)`, then `("bind", shard, key,
node, monotonic time)` per API bind and `("victim", key)` per preemption victim, and `("done", stats)`
once stopped (`("failed", traceback)` if it could not run). CLOCK_MONOTONIC is system-wide on Linux, so
bind times compare with the cluster's offer times.

Run as `python -m bench._shard_proc IN_FD OUT_FD` by the cluster process only.
Imports: the standard library, bench (scheduler_scale, _scale_driver, _scheduler_world), scheduler.
"""

from __future__ import annotations

import contextlib
import dataclasses
import pickle
import random
import signal
import sys
import threading
import time
import traceback
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import Any

from bench._scale_driver import Recorder, build_world
from bench._scheduler_world import SCHEDULER_NAME
from bench.scheduler_scale import DIRECT, Settings, guarded, prime, scheduling_loop, vm_hwm_mib
from scheduler.cache import SchedulerCache
from scheduler.framework.interfaces import Pod
from scheduler.framework.status import Status
from scheduler.gateway import EventRouter, Preemptor
from scheduler.queue import SchedulingQueue
from scheduler.registry import Handle, build_framework, default_profile
from scheduler.scheduler import Scheduler, freeze_heap
from scheduler.shards.admission import ShardGate
from scheduler.shards.arbiter import BindRequest
from scheduler.shards.client import ArbiterClient, ArbitratedBinder, CoalescingArbiter, LocalFirstArbiter
from scheduler.shards.host import ArbiterHost
from scheduler.shards.ledger import Decision
from scheduler.shards.wiring import MemberGatedBinder

STOP = "__stop__"  # the last handler name of the event stream
POLL = 0.1  # the informer's wait for a batch, so it sees the shard's own stop


@dataclasses.dataclass(frozen=True, slots=True)
class Init:
    settings: dict[str, Any]  # dataclasses.asdict(Settings)
    index: int
    members: tuple[str, ...]  # every shard's identity, fixed for the run

    @property
    def identity(self) -> str:
        return self.members[self.index]


@dataclasses.dataclass(frozen=True, slots=True)
class Go:
    address: str  # the arbiter's, host:port
    start: float  # time.monotonic() of the run's start
    window: tuple[float, float]


def identities(n: int) -> tuple[str, ...]:
    return tuple(f"shard-{k}" for k in range(n))


class Outbox:
    """Messages to the cluster, one pickle each, from any thread."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._lock = threading.Lock()

    def send(self, msg: tuple[Any, ...]) -> None:
        data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            self.conn.send_bytes(data)


class ClusterBinder:
    """The API's bind: the cluster process records it (offer → bind latency, truth) and sends every
    shard the bound pod, as the API's watch would; returns at once, as the in-process binder does."""

    def __init__(self, out: Outbox, index: int) -> None:
        self.out, self.index = out, index
        self.binds = 0

    def bind(self, pod: Pod, node: str) -> Status:
        meta = pod["metadata"]
        self.out.send(("bind", self.index, f"{meta['namespace']}/{meta['name']}", node, time.monotonic()))
        self.binds += 1
        return Status.success()


class ClusterPreemptionAPI:
    """Victims are deleted by the cluster (every shard hears the delete); nominations only counted."""

    def __init__(self, out: Outbox) -> None:
        self.out = out
        self.victims = 0
        self.nominations = 0

    def delete_pod(self, victim: Pod, preemptor: Pod, node: str) -> None:
        meta = victim["metadata"]
        self.victims += 1
        self.out.send(("victim", f"{meta['namespace']}/{meta['name']}"))

    def set_nominated_node(self, pod: Pod, node: str | None) -> None:
        self.nominations += 1


class CountingArbiter:
    """The shard's arbiter, its refusals counted by reason (node names and pods left out)."""

    def __init__(self, inner: LocalFirstArbiter) -> None:
        self.inner = inner
        self.reasons: Counter[str] = Counter()

    def bind(self, req: BindRequest) -> Decision:
        d = self.inner.bind(req)
        if not d.accepted:
            self.reasons[reason_kind(d.reason)] += 1
        return d

    def forget(self, uid: str, shard: str = "") -> bool:
        return self.inner.forget(uid, shard)


def reason_kind(reason: str) -> str:
    """`node n-1: Insufficient cpu` → `Insufficient cpu`; `pod ns/p is being bound to n by s` → `pod
    is being bound`; others as they are."""
    if reason.startswith("node ") and ": " in reason:
        return reason.split(": ", 1)[1]
    if reason.startswith("pod ") and " is " in reason:
        return "pod is " + " ".join(reason.split(" is ", 1)[1].split()[:2])
    return reason


class Shard:
    def __init__(self, init: Init, out: Outbox) -> None:
        self.init, self.out = init, out
        self.cfg = cfg = Settings(**init.settings)
        self.address = ""  # the arbiter's, from Go
        profile = default_profile()
        if cfg.percentage is not None:
            profile = dataclasses.replace(profile, percentage_of_nodes_to_score=cfg.percentage)
        # Shard k draws ties from seed + k: shard 0 ties as the in-process run does; the others do not
        # mirror its draws (which would pile their picks on the same nodes).
        fw = build_framework(profile, Handle(), rng=random.Random(cfg.seed + init.index))
        self.rec = Recorder()
        self.api = ClusterBinder(out, init.index)
        self.sched = Scheduler(
            fw, SchedulerCache(), SchedulingQueue(), self.api, bind_workers=cfg.bind_workers,
            on_unschedulable=self.rec.unschedulable,
        )  # fmt: skip
        self.router = EventRouter(self.sched, SCHEDULER_NAME)
        # Shard 0 is the leader's host: the arbiter (warm at once: no predecessor's binds in flight).
        self.host = ArbiterHost(lambda address: None, listen="127.0.0.1:0", advertise="127.0.0.1", warmup=0.0)
        if init.index == 0:
            self.host.start((), ())  # filled by the informers' first list through the router
        self.router.shard(ShardGate(init.identity, init.members), self.host)
        self.remote = CoalescingArbiter(ArbiterClient(lambda: self.address))
        self.arbiter = CountingArbiter(LocalFirstArbiter(lambda: self.host.ledger, self.remote))
        self.arbitrated = ArbitratedBinder(self.api, self.arbiter, shard=init.identity)
        self.sched.binder = MemberGatedBinder(self.arbitrated, lambda: True, SCHEDULER_NAME)
        self.preempt_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="preemption")
        self.preemption = ClusterPreemptionAPI(out)
        self.sched.on_post_filter = Preemptor(self.sched, self.preemption, self.preempt_pool)
        self.applied = 0  # watch events applied
        self.marks: list[tuple[float, int]] = []  # (process CPU, applied) at the window's edges
        self.errors: list[str] = []

    def setup(self) -> dict[str, Any]:
        """The world (the cluster's, drawn from the same seed) through the informers' first list, then
        the first cycle's work (prime), as the in-process run does."""
        cfg = self.cfg
        t0 = time.monotonic()
        world = build_world(cfg.nodes, cfg.fill, cfg.rich_share, cfg.seed)
        lifetime = cfg.pod_lifetime or max(1.0, len(world.live) / cfg.rate)
        world.apply_initial(self.router, lifetime)
        digest = (len(world.live), world.pod_serial, world.node_serial)
        del world
        freeze_heap()
        t1 = time.monotonic()
        prime(self.sched)
        server = self.host.address
        return {"digest": digest, "port": int(server.rsplit(":", 1)[1]) if server else 0,
                "setup_s": round(t1 - t0, 1), "prime_s": round(time.monotonic() - t1, 1)}  # fmt: skip

    def informer(self, inp: Connection, stop: threading.Event) -> None:
        router = self.router
        while not stop.is_set():
            self.rec.cpu_mark("informer")
            if not inp.poll(POLL):
                continue
            try:
                batch = pickle.loads(inp.recv_bytes())
            except EOFError:
                self.errors.append("the cluster process went away")
                stop.set()
                return
            for handler, args in batch:
                if handler == STOP:
                    stop.set()
                    return
                if handler in DIRECT:
                    getattr(router, handler)(*args)
                else:  # posted to the scheduler's lock, as the daemon's informers post them
                    self.sched.lock.post(getattr(router, handler), *args)
                self.applied += 1

    def marker(self, stop: threading.Event) -> None:
        for edge in self.rec.window:
            if stop.wait(max(0.0, edge - time.monotonic())):
                return
            self.marks.append((time.process_time(), self.applied - self.sched.lock.pending()))

    def run(self, inp: Connection, go: Go) -> dict[str, Any]:
        self.address = go.address
        self.rec.window = go.window
        stop = threading.Event()
        profile = f"{self.cfg.profile}.{self.init.identity}" if self.cfg.profile else None
        threads = [
            threading.Thread(target=guarded(name, fn, stop, self.errors), args=args, name=name)
            for name, fn, args in (
                ("informer", self.informer, (inp, stop)),
                ("scheduling", scheduling_loop, (self.sched, stop, self.rec, profile)),
                ("marker", self.marker, (stop,)),
            )
        ]
        for t in threads:
            t.start()
        try:
            stop.wait()
        finally:
            stop.set()
            self.sched.queue.close()
            for t in threads:
                t.join(timeout=30)
            self.sched.wait_for_binds()
            self.preempt_pool.shutdown(wait=True)
            self.remote.close()
            ledger = self.host.ledger
            self.host.stop()
        marks = self.marks
        return {
            "binds": self.api.binds,
            "rejections": self.arbitrated.rejections,
            "reasons": dict(self.arbiter.reasons),
            "victims": self.preemption.victims,
            "unschedulable_pods": sorted(self.rec.unschedulable_pods),
            "unschedulable_attempts": self.rec.unschedulable_attempts,
            "cpu_s": marks[1][0] - marks[0][0] if len(marks) == 2 else None,
            "applied_at_end": marks[1][1] if len(marks) == 2 else None,
            "sched_cpu_s": self.rec.cpu_in_window("sched"),
            "informer_cpu_s": self.rec.cpu_in_window("informer"),
            "ledger": None if ledger is None else {
                "accepted": ledger.accepted_total, "rejected": ledger.rejected_total,
                "expired": ledger.expired_total,
            },
            "batches": self.remote.batches,
            "rss_mib": vm_hwm_mib(),
            "error": self.errors[0] if self.errors else None,
        }  # fmt: skip


def main(argv: list[str]) -> int:
    # Ctrl-C reaches the whole process group: the cluster process stops its shards itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    inp = Connection(int(argv[0]), writable=False)
    out = Outbox(Connection(int(argv[1]), readable=False))
    sys.stdout = sys.stderr  # nothing may print into the cluster's pipe (it is not stdout anyway)
    try:
        init = pickle.loads(inp.recv_bytes())
        shard = Shard(init, out)
        out.send(("ready", shard.setup()))
        go = pickle.loads(inp.recv_bytes())
        if not isinstance(go, Go):  # STOP before the run: the cluster gave up
            return 1
        out.send(("done", shard.run(inp, go)))
        return 0
    except EOFError:  # the cluster process went away before the run: nothing to report to
        return 1
    except BaseException:
        text = traceback.format_exc()
        print(text, file=sys.stderr, flush=True)
        with contextlib.suppress(OSError):
            out.send(("failed", text))
        return 1
    finally:
        inp.close()
        out.conn.close()


if __name__ == "__main__":
    # The wire's classes are unpickled as bench._shard_proc's, not __main__'s: run that module's main.
    from bench import _shard_proc

    sys.exit(_shard_proc.main(sys.argv[1:]))
