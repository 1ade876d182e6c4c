"""End-to-end scheduling against the real local API server: N nodes with NodeMetrics and P pending
pods are created first; then `koord-scheduler` starts as its own process and the clock runs until
every pod is bound (watched through the API). The API server, etcd, the scheduler and this driver
share the machine's cores.

Prints one JSON object: nodes, pods, pods_per_s (bound, from scheduler start), seconds, rss_mib
(peak RSS of the scheduler process), setup_s.
Usage: python bench/scheduler_e2e.py [--nodes 500] [--pods 2000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client, watch

from apis.constants import NODE_METRIC_PLURAL, SLO_GROUP, SLO_VERSION
from koord.localcluster.bootstrap import bootstrap
from koord.localcluster.controlplane import ControlPlane

NS = "bench"


def create_nodes(api: Any, n: int) -> None:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def one(i: int) -> None:
        name = f"node-{i:04d}"
        res = {"cpu": "32", "memory": "128Gi", "pods": "110"}
        core.create_node({"metadata": {"name": name}, "status": {"allocatable": res, "capacity": res}})
        core.patch_node(name, {"spec": {"taints": None}})  # admission's not-ready taint; no controller here
        custom.create_cluster_custom_object(
            SLO_GROUP,
            SLO_VERSION,
            NODE_METRIC_PLURAL,
            {"apiVersion": f"{SLO_GROUP}/{SLO_VERSION}", "kind": "NodeMetric", "metadata": {"name": name}},
        )
        usage = {"cpu": f"{2000 + (i * 7919) % 16000}m", "memory": f"{16 + i % 64}Gi"}
        custom.patch_cluster_custom_object_status(
            SLO_GROUP,
            SLO_VERSION,
            NODE_METRIC_PLURAL,
            name,
            {"status": {"updateTime": now, "nodeMetric": {"nodeUsage": {"resources": usage}}}},
        )

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(n)))


def create_pods(api: Any, n: int) -> None:
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": NS}})

    def one(k: int) -> None:
        core.create_namespaced_pod(
            NS,
            {
                "metadata": {"name": f"pod-{k:05d}"},
                "spec": {
                    "schedulerName": "koord-scheduler",
                    "containers": [
                        {
                            "name": "c",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                        }
                    ],
                },
            },
        )

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(n)))


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--timeout", type=float, default=300)
    a = ap.parse_args()
    n_nodes, n_pods = min(a.nodes, 5000), min(a.pods, 20000)  # bounded
    with ControlPlane() as cp:
        api = cp.api_client()
        bootstrap(api)
        t0 = time.perf_counter()
        create_nodes(api, n_nodes)
        create_pods(api, n_pods)
        setup_s = time.perf_counter() - t0
        core = client.CoreV1Api(api)
        rv = core.list_namespaced_pod(NS, limit=1).metadata.resource_version
        sched = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "scheduler.main",
                f"--kubeconfig={cp.kubeconfig_path}",
                "--no-leader-elect",
                "--metrics-port=0",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        start = time.perf_counter()
        bound: set[str] = set()
        rss = 0.0
        try:
            w = watch.Watch()
            deadline = start + a.timeout
            while len(bound) < n_pods and time.perf_counter() < deadline:
                for ev in w.stream(core.list_namespaced_pod, NS, resource_version=rv, timeout_seconds=5):
                    obj = ev["object"]
                    rv = obj.metadata.resource_version
                    if obj.spec.node_name:
                        bound.add(obj.metadata.name)
                    if len(bound) >= n_pods:
                        w.stop()
                        break
                rss = max(rss, peak_rss_mib(sched.pid))
            elapsed = time.perf_counter() - start
            rss = max(rss, peak_rss_mib(sched.pid))
        finally:
            sched.terminate()
            _, err = sched.communicate(timeout=30)
        if len(bound) < n_pods:
            print(f"only {len(bound)}/{n_pods} pods bound; scheduler stderr:\n{err[-3000:]}", file=sys.stderr)
        print(
            json.dumps(
                {
                    "nodes": n_nodes,
                    "pods": n_pods,
                    "bound": len(bound),
                    "pods_per_s": round(len(bound) / elapsed, 1),
                    "seconds": round(elapsed, 2),
                    "rss_mib": round(rss, 1),
                    "setup_s": round(setup_s, 1),
                }
            )
        )


if __name__ == "__main__":
    main()
