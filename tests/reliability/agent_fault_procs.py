"""Real koord processes for the koordlet fault tests: a koordlet (and a koord-manager) started as child
processes as `koord up` starts them (``python -c`` of their ``main``, own session, output in a log file,
stopped when the test process dies), stopped by SIGTERM or killed by SIGKILL, always reaped; an emulated
node (a Node object kept Ready and a generated host tree whose counters advance,
koord.localcluster.emunode) for the koordlet to read; the reports a MetricHub holds for a node; polling
with a deadline.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from koord.localcluster.controlplane import free_ports, http_ok
from koord.localcluster.emulated import EmulatedHost
from koord.localcluster.procs import stop_process
from manager.metrichub.store import HubStore
from proto.koord.v1 import metrichub_pb2 as pb
from tests.helpers.polling import wait_for as wait_for  # the koordlet fault tests import it from here

# The child asks for SIGTERM when its parent dies (PR_SET_PDEATHSIG) itself, first thing: no preexec_fn, so
# the child is spawned with vfork and no fork handler runs — a plain fork of a process that used gRPC (the
# in-process MetricHub, earlier tests' clients) can leave the child stuck before its exec.
_DIE_WITH_PARENT = "import ctypes, signal; ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0); "
ENTRY = {
    "koordlet": _DIE_WITH_PARENT + "import sys; from agent.daemon import main; sys.exit(main())",
    "koord-manager": _DIE_WITH_PARENT + "import sys; from manager.main import main; sys.exit(main())",
}


@dataclass
class Daemon:
    """One koord daemon as a child process; ``port`` serves its /healthz and /metrics."""

    name: str
    argv: list[str]
    log: Path
    port: int
    proc: subprocess.Popen[bytes] | None = None
    starts: list[float] = field(default_factory=list)
    """Wall-clock times of every start."""

    def start(self, timeout: float = 60.0) -> Daemon:
        self.starts.append(time.time())
        # A temporary folder of its own next to its log (the test's tmp_path): a daemon these tests
        # SIGKILL cannot remove its temporary files, which must not land in the session's TMPDIR.
        tmp = self.log.parent / f"{self.name}.tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, "TMPDIR": str(tmp)},
            )
        deadline = time.monotonic() + timeout
        while not http_ok(f"http://127.0.0.1:{self.port}/healthz"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{self.name} did not come up; its log:\n{self.tail()}")
            time.sleep(0.2)
        return self

    def stop(self) -> int | None:
        """SIGTERM (the daemon's graceful stop), waited for; the exit code."""
        if self.proc is None:
            return None
        stop_process(self.proc)
        code, self.proc = self.proc.returncode, None
        return code

    def kill(self) -> None:
        """SIGKILL: a crash (an OOM kill), nothing saved; reaped."""
        if self.proc is None:
            return
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.proc = None

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else "(no log)"


def koordlet(
    node: str, host: EmulatedHost, kubeconfig: Path, state: Path, hub_port: int, extra: Sequence[str] = ()
) -> Daemon:
    """A koordlet for ``node`` reading ``host``, pushing to the hub every second, its metric cache in
    ``state`` (checkpointed every 2 s), QoS off (these tests are about metrics)."""
    state.mkdir(parents=True, exist_ok=True)
    (port,) = free_ports(1)
    argv = [
        sys.executable, "-c", ENTRY["koordlet"], f"--node-name={node}", f"--kubeconfig={kubeconfig}",
        f"--cgroup-root-dir={host.paths.cgroup_root}", f"--proc-root-dir={host.paths.proc}",
        f"--sys-root-dir={host.paths.sys}", "--cgroup-driver=cgroupfs", f"--addr=127.0.0.1:{port}",
        f"--hub-address=127.0.0.1:{hub_port}", "--push-interval-seconds=1",
        f"--metric-cache-path={state / 'metric-cache.npz'}", "--metric-cache-checkpoint-interval=2s",
        f"--audit-log={state / 'audit.log'}", "--no-enable-qos", "--feature-gates=NetworkCollector=false",
        *extra,
    ]  # fmt: skip
    return Daemon(f"koordlet-{node}", argv, state / "koordlet.log", port)


def reports(store: HubStore, node: str) -> list[pb.NodeMetricItem]:
    """The hub's latest entry for ``node`` (zero or one item)."""
    return list(store.list(node).items)


def warm(report: pb.NodeMetricReport, duration_seconds: int) -> bool:
    """The report's aggregated node usage for that window has its average (the window is not in its
    cold start, docs/rules/koordlet.md#reporter)."""
    for agg in report.status.node_metric.aggregated_node_usages:
        if agg.duration.seconds == duration_seconds:
            return "avg" in agg.usage and "cpu" in agg.usage["avg"].resources
    return False
