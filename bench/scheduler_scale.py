"""Scheduler at scale (docs/testing.md#scheduler-scale-benchmark): `--nodes` nodes with NodeMetrics, the
full default profile, pods offered at a fixed `--rate` with node and pod churn, latency percentiles.

In-process, threaded like the daemon: the scheduling loop (SchedulerService.run's loop over the real
Scheduler, queue, cache and bind pool), an informer thread applying watch events through the daemon's
own EventRouter handlers (pods, nodes, NodeMetric CRs), a binder that records each bind and sends the
bound pod back through the informer as the API's watch would, and a driver thread playing the cluster:
it offers pods at `--rate` per second against a monotonic clock, deletes each bound pod `--pod-lifetime`
seconds after its bind, replaces `--node-churn` nodes per second (a random node deleted with its pods, a
fresh one added with its NodeMetric), and rewrites every node's NodeMetric once per 60 s, spread evenly,
with the node's pods in `podsMetric` as the koordlet reports them. The cluster starts `--fill` full
(bound pods of the same mix, with staggered remaining lifetimes), and the default lifetime keeps it
there. It measures the scheduler, not the API server: a 2-core machine's kube-apiserver and etcd cannot
take 1,000 creates and 1,000 binds per second (bench/scheduler_vs_kube.py measures through one).

With `--shards 1,2,4`, one measured run per count: one shard runs in-process as above; N shards run as
N scheduler processes against a cluster process (bench/_shard_cluster.py, bench/_shard_proc.py), binding
through the shard arbiter. Every run starts from the same world.

Prints one JSON object (its keys: docs/testing.md#scheduler-scale-benchmark): the first run's keys, and
`shards`, one entry per run.
Usage: python bench/scheduler_scale.py [--nodes 20000] [--rate 1000] [--seconds 60] [--warmup 10]
       [--node-churn 1] [--percentage N] [--rich-share 0.1] [--seed 7] [--profile FILE] [--shards 1,2,4]
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import gc
import json
import os
import queue
import random
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench._scale_driver import (  # noqa: E402
    Driver,
    Pending,
    Recorder,
    World,
    build_world,
    overcommitted_nodes,
)
from bench._scheduler_world import SCHEDULER_NAME, make_pod, rich_fields, time_string  # noqa: E402
from scheduler.cache import SchedulerCache  # noqa: E402
from scheduler.eventlock import EventLock  # noqa: E402
from scheduler.framework.cycle_state import CycleState  # noqa: E402
from scheduler.framework.interfaces import Pod  # noqa: E402
from scheduler.framework.status import Status  # noqa: E402
from scheduler.gateway import EventRouter, Preemptor  # noqa: E402
from scheduler.queue import SchedulingQueue  # noqa: E402
from scheduler.registry import Handle, build_framework, default_profile  # noqa: E402
from scheduler.scheduler import Scheduler, freeze_heap  # noqa: E402

MEASURED_THREADS = ("sched", "informer", "driver")


@dataclasses.dataclass(frozen=True)
class Settings:
    nodes: int = 20000
    rate: float = 1000.0
    seconds: float = 60.0
    warmup: float = 10.0
    node_churn: float = 1.0
    percentage: int | None = None
    rich_share: float = 0.1
    fill: float = 0.5
    pod_lifetime: float | None = None
    bind_workers: int = 16
    drain: float = 10.0
    seed: int = 7
    profile: str | None = None
    shards: tuple[int, ...] = (1,)
    single_in_process: bool = True  # one shard: today's in-process run, not one shard process


# The router's handlers run on the informer's thread, as scheduler.watches wires them: NodeMetrics are
# decoded there and the router posts the result; every other event is posted to the scheduler's lock
# (docs/architecture.md#informer-mailbox). The shard processes (bench/_shard_proc.py) hand on the same way.
DIRECT = frozenset({"nodemetric_upsert", "nodemetric_delete"})


class Informer:
    """The watch handlers' thread: events are taken in the order they were posted, as one informer's
    would, and handed on as the daemon's informers hand them on (DIRECT)."""

    def __init__(self, lock: EventLock) -> None:
        self.events: queue.SimpleQueue[tuple[Callable[..., None], tuple[Any, ...]]] = queue.SimpleQueue()
        self.lock = lock
        self.applied = 0

    def post(self, handler: Callable[..., None], *args: Any) -> None:
        self.events.put((handler, args))

    def run(self, stop: threading.Event, rec: Recorder) -> None:
        while not stop.is_set():
            try:
                handler, args = self.events.get(timeout=0.1)
            except queue.Empty:
                rec.cpu_mark("informer")
                continue
            if handler.__name__ in DIRECT:
                handler(*args)
            else:
                self.lock.post(handler, *args)
            self.applied += 1
            rec.cpu_mark("informer")


class Binder:
    """Records the bind call's time and sends the bound pod (PodScheduled True, as the API's binding
    writes it) through the informer; the driver hears of it to delete the pod when its life is over."""

    def __init__(self, pending: dict[str, Pending], informer: Informer, router: EventRouter,
                 rec: Recorder, driver_inbox: queue.SimpleQueue[Any]) -> None:  # fmt: skip
        self.pending, self.informer, self.router = pending, informer, router
        self.rec, self.inbox = rec, driver_inbox
        self.twice = 0  # binds of a pod no longer pending (bound already): must stay 0

    def bind(self, pod: Pod, node: str) -> Status:
        now = time.monotonic()
        meta = pod["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        offered = self.pending.pop(key, None)
        if offered is None:  # bound already (cannot happen): the API server would refuse it
            self.twice += 1
            return Status.success()
        self.rec.bound(offered, now)
        cond = {"type": "PodScheduled", "status": "True", "lastTransitionTime": time_string(time.time())}
        bound = {**pod, "status": {"phase": "Pending", "conditions": [cond]}}
        self.informer.post(self.router.pod_update, offered.pod, bound)
        self.inbox.put(("bound", key, node, bound, now))
        return Status.success()


class InProcessPreemptionAPI:
    """Victims are deleted by the driver (their watch event follows); nominations are only counted."""

    def __init__(self, inbox: queue.SimpleQueue[Any]) -> None:
        self.inbox = inbox
        self.victims = 0
        self.nominations = 0

    def delete_pod(self, victim: Pod, preemptor: Pod, node: str) -> None:
        meta = victim["metadata"]
        self.victims += 1
        self.inbox.put(("victim", f"{meta['namespace']}/{meta['name']}"))

    def set_nominated_node(self, pod: Pod, node: str | None) -> None:
        self.nominations += 1


def scheduling_loop(sched: Scheduler, stop: threading.Event, rec: Recorder, profile: str | None) -> None:
    """SchedulerService.run's loop (scheduler/main.py), marking this thread's CPU at the window's edges;
    with `profile`, cProfile runs from the first cycle ending inside the window to the first past it,
    so the warm-up's first cycle (every view built) stays out of the statistics."""
    # The thread's own CPU time, not wall time: waits for the GIL or the lock held by the informer
    # would otherwise be charged to whatever function was running.
    prof = cProfile.Profile(time.thread_time) if profile else None
    profiling = False
    ticks = 0
    try:
        while not stop.is_set():
            sched.schedule_one(timeout=0.2)
            sched.lock.flush()
            rec.cpu_mark("sched")
            if prof is not None and profiling != rec.in_window(time.monotonic()):
                profiling = not profiling
                prof.enable() if profiling else prof.disable()
            ticks += 1
            if ticks % 50 == 0 or sched.queue.pending().get("active", 0) == 0:
                sched.queue.flush_backoff()
                sched.queue.flush_unschedulable()
                sched.cache.cleanup_expired_assumed()
    finally:
        if prof is not None and profile:
            prof.disable()
            prof.dump_stats(profile)


def prime(sched: Scheduler) -> None:
    """The first cycle's work, before the clock starts: the snapshot copied from the cache and every
    plugin's views built over the cluster's pods (minutes at 20,000 nodes), by filtering and scoring a
    rich probe pod that is neither reserved nor bound."""
    probe = cast(Pod, make_pod("probe", "probe-uid", False, random.Random(0), rich_fields(0, spread=True)))
    spec = cast(dict[str, Any], probe["spec"])
    spec["affinity"] = rich_fields(0, spread=False)[1]["affinity"]
    fw, snapshot = sched.profile_of(probe)
    with sched.lock:
        sched.cache.update_snapshot(snapshot)
        fw.schedule(CycleState(time.time()), probe, snapshot)


def guarded(
    name: str, target: Callable[..., None], stop: threading.Event, errors: list[str]
) -> Callable[..., None]:
    """`target` run as thread `name`: an exception is recorded, printed and ends the run (stop)."""

    def run(*args: Any) -> None:
        try:
            target(*args)
        except Exception as e:
            errors.append(f"{name}: {type(e).__name__}: {e}")
            traceback.print_exc()
            stop.set()

    return run


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank percentile `q` (0..100) of `values`, in milliseconds; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(-(-q * len(ordered) // 100)) - 1))
    return round(ordered[rank] * 1000, 2)


def vm_hwm_mib() -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def run(cfg: Settings) -> dict[str, Any]:
    """One in-process run: the result's keys are the documented top-level ones."""
    return run_in_process(cfg)[0]


def run_in_process(cfg: Settings) -> tuple[dict[str, Any], dict[str, Any]]:
    """One in-process run: the result, and its `shards` entry's own keys (shard_entry)."""
    t_setup = time.monotonic()
    profile = default_profile()
    if cfg.percentage is not None:
        profile = dataclasses.replace(profile, percentage_of_nodes_to_score=cfg.percentage)
    fw = build_framework(profile, Handle(), rng=random.Random(cfg.seed))
    if cfg.percentage is not None and getattr(fw, "percentage", None) != cfg.percentage:
        raise SystemExit("--percentage: this Framework does not take percentageOfNodesToScore")
    inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
    rec = Recorder()
    pending: dict[str, Pending] = {}
    preempt_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="preemption")
    api = InProcessPreemptionAPI(inbox)
    sched = Scheduler(fw, SchedulerCache(), SchedulingQueue(), _NoBinder(), bind_workers=cfg.bind_workers,
                      on_unschedulable=rec.unschedulable)  # fmt: skip
    router = EventRouter(sched, SCHEDULER_NAME)
    informer = Informer(sched.lock)
    binder = Binder(pending, informer, router, rec, inbox)
    sched.binder = binder
    sched.on_post_filter = Preemptor(sched, api, preempt_pool)
    world: World = build_world(cfg.nodes, cfg.fill, cfg.rich_share, cfg.seed)
    lifetime = cfg.pod_lifetime or max(1.0, len(world.live) / cfg.rate)
    world.apply_initial(router, lifetime)  # the informers' first list
    freeze_heap()
    setup_s = time.monotonic() - t_setup
    t_prime = time.monotonic()
    prime(sched)
    prime_s = time.monotonic() - t_prime

    stop, offering = threading.Event(), threading.Event()
    offering.set()
    driver = Driver(world, informer, router, pending, inbox, rec, cfg.rate, cfg.node_churn, lifetime,
                    cfg.rich_share, offering)  # fmt: skip
    start = time.monotonic()
    rec.window = (start + cfg.warmup, start + cfg.warmup + cfg.seconds)
    hard = start + cfg.warmup + cfg.seconds + 60
    errors: list[str] = []
    threads = [
        threading.Thread(target=guarded(name, fn, stop, errors), args=args, name=name)
        for name, fn, args in (
            ("informer", informer.run, (stop, rec)),
            ("driver", driver.run, (stop, start)),
            ("scheduling", scheduling_loop, (sched, stop, rec, cfg.profile)),
        )
    ]
    for t in threads:
        t.start()
    try:
        stop.wait(max(0.0, rec.window[0] - time.monotonic()))
        cpu0 = time.process_time()
        stop.wait(max(0.0, rec.window[1] - time.monotonic()))
        cpu1 = time.process_time()
        pending_at_end = len(pending)
        backlog_at_end = informer.events.qsize() + sched.lock.pending()
        offering.clear()
        # Drain: the window's pods still pending get up to `drain` seconds (their latency, if they never
        # bind, is counted up to the end of it).
        drain_end = min(time.monotonic() + cfg.drain, hard)
        while time.monotonic() < drain_end and rec.window_pending(pending):
            stop.wait(0.05)
        # Each thread notes its CPU time as it passes the window's end: give an idle one the time to.
        marks_end = min(time.monotonic() + 1.0, hard)
        while time.monotonic() < marks_end and not rec.marked(MEASURED_THREADS):
            stop.wait(0.01)
        timed_out = time.monotonic() >= hard
    finally:
        stop.set()
        sched.queue.close()
        for t in threads:
            t.join(timeout=30)
        sched.wait_for_binds()
        preempt_pool.shutdown(wait=True)
    end = time.monotonic()
    binds = rec.binds_in_window()
    lat = rec.latencies(pending, end)
    # The truth check, after the clock: the binds the driver has not heard of yet reach the world.
    for _ in range(1000):
        if inbox.empty():
            break
        driver._drain_inbox(start)
    checks = {"overcommitted_nodes": overcommitted_nodes(world), "bound_twice": binder.twice,
              "arbiter_rejections": 0, "binds_by_shard": [binds], "mode": "in-process"}  # fmt: skip

    def per_pod(cpu: float | None) -> float | None:
        return round(cpu * 1000 / binds, 3) if binds and cpu is not None else None

    result = {
        "nodes": cfg.nodes,
        "offered_pods_per_s": round(rec.offers_in_window() / cfg.seconds, 1),
        "pods_per_s": round(binds / cfg.seconds, 1),
        "p50_ms": percentile(lat, 50),
        "p99_ms": percentile(lat, 99),
        "p999_ms": percentile(lat, 99.9),
        "max_ms": percentile(lat, 100),
        "cpu_ms_per_pod": per_pod(cpu1 - cpu0),
        "sched_cpu_ms_per_pod": per_pod(rec.cpu_in_window("sched")),
        "informer_cpu_ms_per_pod": per_pod(rec.cpu_in_window("informer")),
        "driver_cpu_ms_per_pod": per_pod(rec.cpu_in_window("driver")),
        "unschedulable": len(rec.unschedulable_pods),
        "unschedulable_attempts": rec.unschedulable_attempts,
        "preemption_victims": api.victims,
        "node_events": driver.node_events,
        "metric_updates": driver.metric_updates,
        "pod_deletes": driver.pod_deletes,
        "pending_at_end": pending_at_end,
        "unbound_after_drain": rec.window_pending(pending),
        "informer_backlog_at_end": backlog_at_end,
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
        "prime_s": round(prime_s, 1),
        "rss_mib": vm_hwm_mib(),
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }
    return result, checks


ENTRY_KEYS = ("pods_per_s", "offered_pods_per_s", "p50_ms", "p99_ms", "p999_ms", "cpu_ms_per_pod",
              "sched_cpu_ms_per_pod", "informer_cpu_ms_per_pod", "unbound_after_drain",
              "informer_backlog_at_end", "keeps_up", "error")  # fmt: skip


def shard_entry(shards: int, result: dict[str, Any], checks: dict[str, Any]) -> dict[str, Any]:
    """One run's entry in `shards`: its main numbers and the checks that must hold whatever the load."""
    return {"shards": shards, **{k: result[k] for k in ENTRY_KEYS}, **checks}


class _NoBinder:
    """Placeholder until the router exists (the real binder needs it)."""

    def bind(self, pod: Pod, node: str) -> Status:
        return Status.error("no binder yet")


def parse_args(argv: Sequence[str] | None = None) -> Settings:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--nodes", type=int, default=20000)
    ap.add_argument("--rate", type=float, default=1000.0, help="pods offered per second")
    ap.add_argument("--seconds", type=float, default=60.0, help="the measured window")
    ap.add_argument("--warmup", type=float, default=10.0, help="seconds before the window")
    ap.add_argument("--node-churn", type=float, default=1.0, help="nodes replaced per second")
    ap.add_argument("--percentage", type=int, default=None, help="percentageOfNodesToScore (unset: default)")
    ap.add_argument("--rich-share", type=float, default=0.1, help="share of pods with spread/anti-affinity")
    ap.add_argument("--fill", type=float, default=0.5, help="how full the cluster starts and stays")
    ap.add_argument("--pod-lifetime", type=float, default=None, help="seconds (default: keeps --fill)")
    ap.add_argument("--bind-workers", type=int, default=16)
    ap.add_argument("--drain", type=float, default=10.0, help="seconds the window's pods get after it")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--profile", default=None, help="write the scheduling thread's cProfile stats here")
    ap.add_argument("--shards", default="1", help="comma list of shard counts, one measured run each")
    ap.add_argument("--single-in-process", action=argparse.BooleanOptionalAction, default=True,
                    help="run one shard in-process (default) rather than as one shard process")  # fmt: skip
    a = ap.parse_args(argv)
    try:
        shards = tuple(int(x) for x in a.shards.split(","))
    except ValueError:
        ap.error(f"--shards={a.shards}: a comma list of shard counts")
    if not shards or not all(1 <= n <= 16 for n in shards):
        ap.error(f"--shards={a.shards}: each count 1..16")
    if not 1 <= a.nodes <= 100_000 or not 0 < a.rate <= 20_000 or not 0 < a.seconds <= 3600:
        ap.error("--nodes 1..100000, --rate 0..20000, --seconds 0..3600")
    if a.percentage is not None and not 0 <= a.percentage <= 100:
        ap.error("--percentage: 0..100")
    if not 0 <= a.rich_share <= 1 or not 0 <= a.fill <= 1:
        ap.error("--rich-share and --fill: 0..1")
    return Settings(
        nodes=a.nodes, rate=a.rate, seconds=a.seconds, warmup=max(0.0, min(a.warmup, 600.0)),
        node_churn=max(0.0, a.node_churn), percentage=a.percentage, rich_share=a.rich_share, fill=a.fill,
        pod_lifetime=a.pod_lifetime, bind_workers=max(0, a.bind_workers), drain=max(0.0, min(a.drain, 60.0)),
        seed=a.seed, profile=a.profile, shards=shards, single_in_process=a.single_in_process,
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    from bench._shard_cluster import run_sharded  # it imports this module

    cfg = parse_args(argv)
    runs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for n in cfg.shards:
        runs.append(run_in_process(cfg) if n == 1 and cfg.single_in_process else run_sharded(cfg, n))
        # The in-process run froze its heap (freeze_heap): let its cycles go before the next run.
        gc.unfreeze()
        gc.collect()
    result = {
        **runs[0][0],
        "shards": [shard_entry(n, r, c) for n, (r, c) in zip(cfg.shards, runs, strict=True)],
    }
    print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
