"""koord-scheduler as the differential harness runs it (docs/testing.md#the-kube-scheduler-oracle): its
configuration (`koord_config`: kube's default profile, the live copy deciding only) and the standalone
process (`KoordScheduler`).
Imports: standard library, koord.localcluster.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from koord.localcluster.controlplane import ControlPlane, free_ports
from koord.localcluster.kubescheduler import scheduler_config
from koord.localcluster.procs import spawn_logged, stop_process

Obj = dict[str, Any]


# 1.20.2 leaves SelectorSpread out of its default profile (the DefaultPodTopologySpread gate, on by
# default, gives default spreading to PodTopologySpread); the selector-spread family compares it, so
# both profiles enable it as 1.20 does with the gate off: PreScore, and Score with weight 1.
SELECTOR_SPREAD: Obj = {
    "preScore": {"enabled": [{"name": "SelectorSpread"}]},
    "score": {"enabled": [{"name": "SelectorSpread", "weight": 1}]},
}


def koord_config(
    scheduler_name: str, kubeconfig: Path, live: bool = True, selector_spread: bool = False
) -> Obj:
    """koord-scheduler's configuration: kube's (the default profile, every node scored), in `v1beta2`,
    whose defaults are 1.20's with the LeastAllocated score given by NodeResourcesFit (koord runs 1.20's
    profile that way; `v1beta1` names NodeResourcesLeastAllocated, which koord does not register), and
    without LoadAwareScheduling (it needs NodeMetrics; kube has no such plugin). The `live` scheduler's
    copies only decide: no preemption (its victims would be kube's pods; DefaultPreemption is compared
    in-process) and no volume binding (VolumeBinding's Reserve and PreBind would bind the claims kube's
    copy is to decide on). With `selector_spread`, SelectorSpread is enabled as in kube's
    (SELECTOR_SPREAD)."""
    doc: Obj = dict(scheduler_config(kubeconfig, scheduler_name, 1))
    doc["apiVersion"] = "kubescheduler.config.k8s.io/v1beta2"

    def off(*names: str) -> Obj:
        return {"disabled": [{"name": n} for n in ("LoadAwareScheduling", *names)]}

    plugins: Obj = {"filter": off(), "score": off(), "reserve": off()}
    if selector_spread:
        plugins["preScore"] = SELECTOR_SPREAD["preScore"]
        plugins["score"] = {**plugins["score"], **SELECTOR_SPREAD["score"]}
    if live:
        plugins["reserve"] = off("VolumeBinding")
        plugins["preBind"] = {"disabled": [{"name": "VolumeBinding"}]}
        plugins["postFilter"] = {"disabled": [{"name": "DefaultPreemption"}]}
    doc["profiles"] = [{"schedulerName": scheduler_name, "plugins": plugins}]
    return doc


class KoordScheduler:
    """koord-scheduler standalone (`python -m scheduler.main`), leader election off, ready on /readyz."""

    def __init__(self, cp: ControlPlane, config: Path, state_dir: Path) -> None:
        self.cp, self.config, self.state_dir = cp, config, state_dir
        self._proc: subprocess.Popen[bytes] | None = None
        self._port = 0

    @property
    def log_path(self) -> Path:
        return self.state_dir / "koord-scheduler.log"

    def spawn(self) -> None:
        """Starts the process; `wait_ready` waits for it (kube-scheduler starts meanwhile)."""
        (self._port,) = free_ports(1)
        self._proc = spawn_logged(self.log_path, [
            sys.executable, "-m", "scheduler.main", f"--kubeconfig={self.cp.kubeconfig_path}",
            f"--config={self.config}", "--no-leader-elect", f"--metrics-port={self._port}",
            "--bind-workers=2",
        ], die_with_parent=True)  # fmt: skip

    def wait_ready(self, timeout: float = 60.0) -> None:
        assert self._proc is not None, "not spawned"
        port = self._port
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-3000:]
                self.stop()
                raise RuntimeError(f"koord-scheduler exited during start:\n{tail}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r,
            ):
                if r.status == 200:
                    return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"koord-scheduler not ready after {timeout:.0f}s; log {self.log_path}")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_process(proc)
