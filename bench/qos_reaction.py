"""koordlet QoS reaction time: from a threshold crossing in the host's counters to the BE CFS-quota write
(CPUSuppress) / to the eviction call (BEMemoryEvict), over many trials.

One process on a fake host tree on tmpfs (/dev/shm), cgroup v1 (``--cgroup v2`` for v2), 16 CPUs, 32 GiB, an
LS pod and a BE pod. The REAL pipeline: every default collector in a ``CollectorRunner`` at the default 1 s
collect interval feeding a ``MetricCache``; a ``QoSManager`` with CPUSuppress (``cfsQuota`` policy,
threshold 25 % via a merged NodeSLO) and MemoryEvict (gate BEMemoryEvict, threshold 70 %) at their 1 s
intervals; a real ``ResourceExecutor`` writing the tree. The evictor is a fake that records when
``evict`` is called (no API server).

A driver thread advances /proc/stat, /proc/meminfo and the pods' cpuacct counters every 100 ms (atomic
replace, as a pseudo-file is never seen half-written). Trials alternate between the two kinds; at a random
moment the driver makes the node cross a threshold and records the crossing time = the moment the first
file reflecting it has been written:

* ``suppress``: the LS pod jumps from 1 to 14 cores (its cpuacct counter is written first). Reaction = the
  executor's ``on_write`` for a write of the BE quota that suppresses it (≤ half its idle value).
* ``evict``: node memory in /proc/meminfo jumps from 50 % to 85 % (> ``memoryEvictThresholdPercent``).
  Reaction = the fake evictor's ``evict()`` call.

Between trials the node is reset below the threshold; a suppress trial starts once the quota has recovered,
an evict trial once the memory evictor's 4 s cool-down has passed. Kinds alternate, so each recovery
overlaps the other kind's trial.

The floor: a crossing needs one fresh collected sample (up to 1 collect interval) and then the strategy's
next tick (up to 1 strategy period) — two independent 1 s timers, so p99 ≈ 2 s with ``--trigger off``.
``--trigger on`` (the default, as the daemon wires it) registers ``QoSManager.kick`` as the collector
runner's round listener: strategies tick right after each collection round, leaving ≈ 1 collect interval.

Prints one JSON object: trials, p50_ms, p99_ms, collect_interval_ms, max_ms, suppress_*/evict_* splits,
timeouts, trigger, cgroup, seconds, collector_failures, quota_writes.
Before each trial the strategy loops are restarted at a random phase to the collector (``--rephase off`` keeps
the start-up phase: the loops then tick just after each collection round and the timer mode looks as good
as the trigger until the phase drifts).
Usage: python bench/qos_reaction.py [--trials 30] [--time-limit 300] [--trigger on|off] [--cgroup v1|v2]
       [--rephase on|off] [--seed N]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from agent.metriccache import MetricCache  # noqa: E402
from agent.metriccache.kv import NODE_CPU_INFO  # noqa: E402
from agent.metricsadvisor.framework import AdvisorConfig, CollectContext  # noqa: E402
from agent.metricsadvisor.registry import default_collectors  # noqa: E402
from agent.metricsadvisor.runner import CollectorRunner  # noqa: E402
from agent.options import parse  # noqa: E402
from agent.podmeta import PodMeta, pod_meta  # noqa: E402
from agent.qosmanager.cpusuppress import CPUSuppressConfig, CPUSuppressStrategy  # noqa: E402
from agent.qosmanager.framework import Snapshot  # noqa: E402
from agent.qosmanager.memoryevict import MemoryEvictConfig, MemoryEvictStrategy  # noqa: E402
from agent.qosmanager.runner import CacheMetricView, HostCgroupView, QoSManager, StrategyEntry  # noqa: E402
from agent.resourceexecutor.actions import Evict  # noqa: E402
from agent.resourceexecutor.executor import ResourceExecutor  # noqa: E402
from agent.system import cgroup as cg  # noqa: E402
from agent.system.cgroup import CgroupVersion, read_cgroup  # noqa: E402
from agent.system.nodeinfo import NodeTopology  # noqa: E402
from agent.system.podcgroup import CgroupDriver, KubeQOS, qos_cgroup_dir  # noqa: E402
from apis.nodeslo import NodeSLOSpec  # noqa: E402
from apis.nodeslo_defaults import merge_node_slo_spec  # noqa: E402
from tests.fixtures.hosttree import HostTree  # noqa: E402

N_CPUS = 16
MEM_TOTAL_KB = 32 * 1024 * 1024
DRIVER_PERIOD = 0.1
COLLECT_INTERVAL = 1.0
CFS_PERIOD = 100_000
# CPU (cores): capacity 16, allocatable 15 → 1 core reserved (the floor of "system" usage).
# Allowance = 16 × 25 % − LS − BE − system = 4.0 − 1.0 − 0.5 − 1.0 = 1.5 cores → quota 150000 when idle.
SUPPRESS_PERCENT = 25
LS_IDLE, LS_HIGH, BE_CORES, SYS_CORES = 1.0, 14.0, 0.5, 0.5
QUOTA_IDLE = 150_000
QUOTA_SUPPRESSED_MAX = QUOTA_IDLE // 2
"""A quota write at or below this is the reaction (a sample with ≥ 0.1 s of the jump gives ≤ 20000)."""
# Memory: 50 % used normally, 85 % on a crossing; threshold 70 %.
MEM_EVICT_PERCENT = 70
MEM_IDLE_USED, MEM_HIGH_USED = 0.50, 0.85
COOL_DOWN = MemoryEvictConfig().cool_down_seconds
REACTION_TIMEOUT = 6.0
LS_UID, BE_UID = "bench-ls-0001", "bench-be-0001"
KINDS = ("suppress", "evict")


def _pod(name: str, uid: str, qos: str, koord_qos: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "bench", "uid": uid,
                     "labels": {"koordinator.sh/qosClass": koord_qos}},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"qosClass": qos, "phase": "Running",
                   "containerStatuses": [{"name": "c", "containerID": f"containerd://{uid}{'ab' * 20}"}]},
    }  # fmt: skip


def _write(path: Path, text: str) -> None:
    """Atomic replace, like a pseudo-file that is never seen half-written."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


# ------------------------------------------------------------------ the fake host and its driver


class FakeNode:
    def __init__(self, base: Path, version: CgroupVersion) -> None:
        self.version = version
        self.driver = CgroupDriver.CGROUPFS
        self.host = HostTree(base, version, self.driver)
        self.paths = self.host.paths
        self.be_dir = qos_cgroup_dir(self.driver, KubeQOS.BESTEFFORT)
        self.ls = pod_meta(_pod("ls", LS_UID, "Burstable", "LS"), self.driver)
        self.be = pod_meta(_pod("be", BE_UID, "BestEffort", "BE"), self.driver)
        self.node: dict[str, Any] = {
            "metadata": {"name": "bench"},
            "status": {
                "capacity": {"cpu": str(N_CPUS), "memory": "32Gi"},
                "allocatable": {"cpu": str(N_CPUS - 1), "memory": "30Gi"},
            },
        }
        self.quota_path = self.host.path_of(cg.CPU_QUOTA, self.be_dir)

    @property
    def pods(self) -> list[PodMeta]:
        return [self.ls, self.be]

    def build(self) -> None:
        h = self.host
        h.write_topology({0: range(N_CPUS)})
        h.write_node_meminfo(
            0,
            {"MemTotal": MEM_TOTAL_KB, "MemFree": MEM_TOTAL_KB // 2, "Active(file)": 100,
             "Inactive(file)": 100, "SReclaimable": 100},
        )  # fmt: skip
        h.write_proc("pressure/cpu", "some avg10=0.50 avg60=0.40 avg300=0.30 total=1000\n")
        dirs = [self.be_dir]
        for meta in self.pods:
            h.mkdir(meta.cgroup_dir)
            dirs.append(meta.cgroup_dir)
            for c in meta.containers:
                h.mkdir(c.cgroup_dir)
                dirs.append(c.cgroup_dir)
        for d in dirs:
            h.set_cpu_stat(d, 0, 0, 0)
            h.set_cpu_usage(d, 0)
        anon = {LS_UID: 1 << 30, BE_UID: 4 << 30}
        for meta in self.pods:
            for d in [meta.cgroup_dir, *(c.cgroup_dir for c in meta.containers)]:
                h.set_memory_stat(d, active_anon=anon[meta.uid])
                h.set_numa_stat(d, {0: anon[meta.uid] // 4096})
        for d in [self.be_dir, self.be.cgroup_dir, *(c.cgroup_dir for c in self.be.containers)]:
            h.set_cpuset(d, f"0-{N_CPUS - 1}")
        h.set_cpu_limit(self.be_dir, -1, CFS_PERIOD)

    def quota(self) -> int | None:
        try:
            value = read_cgroup(self.paths.cgroup_root, self.version, cg.CPU_QUOTA, self.be_dir)
        except (OSError, ValueError):
            return None
        return value if isinstance(value, int) else None


class Driver(threading.Thread):
    """Advances the host's counters every ``DRIVER_PERIOD``; ``cross``/``reset`` take effect at its next
    write, ``cross`` returns the crossing time (monotonic: just after the first file reflecting it)."""

    def __init__(self, node: FakeNode) -> None:
        super().__init__(name="bench-driver", daemon=True)
        self.node = node
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._pending: tuple[str, threading.Event, list[float]] | None = None
        self.ls_cores = LS_IDLE
        self.mem_used = MEM_IDLE_USED
        self._ls_ns = 0.0
        self._be_ns = 0.0
        self._busy_ticks = 0.0
        self._idle_ticks = 0.0
        self._wall = time.time()
        self.clk_tck = os.sysconf("SC_CLK_TCK")
        self.writes = 0
        h = node.host
        self._ls_files = [h.path_of(cg.CPU_USAGE, d) for d in self._dirs(node.ls)]
        self._be_files = [h.path_of(cg.CPU_USAGE, d) for d in [node.be_dir, *self._dirs(node.be)]]

    @staticmethod
    def _dirs(meta: PodMeta) -> list[str]:
        return [meta.cgroup_dir, *(c.cgroup_dir for c in meta.containers)]

    def _usage_text(self, ns: float) -> str:
        if self.node.version is CgroupVersion.V1:
            return f"{int(ns)}\n"
        return (
            f"usage_usec {int(ns) // 1000}\nuser_usec 0\nsystem_usec 0\nnr_periods 0\nnr_throttled 0\n"
            "throttled_usec 0\n"
        )

    def _write_stat(self) -> None:
        busy = int(self._busy_ticks)
        idle = int(self._idle_ticks)
        per_busy, per_idle = busy // N_CPUS, idle // N_CPUS
        cpu_line = [busy, 0, 0, idle, 0, 0, 0, 0]
        per = [[per_busy, 0, 0, per_idle, 0, 0, 0, 0] for _ in range(N_CPUS)]
        lines = ["cpu  " + " ".join(map(str, cpu_line))]
        lines += [f"cpu{i} " + " ".join(map(str, t)) for i, t in enumerate(per)]
        lines += ["intr 1 0", "ctxt 1", "btime 1700000000", "processes 1"]
        _write(self.node.paths.proc / "stat", "\n".join(lines) + "\n")

    def _write_meminfo(self) -> None:
        avail = int(MEM_TOTAL_KB * (1 - self.mem_used))
        _write(
            self.node.paths.proc / "meminfo",
            f"MemTotal: {MEM_TOTAL_KB} kB\nMemFree: {avail // 2} kB\nMemAvailable: {avail} kB\n"
            f"Buffers: 0 kB\nCached: {avail // 4} kB\n",
        )

    def step(self) -> None:
        """One write round; applies a pending cross/reset first."""
        with self._lock:
            pending, self._pending = self._pending, None
        now = time.time()
        dt = max(0.0, now - self._wall)
        self._wall = now
        first: Path | None = None
        if pending is not None:
            action = pending[0]
            if action == "cross-suppress":
                self.ls_cores = LS_HIGH  # the jump happened during the last driver period
                first = self._ls_files[0]
            elif action == "cross-evict":
                self.mem_used = MEM_HIGH_USED
                first = self.node.paths.proc / "meminfo"
            elif action == "reset-suppress":
                self.ls_cores = LS_IDLE
            elif action == "reset-evict":
                self.mem_used = MEM_IDLE_USED
        self._ls_ns += self.ls_cores * dt * 1e9
        self._be_ns += BE_CORES * dt * 1e9
        busy = self.ls_cores + BE_CORES + SYS_CORES
        self._busy_ticks += busy * dt * self.clk_tck
        self._idle_ticks += max(0.0, N_CPUS - busy) * dt * self.clk_tck
        crossed_at: float | None = None
        if first is not None and first == self.node.paths.proc / "meminfo":
            self._write_meminfo()
            crossed_at = time.monotonic()
        ls_text = self._usage_text(self._ls_ns)
        for path in self._ls_files:
            _write(path, ls_text)
            if crossed_at is None and first is not None:
                crossed_at = time.monotonic()
        be_text = self._usage_text(self._be_ns)
        for path in self._be_files:
            _write(path, be_text)
        self._write_stat()
        if first is None or first != self.node.paths.proc / "meminfo":
            self._write_meminfo()
        self.writes += 1
        if pending is not None:
            pending[2].append(crossed_at if crossed_at is not None else time.monotonic())
            pending[1].set()

    def request(self, action: str) -> float:
        """Apply ``action`` at the next write; returns the monotonic time that write landed."""
        done = threading.Event()
        out: list[float] = []
        with self._lock:
            self._pending = (action, done, out)
        if not done.wait(5.0):
            raise RuntimeError(f"driver did not apply {action}")
        return out[0]

    def run(self) -> None:
        nxt = time.monotonic()
        while not self.stop.is_set():
            self.step()
            nxt += DRIVER_PERIOD
            delay = nxt - time.monotonic()
            if delay < 0:
                nxt = time.monotonic()
                delay = 0.0
            if self.stop.wait(delay):
                return


# ------------------------------------------------------------------ the agent side


class FakeEvictor:
    """Records when ``evict`` is called; evicts nothing."""

    def __init__(self) -> None:
        self.calls: list[float] = []
        self.on_call: threading.Event = threading.Event()

    def evict(self, evictions: Sequence[Evict]) -> None:
        self.calls.append(time.monotonic())
        self.on_call.set()


class QuotaWatch:
    """The executor's ``on_write``: times every written BE quota; notes suppressing writes. On v2 it also
    plays the kernel: a bare ``<quota>`` written to cpu.max reads back as ``<quota> <period>``."""

    def __init__(self, node: FakeNode) -> None:
        self.node = node
        self.writes: list[tuple[float, int | None]] = []
        self.suppressed: list[float] = []
        self.on_suppress = threading.Event()

    def _kernel_cpu_max(self) -> None:
        try:
            parts = self.node.quota_path.read_text().split()
        except OSError:
            return
        if len(parts) == 1:
            _write(self.node.quota_path, f"{parts[0]} {CFS_PERIOD}\n")

    def __call__(self, strategy: str, file: str, seconds: float, status: str) -> None:
        if status != "written" or file != self.node.quota_path.name:
            return
        t = time.monotonic()
        if self.node.version is CgroupVersion.V2:
            self._kernel_cpu_max()
        value = self.node.quota()
        self.writes.append((t, value))
        if value is not None and 0 <= value <= QUOTA_SUPPRESSED_MAX:
            self.suppressed.append(t)
            self.on_suppress.set()


@dataclass
class Agent:
    runner: CollectorRunner
    manager: QoSManager
    executor: ResourceExecutor
    stop: threading.Event
    threads: list[threading.Thread]

    def rephase(self, delay: float) -> None:
        """Restart the strategy loops ``delay`` seconds from now: a random phase between the collector's
        and the strategies' timers per trial (in a long-running agent the phase drifts by each tick's
        duration, so every phase occurs; a single run would otherwise sample only the start-up phase)."""
        self.stop.set()
        for t in self.threads:
            t.join(2.0)
        self.stop = threading.Event()
        time.sleep(delay)
        self.threads = self.manager.start(self.stop)


def start_agent(node: FakeNode, trigger: bool, watch: QuotaWatch, evictor: FakeEvictor) -> Agent:
    opts, _ = parse(["--node-name=bench"], {})
    gates: dict[str, bool] = {**opts.feature_gates, "BECPUSuppress": True, "BEMemoryEvict": True}
    pods = node.pods

    class _Pods:
        def pods(self) -> Sequence[PodMeta]:
            return pods

    ctx = CollectContext(
        paths=node.paths, cgroup_version=node.version, cgroup_driver=node.driver, pods=_Pods(),
        host_apps=lambda: [],
    )  # fmt: skip
    cache = MetricCache()
    runner = CollectorRunner(
        default_collectors(AdvisorConfig(collect_interval_seconds=COLLECT_INTERVAL), opts.feature_gates),
        ctx,
        cache,
    )
    slo = merge_node_slo_spec(
        NodeSLOSpec.from_dict(
            {
                "resourceUsedThresholdWithBE": {
                    "enable": True,
                    "cpuSuppressThresholdPercent": SUPPRESS_PERCENT,
                    "cpuSuppressPolicy": "cfsQuota",
                    "memoryEvictThresholdPercent": MEM_EVICT_PERCENT,
                }
            }
        )
    )

    def snapshot(now: datetime) -> Snapshot:
        topo = ctx.kv.get(NODE_CPU_INFO)
        return Snapshot(
            now=now, node=node.node, node_slo=slo, pods=pods,
            metrics=CacheMetricView(cache, int(now.timestamp() * 1000)),
            cgroups=HostCgroupView(node.paths, node.version), cgroup_version=node.version,
            cgroup_driver=node.driver, topology=topo if isinstance(topo, NodeTopology) else None,
            collect_interval_seconds=COLLECT_INTERVAL, gates=gates,
        )  # fmt: skip

    executor = ResourceExecutor(node.paths, node.version, "bench", on_write=watch)
    strategies: list[tuple[Any, Callable[[], Any]]] = [
        (CPUSuppressStrategy(), CPUSuppressConfig),
        (MemoryEvictStrategy(), MemoryEvictConfig),
    ]
    manager = QoSManager(
        [StrategyEntry(strategy, config) for strategy, config in strategies],
        snapshot,
        executor,
        evictor,
    )
    stop = threading.Event()
    runner.start()
    if not runner.wait_started(10.0):
        raise RuntimeError(f"collectors did not start: {runner.not_started()}")
    # after the collectors, as the daemon (docs/rules/koordlet.md#start-order-and-readiness)
    threads = manager.start(stop)
    if trigger:
        runner.add_round_listener(manager.kick)  # as agent/daemon.py wires it
    return Agent(runner, manager, executor, stop, threads)


# ------------------------------------------------------------------ trials


def run(
    trials: int,
    time_limit: float,
    trigger: bool,
    version: CgroupVersion,
    seed: int | None,
    rephase: bool = True,
) -> dict[str, Any]:
    rng = random.Random(seed)
    shm = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    base = Path(tempfile.mkdtemp(prefix="koord-qos-reaction-", dir=shm))
    t_start = time.monotonic()
    deadline = t_start + time_limit
    reactions: dict[str, list[float]] = {k: [] for k in KINDS}
    timeouts: dict[str, int] = dict.fromkeys(KINDS, 0)
    agent: Agent | None = None
    driver: Driver | None = None
    try:
        node = FakeNode(base, version)
        node.build()
        driver = Driver(node)
        driver.step()
        driver.start()
        watch = QuotaWatch(node)
        evictor = FakeEvictor()
        agent = start_agent(node, trigger, watch, evictor)
        # Steady state: the first suppress tick on real samples writes the idle quota.
        while time.monotonic() < deadline:
            q = node.quota()
            if q is not None and q > QUOTA_SUPPRESSED_MAX:
                break
            time.sleep(0.05)
        last_reset = {k: time.monotonic() for k in KINDS}
        done = 0
        while done < trials:
            kind = KINDS[done % 2]
            # Ready: the quota recovered / the evictor's cool-down is over and a low sample is in.
            ready_at = time.monotonic()
            if kind == "evict":
                last_call = evictor.calls[-1] if evictor.calls else 0.0
                ready_at = max(
                    ready_at, last_call + COOL_DOWN + 0.3, last_reset[kind] + 1.5 * COLLECT_INTERVAL
                )
            while time.monotonic() < ready_at or (
                kind == "suppress" and (node.quota() or 0) <= QUOTA_SUPPRESSED_MAX
            ):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.02)
            # A random phase between the two timers, then a random moment relative to both.
            if rephase:
                agent.rephase(rng.uniform(0.0, COLLECT_INTERVAL))
            time.sleep(rng.uniform(0.0, COLLECT_INTERVAL))
            if time.monotonic() + REACTION_TIMEOUT > deadline:
                break
            flag = watch.on_suppress if kind == "suppress" else evictor.on_call
            stamps = watch.suppressed if kind == "suppress" else evictor.calls
            flag.clear()
            n0 = len(stamps)
            crossed = driver.request(f"cross-{kind}")
            got = flag.wait(max(0.0, crossed + REACTION_TIMEOUT - time.monotonic()))
            if got and len(stamps) > n0:
                reactions[kind].append(max(0.0, stamps[n0] - crossed))
            else:
                timeouts[kind] += 1
            driver.request(f"reset-{kind}")
            last_reset[kind] = time.monotonic()
            done += 1
        elapsed = time.monotonic() - t_start
        failures = {k: v for k, v in agent.runner.failures.items() if v}
        quota_writes = len(watch.writes)
    finally:
        if agent is not None:
            agent.stop.set()
            agent.runner.stop()
        if driver is not None:
            driver.stop.set()
            driver.join(2.0)
        shutil.rmtree(base, ignore_errors=True)
    out = summarize(reactions, timeouts, trigger, version, elapsed, failures, quota_writes)
    out["rephase"] = rephase
    return out


def _ms(values: Sequence[float], q: float) -> float | None:
    return round(percentile(values, q) * 1000, 1) if values else None


def summarize(
    reactions: Mapping[str, Sequence[float]],
    timeouts: Mapping[str, int],
    trigger: bool,
    version: CgroupVersion,
    elapsed: float,
    failures: Mapping[str, int],
    quota_writes: int,
) -> dict[str, Any]:
    every = [v for k in KINDS for v in reactions[k]]
    out: dict[str, Any] = {
        "trials": len(every),
        "p50_ms": _ms(every, 50),
        "p99_ms": _ms(every, 99),
        "collect_interval_ms": round(COLLECT_INTERVAL * 1000),
        "max_ms": round(max(every) * 1000, 1) if every else None,
        "target_ms": round(COLLECT_INTERVAL * 1000 + 200),
    }
    for k in KINDS:
        out[f"{k}_trials"] = len(reactions[k])
        out[f"{k}_p50_ms"] = _ms(reactions[k], 50)
        out[f"{k}_p99_ms"] = _ms(reactions[k], 99)
        out[f"{k}_max_ms"] = round(max(reactions[k]) * 1000, 1) if reactions[k] else None
    out |= {
        "timeouts": dict(timeouts),
        "trigger": trigger,
        "cgroup": version.value,
        "seconds": round(elapsed, 1),
        "collector_failures": dict(failures),
        "quota_writes": quota_writes,
    }
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--trials", type=int, default=30, help="trials, alternating suppress/evict (%(default)s)")
    ap.add_argument("--time-limit", type=float, default=300.0, help="total seconds (%(default)s)")
    ap.add_argument(
        "--trigger", choices=("on", "off"), default="on",
        help="strategies tick right after each collection round (QoSManager.kick), as the daemon does",
    )  # fmt: skip
    ap.add_argument("--cgroup", choices=("v1", "v2"), default="v1")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument(
        "--rephase", choices=("on", "off"), default="on",
        help="restart the strategy loops at a random phase to the collector before each trial (%(default)s)",
    )  # fmt: skip
    args = ap.parse_args(argv)
    version = CgroupVersion(args.cgroup)
    result = run(args.trials, args.time_limit, args.trigger == "on", version, args.seed, args.rephase == "on")
    print(json.dumps(result))


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    main()
