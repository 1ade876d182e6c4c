"""koord-scheduler against the real kube-scheduler v1.20.2, side by side on ONE API server
(docs/testing.md#scheduler-vs-kube-benchmark).

Both run as processes with their full default profiles (koord's includes LoadAwareScheduling: every node
has a NodeMetric, refreshed just before each koord run, as the plugin filters out metrics older than
180 s; kube's is koord.localcluster.kubescheduler's, `percentageOfNodesToScore: 100` as koord scores every
feasible node, client qps/burst 500/1000 as koord's, `--v=0`) on identical generous nodes, each with its
own pods (schedulerName `koord-scheduler` / `kube-scheduler`) in its own namespace, one after the other;
between runs the scheduler stops, its pods are deleted and the driver waits until none is left in the
API. Pods select the bench's node label, so nodes of others sharing the API server are never candidates.
`backlog`: pods created first, the clock runs from the scheduler's spawn to the last bind. `streamed`:
the ready scheduler gets pods at `--rate`/s (the achieved `create_rate` is recorded), the clock runs from
the first create to the last bind. Binds are followed by a raw-JSON watch. Per run: pods/s, CPU ms per pod
(the process's utime+stime over the run / pods), peak RSS (VmHWM); a run past `--timeout` is `timed_out`.

Prints one JSON object: nodes, pods, koord_/kube_ pods_per_s, cpu_ms_per_pod, rss_mib and same_outcome
(medians at the largest node count in backlog mode, else the first mode), loadavg_1m, runs (each: nodes,
mode, scheduler, pods_per_s, cpu_ms_per_pod, rss_mib, bound, unschedulable, seconds, timed_out,
streamed: create_rate).
Usage: nice -n 10 python bench/scheduler_vs_kube.py [--nodes 1000,5000] [--pods 5000] [--runs 3]
       [--modes backlog,streamed] [--rate 1000] [--timeout 600]
This module is the driver: each run, the summary, the CLI; bench/_vskube_cluster.py holds the API objects
and the bind watch, bench/_vskube_proc.py a scheduler process and its CPU and RSS.
Imports: koord.localcluster, bench._vskube_cluster, bench._vskube_proc (the repo is put on sys.path).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # the helper modules are bench.*, run as a script or imported
    sys.path.insert(0, str(REPO))

from bench._vskube_cluster import KOORD, KUBE, LABEL, WORKERS, Cluster, follow, parallel  # noqa: E402
from bench._vskube_proc import Proc  # noqa: E402
from koord.localcluster.bootstrap import bootstrap  # noqa: E402
from koord.localcluster.controlplane import ControlPlane  # noqa: E402

__all__ = ["KOORD", "KUBE", "LABEL", "main", "measure", "summary"]
Run = dict[str, Any]


class Runner:
    """Runs one scheduler at a time against the bench's `cluster` on `cp`, each run logging under workdir."""

    def __init__(
        self, cp: ControlPlane, cluster: Cluster, workdir: Path, timeout: float, rate: float
    ) -> None:
        self.cp, self.cluster, self.workdir, self.timeout, self.rate = cp, cluster, workdir, timeout, rate

    def run(self, scheduler: str, mode: str, pods: int) -> Run:
        cluster = self.cluster
        ns = cluster.ns[scheduler]
        log_dir = self.workdir / f"{scheduler}-{mode}-{cluster.nodes}-{uuid.uuid4().hex[:4]}"
        log_dir.mkdir(parents=True)
        if mode == "backlog":
            parallel(lambda k: cluster.create_pod(scheduler, k), range(pods))
        if scheduler == KOORD:
            cluster.refresh_metrics()
        rv = cluster.resource_version(ns)
        proc = Proc(self.cp, scheduler, log_dir)
        record: Run = {"nodes": cluster.nodes, "mode": mode, "scheduler": scheduler}
        try:
            start = time.monotonic()
            proc.start(wait_ready=mode == "streamed", timeout=self.timeout)
            cpu0 = 0.0
            if mode == "streamed":
                cpu0, rv, start = proc.cpu_seconds(), cluster.resource_version(ns), time.monotonic()
            deadline = start + self.timeout
            with ThreadPoolExecutor(WORKERS) as pool:
                created = [pool.submit(self._stream, scheduler, w, pods, start) for w in range(WORKERS)] \
                    if mode == "streamed" else []  # fmt: skip
                bound, unschedulable = follow(cluster.core, ns, rv, pods, deadline, proc.check)
                elapsed = time.monotonic() - start
                cpu = proc.cpu_seconds() - cpu0
                rss = proc.peak_rss_mib()
                if created:
                    record["create_rate"] = round(pods / (max(f.result() for f in created) - start), 1)
        finally:
            proc.stop()
        record.update(
            pods_per_s=round(len(bound) / elapsed, 1), cpu_ms_per_pod=round(cpu * 1000 / pods, 2),
            rss_mib=round(rss, 1), bound=len(bound), unschedulable=len(unschedulable - bound),
            seconds=round(elapsed, 2), timed_out=len(bound) < pods,
        )  # fmt: skip
        print(json.dumps(record), file=sys.stderr, flush=True)  # kept even if the clean-up fails
        cluster.clear(scheduler)
        return record

    def _stream(self, scheduler: str, worker: int, pods: int, t0: float) -> float:
        """Worker `worker`'s share of the pods, pod k at t0 + k/rate (rate 0: at once); when it ended."""
        for k in range(worker, pods, WORKERS):
            if self.rate > 0 and (wait := t0 + k / self.rate - time.monotonic()) > 0:
                time.sleep(wait)
            self.cluster.create_pod(scheduler, k)
        return time.monotonic()


def summary(runs: list[Run], nodes: int, pods: int, mode: str) -> dict[str, Any]:
    """Medians of the runs at `nodes` in `mode`, per scheduler, and whether both had the same outcome."""
    mine = {s: [r for r in runs if (r["nodes"], r["mode"], r["scheduler"]) == (nodes, mode, s)]
            for s in (KOORD, KUBE)}  # fmt: skip
    out: dict[str, Any] = {"nodes": nodes, "pods": pods}
    for s, rs in mine.items():
        for key in ("pods_per_s", "cpu_ms_per_pod", "rss_mib"):
            out[f"{s.split('-')[0]}_{key}"] = statistics.median(r[key] for r in rs) if rs else None
    pairs = list(zip(mine[KOORD], mine[KUBE], strict=True))
    out["same_outcome"] = bool(pairs) and all(
        (a["bound"], a["unschedulable"], a["timed_out"]) == (b["bound"], b["unschedulable"], b["timed_out"])
        for a, b in pairs
    )
    return out


def measure(
    cp: ControlPlane, nodes: list[int], pods: int, modes: list[str], runs: int, *,
    timeout: float = 600.0, rate: float = 1000.0, workdir: Path | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Every (node count, mode, run) for both schedulers on `cp`; the bench's objects are deleted after."""
    loadavg = os.getloadavg()[0]
    records: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="koord-vs-kube-") as tmp:
        cluster = Cluster(cp)
        runner = Runner(cp, cluster, workdir or Path(tmp), timeout, rate)
        try:
            for n in sorted(nodes):
                cluster.grow(n)
                for mode in modes:
                    for r in range(runs):
                        # alternate who goes first, so neither always meets the other's leftovers
                        for s in (KOORD, KUBE) if r % 2 == 0 else (KUBE, KOORD):
                            records.append(runner.run(s, mode, pods))
        finally:
            cluster.close()
    mode = "backlog" if "backlog" in modes else modes[0]
    return {**summary(records, max(nodes), pods, mode), "loadavg_1m": loadavg, "runs": records}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", default="1000,5000", help="comma-separated node counts")
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--modes", default="backlog,streamed")
    ap.add_argument(
        "--rate", type=float, default=1000.0, help="streamed pods created per second (0: at once)"
    )
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds a run may take")
    a = ap.parse_args(argv)
    nodes = [min(int(n), 5000) for n in a.nodes.split(",") if n]  # bounded
    modes = [m for m in a.modes.split(",") if m]
    if not nodes or set(modes) - {"backlog", "streamed"} or not modes:
        ap.error("--nodes needs a count; --modes takes backlog and/or streamed")
    with ControlPlane() as cp:
        api = cp.api_client()
        try:
            bootstrap(api)
        finally:
            api.close()
        result = measure(cp, nodes, min(a.pods, 20000), modes, max(1, a.runs), timeout=a.timeout, rate=a.rate)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
