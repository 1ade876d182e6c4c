"""Soak: `koord up --nodes N` with pod churn for a bounded time, measuring what a long run would leak.

Runs the real `koord up` (control plane, the real node when root and free, N simulated nodes, koord-manager
with the embedded scheduler, the MetricHub and the admission webhooks, one koordlet per node, the demo) as a
child process. After ``--warmup`` seconds it churns pods for ``--seconds``: every ``--churn-interval`` seconds
it creates a plain pod in the demo namespace (the demo's ClusterColocationProfile makes it BE on batch
resources, so the webhook, the scheduler and NodeResource all work on it) and deletes the oldest once
``--churn-keep`` exist. Then Ctrl-C, as an operator stops it.

Measured per component (koord-manager, each koordlet; from /proc/<pid>/status of the PIDs koord up records):
RSS at the end of the warm-up, at the end, the peak, and the growth per hour over the churn window from a
least-squares line through one sample every 10 s (so one late spike is not "growth"). Also: reports the
koordlets failed to deliver (``koordlet_node_metric_reports{status="failed"}``, per target), reports the hub
refused (``koord_manager_hub_reports_refused_total``), supervised-thread restarts (every "crashed (restart in"
line in the components' logs, and ``koord_scheduler_thread_restarts_total``), pods churned, pods still
pending at the end, and whether koord up exited 0.

koord-manager's bounded structures fill within the warm-up (docs/install.md#memory-of-the-daemons): the
MetricHub's change history keeps 5 minutes (and at most 65,536 changes and 128 MiB), the parsed-quantity
caches a few thousand strings. The run still samples the hub's ``koord_manager_hub_history_bytes`` every
``HUB_SAMPLE_S`` seconds and reports its growth per hour, and koord-manager's growth with the history's
bytes taken out of each RSS sample (``manager_growth_excluding_hub_history_mib_per_hour``), so a change
of those bounds shows apart from a leak.

Targets (issue: reliability suite): flat RSS after warm-up (growth per hour within noise: a few MiB), 0
dropped reports, 0 unexpected restarts.

Prints ONE JSON object. Usage:
python bench/soak.py [--nodes 20] [--warmup 120] [--seconds 600] [--churn-interval 2] [--churn-keep 20]
                     [--no-node]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from koord.localcluster.components import STATE_FILE  # noqa: E402
from koord.localcluster.demo import NAMESPACE, batch_template  # noqa: E402
from koord.status import scrape  # noqa: E402

SAMPLE_S = 10.0
HUB_SAMPLE_S = 30.0
HUB_HISTORY = "koord_manager_hub_history_bytes"


def rss_kib(pid: int) -> int | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    m = re.search(r"^VmRSS:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) if m else None


def threads(pid: int | None) -> int | None:
    """The process's thread count (thread pools grow up to their size as work arrives)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text() if pid is not None else ""
    except OSError:
        return None
    m = re.search(r"^Threads:\s+(\d+)", text, re.M)
    return int(m.group(1)) if m else None


def component_of(pid: int) -> str | None:
    """``koord-manager`` or ``koordlet-<node>`` from the process's command line."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    text = [a.decode(errors="replace") for a in args]
    for a in text:
        if a.startswith("--node-name="):
            return f"koordlet-{a.split('=', 1)[1]}"
    if any("manager.main" in a for a in text):
        return "koord-manager"
    return None


def slope_per_hour(samples: list[tuple[float, int]]) -> float:
    """Least-squares slope of (seconds, KiB) in MiB per hour; 0 with fewer than 2 samples."""
    if len(samples) < 2:
        return 0.0
    n = len(samples)
    mx = sum(t for t, _ in samples) / n
    my = sum(v for _, v in samples) / n
    den = sum((t - mx) ** 2 for t, _ in samples)
    if den == 0:
        return 0.0
    return sum((t - mx) * (v - my) for t, v in samples) / den * 3600 / 1024


def without(rss: list[tuple[float, int]], held: list[tuple[float, float]]) -> list[tuple[float, int]]:
    """The RSS samples (seconds, KiB) taken with a ``held`` sample (seconds, bytes) at the same time,
    minus what ``held`` says is held then: the RSS a bounded structure still filling up does not explain."""
    by_time = dict(held)
    return [(t, kib - round(by_time[t] / 1024)) for t, kib in rss if t in by_time]


def metrics_urls(out: str) -> dict[str, str]:
    """Component → /metrics URL from koord up's banner (``  <name>: metrics <url>, log ...``)."""
    return dict(re.findall(r"^\s+(koord-manager|koordlet-\S+): metrics (\S+),", out, re.M))


def total(samples: dict[str, float], name: str, **labels: str) -> float:
    got = 0.0
    for key, value in samples.items():
        if not key.startswith(name + "{"):
            continue
        if all(f'{k}="{v}"' in key for k, v in labels.items()):
            got += value
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=20)
    ap.add_argument("--warmup", type=float, default=120.0)
    ap.add_argument("--seconds", type=float, default=600.0)
    ap.add_argument("--churn-interval", type=float, default=2.0)
    ap.add_argument("--churn-keep", type=int, default=20)
    ap.add_argument("--start-timeout", type=float, default=600.0)
    ap.add_argument("--no-node", action="store_true", help="no real node (koord up --no-node)")
    args = ap.parse_args()
    from kubernetes import client, config

    state = Path(tempfile.mkdtemp(prefix="koord-soak-"))
    out_path = state / "koord-up.out"
    duration = args.warmup + args.seconds + 120
    argv = [sys.executable, "-c", "import sys; from koord.cli import main; sys.exit(main())", "up",
            "--nodes", str(args.nodes), "--state-dir", str(state / "up"), "--prometheus", "off",
            "--status-interval", "0", "--duration", str(int(duration)),
            *(["--no-node"] if args.no_node else [])]  # fmt: skip
    result: dict[str, Any] = {"nodes": args.nodes, "warmup_s": args.warmup, "seconds": args.seconds}
    with out_path.open("wb") as f:
        proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + args.start_timeout
        while "Press Ctrl-C" not in out_path.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"koord up did not start:\n{out_path.read_text(errors='replace')[-3000:]}")
            time.sleep(1)
        banner = out_path.read_text(errors="replace")
        urls = metrics_urls(banner)
        pids = json.loads((state / "up" / STATE_FILE).read_text())["pids"]
        names = {pid: component_of(pid) or str(pid) for pid in pids}
        api = config.new_client_from_config(str(state / "up" / "kubeconfig"))
        core: Any = client.CoreV1Api(api)
        series: dict[str, list[tuple[float, int]]] = {n: [] for n in names.values()}
        history: list[tuple[float, float]] = []  # (seconds, koord_manager_hub_history_bytes)
        manager_pid = next((pid for pid, name in names.items() if name == "koord-manager"), None)
        peak: dict[str, int] = {}
        warm: dict[str, int | None] = {}
        t0 = time.monotonic()
        time.sleep(args.warmup)
        for pid, name in names.items():
            warm[name] = rss_kib(pid)
        warm_threads = threads(manager_pid)
        churned, alive, tag = 0, [], uuid.uuid4().hex[:6]
        start = time.monotonic()
        next_sample = next_hub_sample = start
        while (now := time.monotonic()) - start < args.seconds:
            pod = batch_template()
            pod["metadata"]["name"] = f"soak-{tag}-{churned}"
            pod["metadata"]["labels"] = {**pod["metadata"]["labels"], "app": "soak"}
            small = {"cpu": "10m", "memory": "8Mi"}  # small enough to be bound: the bind path churns too
            pod["spec"]["containers"][0]["resources"] = {"requests": dict(small), "limits": dict(small)}
            try:
                core.create_namespaced_pod(NAMESPACE, pod)
                alive.append(pod["metadata"]["name"])
                churned += 1
            except client.ApiException as e:
                result.setdefault("create_errors", []).append(f"{e.status} {e.reason}")
            while len(alive) > args.churn_keep:
                name = alive.pop(0)
                try:
                    core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)
                except client.ApiException as e:
                    result.setdefault("delete_errors", []).append(f"{e.status} {e.reason}")
            if now >= next_sample:
                next_sample += SAMPLE_S
                if now >= next_hub_sample and "koord-manager" in urls:
                    next_hub_sample += HUB_SAMPLE_S
                    if held := scrape(urls["koord-manager"]):
                        history.append((now - t0, total(held, HUB_HISTORY)))
                for pid, name in names.items():
                    if (kib := rss_kib(pid)) is not None:
                        series[name].append((now - t0, kib))
                        peak[name] = max(peak.get(name, 0), kib)
            time.sleep(args.churn_interval)
        pods = core.list_namespaced_pod(NAMESPACE, label_selector="app=soak").items
        result["pods_churned"] = churned
        result["pods_pending_at_end"] = sum(1 for p in pods if not p.spec.node_name)
        scraped = {name: scrape(url) for name, url in urls.items()}
        koordlets = {n: s for n, s in scraped.items() if n.startswith("koordlet-")}
        result["reports_failed"] = {
            target: int(sum(total(s, "koordlet_node_metric_reports_total", target=target, status="failed")
                            for s in koordlets.values()))
            for target in ("hub", "cr")
        }  # fmt: skip
        manager = scraped.get("koord-manager", {})
        result["hub_reports_refused"] = int(total(manager, "koord_manager_hub_reports_refused_total"))
        result["scheduler_thread_restarts"] = int(total(manager, "koord_scheduler_thread_restarts_total"))
        api.close()
        rss: dict[str, Any] = {}
        for name, points in series.items():
            end = points[-1][1] if points else None
            rss[name] = {
                "warm_mib": None if warm.get(name) is None else round((warm[name] or 0) / 1024, 1),
                "end_mib": None if end is None else round(end / 1024, 1),
                "peak_mib": round(peak.get(name, 0) / 1024, 1),
                "growth_mib_per_hour": round(slope_per_hour(points), 1),
            }
        result["rss"] = rss
        koordlet_growth = [v["growth_mib_per_hour"] for k, v in rss.items() if k.startswith("koordlet-")]
        result["koordlet_max_growth_mib_per_hour"] = max(koordlet_growth, default=0.0)
        result["manager_growth_mib_per_hour"] = rss.get("koord-manager", {}).get("growth_mib_per_hour")
        if history:
            result["hub_history"] = {
                "warm_mib": round(history[0][1] / 2**20, 1),
                "end_mib": round(history[-1][1] / 2**20, 1),
                "growth_mib_per_hour": round(slope_per_hour([(t, round(b / 1024)) for t, b in history]), 1),
            }
            rest = without(series.get("koord-manager", []), history)
            result["manager_growth_excluding_hub_history_mib_per_hour"] = round(slope_per_hour(rest), 1)
        result["manager_threads"] = {"warm": warm_threads, "end": threads(manager_pid)}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=180)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        logs = state / "up" / "logs"
        restarts = {}
        if logs.is_dir():
            for log in logs.glob("*.log"):
                n = len(re.findall(r"crashed \(restart in", log.read_text(errors="replace")))
                if n:
                    restarts[log.stem] = n
        result["thread_restarts_in_logs"] = restarts
        result["koord_up_exit_code"] = proc.returncode
        if proc.returncode == 0:
            import shutil

            shutil.rmtree(state, ignore_errors=True)
        else:
            result["state_dir"] = str(state)
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
