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
Imports: kubernetes, psutil, apis, koord.localcluster.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from apis.constants import NODE_METRIC_PLURAL, SLO_GROUP, SLO_VERSION
from koord.localcluster.bootstrap import bootstrap
from koord.localcluster.controlplane import ControlPlane, free_ports
from koord.localcluster.kubescheduler import KubeScheduler
from koord.localcluster.procs import spawn_logged, stop_process

KOORD, KUBE = "koord-scheduler", "kube-scheduler"
LABEL = "koord.sh/bench-vs-kube"
WORKERS = 16  # driver threads creating objects
SETTLE_TIMEOUT_S = 300.0  # pods deleted between runs must be gone from the API by then
Run = dict[str, Any]


def _api(cp: ControlPlane) -> Any:
    """An admin client with a connection per driver thread (the default pool keeps 4)."""
    conf = client.Configuration()
    conf.host, conf.ssl_ca_cert = cp.server, str(cp.ca_cert)
    conf.api_key = {"authorization": f"Bearer {cp.token}"}
    conf.connection_pool_maxsize = WORKERS + 4
    return client.ApiClient(conf)


def _drain(resp: Any) -> None:
    """Reads a raw response to its end, so its connection goes back to the pool clean."""
    resp.read()
    resp.release_conn()


def _json(resp: Any) -> Any:
    """A raw response's JSON body, its connection back in the pool."""
    try:
        return json.loads(resp.data)
    finally:
        resp.release_conn()


def _parallel(fn: Callable[[int], object], items: range) -> None:
    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(fn, items))


class Bench:
    """The bench's nodes and namespaces on `cp`; `close()` deletes them."""

    def __init__(self, cp: ControlPlane, workdir: Path, timeout: float, rate: float) -> None:
        self.cp, self.workdir, self.timeout, self.rate = cp, workdir, timeout, rate
        self.tag = uuid.uuid4().hex[:6]
        self.api = _api(cp)
        # Any: the client's stubs type bodies as models; the bench sends dicts and reads raw responses
        self.core: Any = client.CoreV1Api(self.api)
        self.custom: Any = client.CustomObjectsApi(self.api)
        self.nodes = 0
        self.ns = {s: f"vs-{s.split('-')[0]}-{self.tag}" for s in (KOORD, KUBE)}
        self.create_namespaces()

    def create_namespaces(self) -> None:
        for ns in self.ns.values():
            _drain(self.core.create_namespace({"metadata": {"name": ns}}, _preload_content=False))

    def node_name(self, i: int) -> str:
        return f"vs-{self.tag}-{i:05d}"

    def grow(self, n: int) -> None:
        """Nodes up to n, each with a NodeMetric (usage 6-56 % cpu, 12-62 % memory, as scheduler_e2e)."""

        def one(i: int) -> None:
            name, res = self.node_name(i), {"cpu": "32", "memory": "128Gi", "pods": "110"}
            meta = {"name": name, "labels": {LABEL: self.tag, "kubernetes.io/hostname": name}}
            body = {"metadata": meta, "status": {"allocatable": res, "capacity": res}}
            _drain(self.core.create_node(body, _preload_content=False))
            # admission's not-ready taint; no node lifecycle controller here to clear it
            _drain(self.core.patch_node(name, {"spec": {"taints": None}}, _preload_content=False))
            nm = {
                "apiVersion": f"{SLO_GROUP}/{SLO_VERSION}",
                "kind": "NodeMetric",
                "metadata": {"name": name},
            }
            self.custom.create_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, nm)

        _parallel(one, range(self.nodes, n))
        self.nodes = n

    def refresh_metrics(self) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

        def one(i: int) -> None:
            usage = {"cpu": f"{2000 + (i * 7919) % 16000}m", "memory": f"{16 + i % 64}Gi"}
            status = {"updateTime": now, "nodeMetric": {"nodeUsage": {"resources": usage}}}
            self.custom.patch_cluster_custom_object_status(
                SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, self.node_name(i), {"status": status}
            )

        _parallel(one, range(self.nodes))

    def pod(self, scheduler: str, k: int) -> dict[str, Any]:
        requests = {"cpu": "100m", "memory": "128Mi"}
        return {
            "metadata": {"name": f"p-{k:05d}", "labels": {LABEL: self.tag}},
            "spec": {
                "schedulerName": scheduler,
                "nodeSelector": {LABEL: self.tag},
                "containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests}}],
            },
        }

    def create_pod(self, scheduler: str, k: int) -> None:
        body = self.pod(scheduler, k)
        _drain(self.core.create_namespaced_pod(self.ns[scheduler], body, _preload_content=False))

    def resource_version(self, ns: str) -> str:
        resp = self.core.list_namespaced_pod(ns, limit=1, _preload_content=False)
        return str(_json(resp)["metadata"]["resourceVersion"])

    # --- one run ---------------------------------------------------------------------------------
    def run(self, scheduler: str, mode: str, pods: int) -> Run:
        ns = self.ns[scheduler]
        log_dir = self.workdir / f"{scheduler}-{mode}-{self.nodes}-{uuid.uuid4().hex[:4]}"
        log_dir.mkdir(parents=True)
        if mode == "backlog":
            _parallel(lambda k: self.create_pod(scheduler, k), range(pods))
        if scheduler == KOORD:
            self.refresh_metrics()
        rv = self.resource_version(ns)
        proc = Proc(self.cp, scheduler, log_dir)
        record: Run = {"nodes": self.nodes, "mode": mode, "scheduler": scheduler}
        try:
            start = time.monotonic()
            proc.start(wait_ready=mode == "streamed", timeout=self.timeout)
            cpu0 = 0.0
            if mode == "streamed":
                cpu0, rv, start = proc.cpu_seconds(), self.resource_version(ns), time.monotonic()
            deadline = start + self.timeout
            with ThreadPoolExecutor(WORKERS) as pool:
                created = [pool.submit(self._stream, scheduler, w, pods, start) for w in range(WORKERS)] \
                    if mode == "streamed" else []  # fmt: skip
                bound, unschedulable = follow(self.core, ns, rv, pods, deadline, proc.check)
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
        self.clear(scheduler)
        return record

    def _stream(self, scheduler: str, worker: int, pods: int, t0: float) -> float:
        """Worker `worker`'s share of the pods, pod k at t0 + k/rate (rate 0: at once); when it ended."""
        for k in range(worker, pods, WORKERS):
            if self.rate > 0 and (wait := t0 + k / self.rate - time.monotonic()) > 0:
                time.sleep(wait)
            self.create_pod(scheduler, k)
        return time.monotonic()

    def clear(self, scheduler: str) -> None:
        """Deletes the scheduler's pods and waits until no bench pod is left in the API."""
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                _drain(self.core.delete_collection_namespaced_pod(
                    self.ns[scheduler], label_selector=f"{LABEL}={self.tag}", grace_period_seconds=0,
                    _preload_content=False,
                ))  # fmt: skip
            except ApiException as e:
                # A loaded API server times a collection of thousands out (504) part-way: again.
                if e.status not in (429, 500, 503, 504):
                    raise
            resp = self.core.list_pod_for_all_namespaces(
                label_selector=f"{LABEL}={self.tag}", limit=1, _preload_content=False
            )
            if not _json(resp)["items"]:
                return
            time.sleep(1.0)
        raise TimeoutError(f"bench pods still in the API {SETTLE_TIMEOUT_S:.0f}s after their deletion")

    def close(self) -> None:
        try:
            for scheduler in self.ns:
                self.clear(scheduler)
            for ns in self.ns.values():
                _drain(self.core.delete_namespace(ns, _preload_content=False))

            def one(i: int) -> None:
                name = self.node_name(i)
                _drain(self.core.delete_node(name, _preload_content=False))
                self.custom.delete_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, name)

            _parallel(one, range(self.nodes))
        finally:
            self.api.close()


class Proc:
    """One scheduler process: koord-scheduler (`python -m scheduler.main`, no --config: its default
    profile) or kube-scheduler; its CPU time and peak RSS from /proc."""

    def __init__(self, cp: ControlPlane, scheduler: str, log_dir: Path) -> None:
        self.cp, self.scheduler, self.log_dir = cp, scheduler, log_dir
        self.kube: KubeScheduler | None = None
        self.koord: subprocess.Popen[bytes] | None = None
        self.pid = 0
        self.rss = 0.0

    def start(self, wait_ready: bool, timeout: float) -> None:
        if self.scheduler == KUBE:
            self.kube = KubeScheduler(self.cp, KUBE, self.log_dir, verbosity=0).start(timeout=timeout)
            self.pid = _child_with_arg(f"--config={self.kube.config_path}")
            return
        (port,) = free_ports(1)
        self.koord = spawn_logged(self.log_dir / "koord-scheduler.log", [
            sys.executable, "-m", "scheduler.main", f"--kubeconfig={self.cp.kubeconfig_path}",
            "--no-leader-elect", f"--metrics-port={port}",
        ], die_with_parent=True)  # fmt: skip
        self.pid = self.koord.pid
        deadline = time.monotonic() + timeout
        while wait_ready and not _ok(f"http://127.0.0.1:{port}/readyz"):
            self.check()
            if time.monotonic() > deadline:
                raise TimeoutError(f"koord-scheduler not ready after {timeout:.0f}s")
            time.sleep(0.1)

    def check(self) -> None:
        """Raises when the scheduler exited; samples its peak RSS."""
        alive = (
            self.kube.running() if self.kube is not None else bool(self.koord and self.koord.poll() is None)
        )
        if not alive:
            tail = "\n".join(self.log_text().splitlines()[-30:])
            raise RuntimeError(f"{self.scheduler} exited during the run; its log ends:\n{tail}")
        self.peak_rss_mib()

    def log_text(self) -> str:
        if self.kube is not None:
            return self.kube.log_text()
        return (self.log_dir / "koord-scheduler.log").read_text(errors="replace")

    def cpu_seconds(self) -> float:
        """utime + stime of the process (fields 14 and 15 of /proc/<pid>/stat)."""
        stat = Path(f"/proc/{self.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def peak_rss_mib(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                self.rss = max(self.rss, int(line.split()[1]) / 1024)
        return self.rss

    def stop(self) -> None:
        if self.kube is not None:
            self.kube.stop()
        if self.koord is not None:
            stop_process(self.koord)


def _child_with_arg(arg: str) -> int:
    """The PID of this process's descendant whose command line holds `arg` (KubeScheduler keeps its own)."""
    for p in psutil.Process().children(recursive=True):
        try:
            if arg in p.cmdline():
                return p.pid
        except psutil.Error:  # another child that just exited
            continue
    raise RuntimeError(f"no child process with {arg}")


def _ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def follow(
    core: Any, ns: str, rv: str, want: int, deadline: float, tick: Callable[[], None]
) -> tuple[set[str], set[str]]:
    """Watches ns's pods from rv until `want` are bound or the deadline passes: (bound, ever found
    unschedulable). A watch whose rv expired (410) relists."""
    bound: set[str] = set()
    unschedulable: set[str] = set()

    def see(pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        if pod["spec"].get("nodeName"):
            bound.add(name)
        for c in pod.get("status", {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable":
                unschedulable.add(name)

    w: Any = watch.Watch()  # type: ignore[no-untyped-call]
    while len(bound) < want and (left := deadline - time.monotonic()) > 0:
        tick()
        try:
            seconds = max(1, min(5, int(left)))
            for ev in w.stream(core.list_namespaced_pod, ns, resource_version=rv, deserialize=False,
                               timeout_seconds=seconds, allow_watch_bookmarks=True):  # fmt: skip
                rv = ev["object"]["metadata"]["resourceVersion"]
                if ev["type"] in ("ADDED", "MODIFIED"):
                    see(ev["object"])
                if len(bound) >= want:
                    w.stop()
                    break
        except ApiException as e:
            if e.status != 410:
                raise
            listed = _json(core.list_namespaced_pod(ns, _preload_content=False))
            bound.clear()
            for pod in listed["items"]:
                see(pod)
            rv = listed["metadata"]["resourceVersion"]
    return bound, unschedulable


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
        bench = Bench(cp, workdir or Path(tmp), timeout, rate)
        try:
            for n in sorted(nodes):
                bench.grow(n)
                for mode in modes:
                    for r in range(runs):
                        # alternate who goes first, so neither always meets the other's leftovers
                        for s in (KOORD, KUBE) if r % 2 == 0 else (KUBE, KOORD):
                            records.append(bench.run(s, mode, pods))
        finally:
            bench.close()
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
