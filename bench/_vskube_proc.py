"""One scheduler process of bench/scheduler_vs_kube.py (docs/testing.md#scheduler-vs-kube-benchmark):
koord-scheduler or the real kube-scheduler started on the bench's control plane, its liveness, its CPU
time and peak RSS read from /proc, and its stop. Nothing here touches the bench's API objects.

Imports: psutil, koord.localcluster, bench._vskube_cluster (the schedulers' names).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from bench._vskube_cluster import KUBE
from koord.localcluster.controlplane import ControlPlane, free_ports, http_ok
from koord.localcluster.kubescheduler import KubeScheduler
from koord.localcluster.procs import spawn_logged, stop_process


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
        while wait_ready and not http_ok(f"http://127.0.0.1:{port}/readyz"):
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
