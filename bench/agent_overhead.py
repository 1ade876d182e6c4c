"""koordlet collection overhead: CPU cores and peak RSS of the metrics advisor at N pods × 2 containers.

For each pod count a fake host tree (proc, sys, cgroup v1 or v2) is built on tmpfs (/dev/shm). Three
processes run for ``--seconds``: a host simulator advancing every counter once a second (so deltas are
real; every file is replaced atomically with ``os.replace``), the agent child (the koordlet collection
stack: every default collector in a CollectorRunner at 1 s into a MetricCache, plus the reporter loop
building and serialising a report every push interval) and the floor child.

The floor is the same plain read of the same files at the same rate: once a second, for every file the
collectors read in a 1 s tick (``FakeHost.read_set``; v2's ``cpu.stat`` twice, as the agent reads it for
usage and for throttling), ``os.open`` + one ``os.read(fd, 65536)`` + ``os.close``, nothing parsed or
kept. The agent reads each file exactly so (open, read, close by path each time, from Python: no descriptor
is held, which would also read stale inodes here since the simulator replaces the files); only its parsing
runs in C when ``agent.system._cgparse`` is built (``"parser": "c"``; ``--pure-python`` turns it off).
A read done in C would be cheaper for both, so the floor uses the agent's own read, not a C one. The
agent's periodic work that reads no cgroup file (the 5 s netlink dump of the network collector, the
report) has no floor counterpart and is in the agent's figure.

The three run on one shared second: the simulator rewrites the tree at phase 0.0 (its renames take tens of
ms), the floor reads at phase 0.35 and the agent's collectors tick at phase 0.65, so neither reader's path
walks race the simulator's renames (on a real node counters change in place; an unaligned start put one
reader or the other into the rename storm at random: an uncontrolled variable, worth several per cent of
either figure in the runs that hit it). The simulator also reads each file back once after writing it: on
tmpfs the first read after a write pays an access-time update, which would otherwise fall on whichever
reader came first (the floor, at these phases).

CPU seconds per wall second: each child measures its own process CPU time (every thread) over its window,
``--seconds`` long from its aligned start; peak RSS is the child's VmHWM.

Before measuring, the agent's metric cache is filled to its steady state (``KOORD_BENCH_STEADY=0`` to
skip): every series holds its retention of points, one a second in timestamp order as a long-running
agent has written them, so peak RSS and query costs are the long-run figures.

Prints a JSON list, one object per pod count: pods, cpu_cores, rss_mib, floor_cpu_cores, ratio_to_floor,
files_per_tick, series, failures, not_started, seconds, cgroup, parser.
Usage: python bench/agent_overhead.py [--pods 50,150,300] [--seconds 60] [--cgroup v1|v2] [--pure-python]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from agent.podmeta import PodMeta, pod_meta  # noqa: E402
from agent.system import cgroup as cg  # noqa: E402
from agent.system.cgroup import CgroupVersion, HostPaths  # noqa: E402
from agent.system.podcgroup import CgroupDriver, KubeQOS, qos_cgroup_dir  # noqa: E402

N_CPUS = 8


# ------------------------------------------------------------------ the fake host


def make_pods(n: int) -> list[dict[str, Any]]:
    """n pods: every third BestEffort (koordinator BE with batch-cpu), the rest Burstable/Guaranteed."""
    pods = []
    for i in range(n):
        kind = i % 3
        qos = ("BestEffort", "Burstable", "Guaranteed")[kind]
        labels = {"koordinator.sh/qosClass": "BE"} if kind == 0 else {}
        res = {"requests": {"kubernetes.io/batch-cpu": "500"}} if kind == 0 else {"requests": {"cpu": "1"}}
        pods.append(
            {
                "metadata": {"name": f"p{i}", "namespace": "bench", "uid": f"uid-{i:05d}", "labels": labels},
                "spec": {"containers": [{"name": f"c{j}", "resources": res} for j in range(2)]},
                "status": {
                    "qosClass": qos,
                    "phase": "Running",
                    "containerStatuses": [
                        {"name": f"c{j}", "containerID": f"containerd://{i:05d}{j}{'ab' * 28}"}
                        for j in range(2)
                    ],
                },
            }
        )
    return pods


def _write(path: Path, text: str) -> None:
    """Atomic replace, like a pseudo-file that is never seen half-written; then read back once, so the
    tmpfs access-time update that the first read after a write costs (relatime: about a third more than
    a plain read) is the simulator's, not whichever reader comes first (cgroupfs has no such cost)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.read(fd, 65536)
    finally:
        os.close(fd)


class FakeHost:
    def __init__(self, base: Path, version: CgroupVersion, n_pods: int) -> None:
        self.base = base
        self.version = version
        self.driver = CgroupDriver.CGROUPFS
        self.paths = HostPaths(cgroup_root=base / "cgroup", proc=base / "proc", sys=base / "sys")
        self.metas = [pod_meta(p, self.driver) for p in make_pods(n_pods)]
        self.be_dir = qos_cgroup_dir(self.driver, KubeQOS.BESTEFFORT)

    def path(self, spec: cg.CgroupFile[Any], cgroup_dir: str) -> Path:
        return cg.cgroup_file_path(self.paths.cgroup_root, self.version, spec, cgroup_dir)

    def cgroup_dirs(self) -> list[str]:
        out = []
        for meta in self.metas:
            out.append(meta.cgroup_dir)
            out.extend(c.cgroup_dir for c in meta.containers)
        return out

    def build(self) -> None:
        root = self.paths.cgroup_root
        root.mkdir(parents=True)
        (self.paths.proc / "pressure").mkdir(parents=True)
        if self.version is CgroupVersion.V1:
            for sub in ("cpu,cpuacct", "memory", "cpuset"):
                (root / sub).mkdir()
            (root / "cpu").symlink_to("cpu,cpuacct")
            (root / "cpuacct").symlink_to("cpu,cpuacct")
        else:
            (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
        for qos in KubeQOS:
            self._mkdir(qos_cgroup_dir(self.driver, qos))
        for d in self.cgroup_dirs():
            self._mkdir(d)
        # node topology: N_CPUS CPUs on one NUMA node
        sysdir = self.paths.sys / "devices" / "system"
        for cpu in range(N_CPUS):
            topo = sysdir / "cpu" / f"cpu{cpu}" / "topology"
            topo.mkdir(parents=True)
            (topo / "core_id").write_text(f"{cpu}\n")
            (topo / "physical_package_id").write_text("0\n")
        (sysdir / "node" / "node0").mkdir(parents=True)
        (sysdir / "node" / "node0" / "cpulist").write_text(f"0-{N_CPUS - 1}\n")
        for name, text in (("cpu", "some avg10=0.50 avg60=0.40 avg300=0.30 total=1000\n"),):
            (self.paths.proc / "pressure" / name).write_text(text)
        # static files: BE cpusets and quota
        _write(self.path(cg.CPUSET_CPUS, self.be_dir), f"0-{N_CPUS - 1}\n")
        for meta in self.metas:
            if meta.kube_qos is KubeQOS.BESTEFFORT:
                for c in meta.containers:
                    _write(self.path(cg.CPUSET_CPUS, c.cgroup_dir), f"0-{N_CPUS - 1}\n")
        if self.version is CgroupVersion.V1:
            _write(self.path(cg.CPU_QUOTA, self.be_dir), "400000\n")
            _write(self.path(cg.CPU_PERIOD, self.be_dir), "100000\n")
        else:
            _write(self.path(cg.CPU_QUOTA, self.be_dir), "400000 100000\n")
        self.advance(0)

    def _mkdir(self, cgroup_dir: str) -> None:
        root = self.paths.cgroup_root
        bases = (
            [root / s for s in ("cpu,cpuacct", "memory", "cpuset")]
            if self.version is CgroupVersion.V1
            else [root]
        )
        for b in bases:
            (b / cgroup_dir).mkdir(parents=True, exist_ok=True)

    # -------------------------------------------------------------- counters

    def advance(self, tick: int) -> None:
        """Write every counter for ``tick`` (monotonic in tick)."""
        per_cpu = [[tick * 50 + c, 0, tick * 20, tick * 25, 0, 1, 1, 0] for c in range(N_CPUS)]
        total = [sum(col) for col in zip(*per_cpu, strict=True)]
        lines = ["cpu  " + " ".join(map(str, total))]
        lines += [f"cpu{i} " + " ".join(map(str, t)) for i, t in enumerate(per_cpu)]
        _write(self.paths.proc / "stat", "\n".join(lines) + "\nctxt 1\nbtime 1\n")
        _write(
            self.paths.proc / "meminfo",
            f"MemTotal: 16000000 kB\nMemFree: {4000000 + tick % 100} kB\nMemAvailable: 8000000 kB\n",
        )
        _write(
            self.paths.sys / "devices/system/node/node0/meminfo",
            "Node 0 MemTotal: 16000000 kB\nNode 0 MemFree: 4000000 kB\nNode 0 Active(file): 100 kB\n"
            "Node 0 Inactive(file): 100 kB\nNode 0 SReclaimable: 100 kB\n",
        )
        v1 = self.version is CgroupVersion.V1
        dirs = [self.be_dir, *self.cgroup_dirs()]
        for k, d in enumerate(dirs):
            ns = tick * (10_000_000 + k * 1000)
            if v1:
                _write(self.path(cg.CPU_USAGE, d), f"{ns}\n")
                _write(
                    self.path(cg.CPU_STAT, d),
                    f"nr_periods {tick * 10}\nnr_throttled {tick}\nthrottled_time {tick * 5}\n",
                )
                stat = "".join(
                    f"{p}{key} {(k + 1) * 4096 * (i + 1)}\n"
                    for p in ("", "total_")
                    for i, key in enumerate(
                        (
                            "cache",
                            "rss",
                            "inactive_file",
                            "active_file",
                            "inactive_anon",
                            "active_anon",
                            "unevictable",
                        )
                    )
                )
                numa = f"total={k + 10} N0={k + 10}\nfile=1 N0=1\nanon={k} N0={k}\n"
            else:
                _write(
                    self.path(cg.CPU_STAT, d),
                    f"usage_usec {ns // 1000}\nuser_usec 0\nsystem_usec 0\nnr_periods {tick * 10}\n"
                    f"nr_throttled {tick}\nthrottled_usec {tick * 5}\n",
                )
                stat = "".join(
                    f"{key} {(k + 1) * 4096 * (i + 1)}\n"
                    for i, key in enumerate(
                        (
                            "anon",
                            "file",
                            "inactive_file",
                            "active_file",
                            "inactive_anon",
                            "active_anon",
                            "unevictable",
                        )
                    )
                )
                numa = f"anon N0={(k + 1) * 4096}\nfile N0={(k + 1) * 8192}\n"
            _write(self.path(cg.MEMORY_STAT, d), stat)
            _write(self.path(cg.MEMORY_NUMA_STAT, d), numa)

    def read_set(self) -> list[str]:
        """Every file the collectors read per 1 s tick (the floor child reads exactly these)."""
        v1 = self.version is CgroupVersion.V1
        files = [str(self.paths.proc / "stat"), str(self.paths.proc / "meminfo")]
        files.append(str(self.paths.sys / "devices/system/node/node0/meminfo"))
        for meta in self.metas:
            for d in [meta.cgroup_dir, *(c.cgroup_dir for c in meta.containers)]:
                files.append(str(self.path(cg.CPU_USAGE, d)))
                files.append(str(self.path(cg.MEMORY_STAT, d)))
                files.append(str(self.path(cg.CPU_STAT, d)))
            files.append(str(self.path(cg.MEMORY_NUMA_STAT, meta.cgroup_dir)))
        be_dirs = [self.be_dir]
        for meta in self.metas:
            if meta.kube_qos is KubeQOS.BESTEFFORT:
                be_dirs.extend(c.cgroup_dir for c in meta.containers)
        files += [str(self.path(cg.CPUSET_CPUS, d)) for d in be_dirs]
        files += [str(self.path(cg.CPU_QUOTA, self.be_dir)), str(self.path(cg.CPU_USAGE, self.be_dir))]
        if v1:
            files.append(str(self.path(cg.CPU_PERIOD, self.be_dir)))
        return files


class _Pods:
    def __init__(self, metas: Sequence[PodMeta]) -> None:
        self._metas = tuple(metas)

    def pods(self) -> Sequence[PodMeta]:
        return self._metas


# ------------------------------------------------------------------ children


class _Sources(_Pods):
    """What the reporter reads from the states informer (no NodeMetric CR here: the CR write is an API
    call every 60 s, not a per-second cost)."""

    def host_apps(self) -> Sequence[Any] | None:
        return []

    def collect_policy(self) -> Any:
        return None

    def nodemetric_seen(self) -> bool:
        return False


class _DiscardPusher:
    """Stands in for the hub client: the report is built and serialised to protobuf, then dropped."""

    def __init__(self) -> None:
        self.bytes = 0

    def push(self, report: Any = None) -> bool:
        self.bytes += len(report.SerializeToString()) if report is not None else 0
        return True


def _prefill(collectors: Sequence[Any], ctx: Any, cache: Any) -> int:
    """Steady state before measuring: two real rounds name every series and prime the collectors; those
    series are then dropped (their rows go back to the cache's pool, as a deleted pod's do) and each is
    filled anew to its capacity with history, one point a second in timestamp order up to now (as an agent
    that has run for its retention wrote it), so peak RSS is the long-run figure rather than the first
    minute's and queries see the long-run layout. (A separate scratch cache would stay mapped while the
    collectors' refs still point into it, and inflate the peak with memory the daemon never holds.)"""
    from agent.metriccache.cache import SampleBatch, SeriesRef
    from agent.metricsadvisor.runner import CollectorRunner

    runner = CollectorRunner(collectors, ctx, cache)
    for tick in (1, 2):
        runner.tick(now=float(tick))
    keys = cache.series_keys()
    for kind in sorted({kind for kind, _ in keys}):
        cache.drop({}, kind)
    del runner
    now_ms = int(time.time() * 1000)
    refs = [SeriesRef(kind, dict(labels)) for kind, labels in keys]
    capacities = [cache.config.capacity_for(name for name, _ in labels) for _, labels in keys]
    for step in range(max(capacities, default=0)):  # one point per series per "second", oldest first
        batch = SampleBatch()
        for ref, capacity in zip(refs, capacities, strict=True):
            if step < capacity:
                batch.add(ref, now_ms - 1000 * (capacity - step), 1.0)
        cache.append(batch)
    return sum(capacities)


PHASES = {"simulate": 0.0, "floor": 0.35, "agent": 0.65}
"""Each child's offset within the shared second (see the module docstring)."""


def _aligned(epoch: float, phase: float) -> float:
    """The next monotonic time at ``phase`` of a second counted from ``epoch`` (CLOCK_MONOTONIC is one clock
    for every process of the host)."""
    now = time.monotonic()
    whole = int(now - epoch - phase) + 1
    return epoch + phase + whole


def child_agent(host: FakeHost, seconds: float, epoch: float) -> dict[str, Any]:
    # Everything the koordlet process imports, so RSS is the daemon's, not just the collectors'.
    import threading

    import agent.daemon  # noqa: F401
    from agent.metriccache.cache import CacheConfig, MetricCache
    from agent.metrics import AgentMetrics
    from agent.metricsadvisor.framework import AdvisorConfig, CollectContext
    from agent.metricsadvisor.registry import default_collectors
    from agent.metricsadvisor.runner import CollectorRunner
    from agent.options import parse
    from agent.reporter.loop import ReporterLoop

    opts, _ = parse(["--node-name=bench"], {})
    sources = _Sources(host.metas)
    ctx = CollectContext(
        paths=host.paths,
        cgroup_version=host.version,
        cgroup_driver=host.driver,
        pods=sources,
        host_apps=lambda: [],
    )
    # The daemon's cache sizing for the default NodeMetric spec (node series 35 min, pod/container/
    # interface series 6 min).
    from agent.daemon_cache import DEFAULT_NODE_RETENTION_SECONDS

    cache = MetricCache(
        CacheConfig(
            retention_seconds=DEFAULT_NODE_RETENTION_SECONDS,
            collect_interval_seconds=opts.collect_interval_seconds,
            entity_retention_seconds=opts.pod_retention_seconds,
        )
    )
    metrics = AgentMetrics("bench")
    collectors = default_collectors(AdvisorConfig(), opts.feature_gates)
    runner = CollectorRunner(collectors, ctx, cache, on_collect=metrics.on_collect)
    pusher = _DiscardPusher()
    reporter = ReporterLoop(
        node_name="bench", cache=cache, sources=sources, writer=None, pusher=pusher,
        push_interval=opts.push_interval_seconds,
    )  # fmt: skip
    stop = threading.Event()
    prefilled = _prefill(collectors, ctx, cache) if os.environ.get("KOORD_BENCH_STEADY", "1") == "1" else 0
    _ready()
    time.sleep(max(0.0, _aligned(epoch, PHASES["agent"]) - time.monotonic()))
    cpu0, wall0 = time.process_time(), time.monotonic()
    runner.start()
    loop = threading.Thread(target=reporter.run, args=(stop,), daemon=True)
    loop.start()
    time.sleep(seconds)
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    stop.set()
    runner.stop()
    loop.join(5)
    from agent.system.accel import ACCELERATED

    return {
        "cpu_seconds": cpu,
        "wall_seconds": wall,
        "parser": "c" if ACCELERATED else "python",
        "failures": dict(runner.failures),
        "rounds": dict(runner.rounds),
        "series": cache.series_count(),
        "started": runner.wait_started(0),
        "not_started": runner.not_started(),
        "report_bytes": pusher.bytes,
        "prefilled_points": prefilled,
        "reported_pods": len(reporter.last_status.pods_metric) if reporter.last_status else 0,
    }


def child_floor(host: FakeHost, seconds: float, epoch: float) -> dict[str, Any]:
    files = host.read_set()
    _ready()
    nxt = _aligned(epoch, PHASES["floor"])
    time.sleep(max(0.0, nxt - time.monotonic()))
    cpu0, wall0 = time.process_time(), time.monotonic()
    stop = wall0 + seconds
    rounds = 0
    while nxt < stop:
        for path in files:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    os.read(fd, 65536)
                finally:
                    os.close(fd)
            except OSError:
                pass
        rounds += 1
        nxt += 1.0
        time.sleep(max(0.0, nxt - time.monotonic()))
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    return {"rounds": rounds, "files": len(files), "cpu_seconds": cpu, "wall_seconds": wall}


def child_simulator(host: FakeHost, seconds: float, epoch: float) -> dict[str, Any]:
    _ready()
    tick = 1
    stop = time.monotonic() + seconds
    nxt = _aligned(epoch, PHASES["simulate"])
    time.sleep(max(0.0, nxt - time.monotonic()))
    while time.monotonic() < stop:
        host.advance(tick)
        tick += 1
        nxt += 1.0
        time.sleep(max(0.0, nxt - time.monotonic()))
    return {"ticks": tick}


def _ready() -> None:
    print("ready", flush=True)


# ------------------------------------------------------------------ parent


def _vm_hwm_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Child:
    def __init__(self, role: str, base: Path, version: str, pods: int, seconds: float, epoch: float) -> None:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", role, "--tree", str(base)]
        cmd += ["--cgroup", version, "--pods", str(pods), "--seconds", str(seconds), "--epoch", repr(epoch)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)

    def wait_ready(self) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"child failed to start: {line!r}")

    def finish(self) -> dict[str, Any]:
        """Wait for the child's report line (its own CPU seconds over its measured window, from its aligned
        start for ``--seconds``); read its peak RSS while it is parked on stdin."""
        assert self.proc.stdout is not None and self.proc.stdin is not None
        report = json.loads(self.proc.stdout.readline())
        cpu = report["cpu_seconds"] / report["wall_seconds"]
        rss = _vm_hwm_mib(self.proc.pid)
        self.proc.stdin.close()
        self.proc.wait(30)
        return {"cpu_cores": cpu, "rss_mib": rss, **report}


def run_one(pods: int, seconds: float, version: str) -> dict[str, Any]:
    shm = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    base = Path(tempfile.mkdtemp(prefix="koord-agent-bench-", dir=shm))
    try:
        host = FakeHost(base, CgroupVersion(version), pods)
        host.build()
        epoch = time.monotonic()
        sim = Child("simulate", base, version, pods, seconds + 120, epoch)  # killed when the others end
        sim.wait_ready()
        agent = Child("agent", base, version, pods, seconds, epoch)
        floor = Child("floor", base, version, pods, seconds, epoch)
        agent.wait_ready()
        floor.wait_ready()
        a, f = agent.finish(), floor.finish()
        sim.proc.kill()
        sim.proc.wait(10)
        ratio = a["cpu_cores"] / f["cpu_cores"] if f["cpu_cores"] > 0 else None
        return {
            "pods": pods,
            "cpu_cores": round(a["cpu_cores"], 4),
            "rss_mib": round(a["rss_mib"], 1),
            "floor_cpu_cores": round(f["cpu_cores"], 4),
            "ratio_to_floor": None if ratio is None else round(ratio, 2),
            "files_per_tick": f["files"],
            "series": a["series"],
            "failures": {k: v for k, v in a["failures"].items() if v},
            "not_started": a["not_started"],
            "seconds": seconds,
            "cgroup": version,
            "parser": a["parser"],
        }
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", default="50,150,300", help="comma-separated pod counts")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--cgroup", choices=("v1", "v2"), default="v1")
    ap.add_argument("--pure-python", action="store_true", help="the agent without its C parsers")
    ap.add_argument("--child", choices=("agent", "floor", "simulate"), help=argparse.SUPPRESS)
    ap.add_argument("--tree", help=argparse.SUPPRESS)
    ap.add_argument("--epoch", type=float, default=0.0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        host = FakeHost(Path(args.tree), CgroupVersion(args.cgroup), int(args.pods))
        role = {"agent": child_agent, "floor": child_floor, "simulate": child_simulator}[args.child]
        report = role(host, args.seconds, args.epoch)
        print(json.dumps(report), flush=True)
        sys.stdin.read()  # parked until the parent has measured us
        return
    if args.pure_python:
        os.environ["KOORD_PURE_PYTHON"] = "1"  # inherited by the agent child
    counts = [int(x) for x in args.pods.split(",") if x.strip()]
    results = []
    for n in counts:
        results.append(run_one(n, args.seconds, args.cgroup))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    main()
