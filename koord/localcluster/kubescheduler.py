"""The real kube-scheduler v1.20.2 against the local control plane, as the differential tests' oracle
(docs/testing.md#the-kube-scheduler-oracle), and a parser of its -v=10 log.

`KubeScheduler(cp, scheduler_name, state_dir)` writes a `kubescheduler.config.k8s.io/v1beta1`
KubeSchedulerConfiguration (the 1.20 format: kube's default profile under `scheduler_name`, so it only
takes pods addressed to it, changed by the profile's `plugins` when given; leader election off;
`percentageOfNodesToScore: 100`, so it scores every feasible node as koord does; its HTTP port on a
free loopback port, as 1.20 wants one), runs the binary as `system:kube-scheduler` (the API server's
bootstrap RBAC gives that user what the scheduler reads and writes) with `--v=10` into a log file,
serves HTTPS on a free 127.0.0.1 port and is ready once `/healthz` answers. `stop()` ends it by PID
(SIGTERM, then SIGKILL), so nothing outlives the caller.

`parse_log(text)` reads, per pod, what kube logged at each attempt: every score plugin's weighted
scores of every node it scored (`Plugin %s scores on %v/%v => %v` in generic_scheduler.go's
prioritizeNodes), the summed scores (`Host %s => Score %d`), the bound node or the FitError message.
Imports: standard library and koord.localcluster only.
"""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from koord.localcluster.binaries import find_kube_scheduler
from koord.localcluster.controlplane import ControlPlane, free_ports, http_ok
from koord.localcluster.procs import spawn_logged, stop_process

CONFIG_API_VERSION = "kubescheduler.config.k8s.io/v1beta1"
USER = "system:kube-scheduler"


class KubeSchedulerError(RuntimeError):
    """kube-scheduler failed to start; the message carries the tail of its log."""


def scheduler_config(
    kubeconfig: Path,
    scheduler_name: str,
    insecure_port: int,
    qps: int = 500,
    burst: int = 1000,
    plugins: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """The KubeSchedulerConfiguration (v1beta1) the oracle runs with: the default profile, renamed
    (and changed by the profile's `plugins`, when given)."""
    profile: dict[str, object] = {"schedulerName": scheduler_name}
    if plugins:
        profile["plugins"] = dict(plugins)
    return {
        "apiVersion": CONFIG_API_VERSION,
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": qps, "burst": burst},
        "leaderElection": {"leaderElect": False},
        # With a config file 1.20 takes its insecure (HTTP) port from these, not from --port, and
        # refuses port 0: a free loopback port, one server for both.
        "healthzBindAddress": f"127.0.0.1:{insecure_port}",
        "metricsBindAddress": f"127.0.0.1:{insecure_port}",
        "percentageOfNodesToScore": 100,
        "profiles": [profile],
    }


class KubeScheduler:
    """`with KubeScheduler(cp, "kube-oracle", dir) as ks:` runs kube-scheduler until the block ends."""

    def __init__(
        self,
        cp: ControlPlane,
        scheduler_name: str,
        state_dir: Path,
        *,
        binary: Path | None = None,
        verbosity: int = 10,
        plugins: Mapping[str, object] | None = None,
    ) -> None:
        self.cp = cp
        self.scheduler_name = scheduler_name
        self.state_dir = state_dir
        self.binary = binary
        self.verbosity = verbosity
        self.plugins = plugins
        self.port = 0
        self.insecure_port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.state_dir / "kube-scheduler.log"

    @property
    def config_path(self) -> Path:
        return self.state_dir / "kube-scheduler.config.json"

    def start(self, timeout: float = 60.0) -> KubeScheduler:
        binary = self.binary or find_kube_scheduler()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        kubeconfig = self.cp.component_kubeconfig("kube-scheduler", USER)
        self.port, self.insecure_port = free_ports(2)
        config = scheduler_config(kubeconfig, self.scheduler_name, self.insecure_port, plugins=self.plugins)
        self.config_path.write_text(json.dumps(config, indent=2))
        self._proc = spawn_logged(self.log_path, [
            str(binary), f"--config={self.config_path}",
            f"--secure-port={self.port}", "--bind-address=127.0.0.1",
            f"--cert-dir={self.state_dir / 'certs'}",
            # Delegated authn/authz of the secure port (/healthz is always allowed).
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            f"--v={self.verbosity}", "--logtostderr=true",
        ], die_with_parent=True)  # fmt: skip
        try:
            self._wait_healthy(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_healthy(self, timeout: float) -> None:
        assert self._proc is not None
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # its serving certificate is self-signed in --cert-dir
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise KubeSchedulerError(
                    f"kube-scheduler exited with code {self._proc.returncode} during start; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            if http_ok(f"https://127.0.0.1:{self.port}/healthz", ctx):
                return
            time.sleep(0.1)
        raise KubeSchedulerError(f"kube-scheduler not healthy after {timeout:.0f}s; log {self.log_path}:\n"
                                 f"{self.log_tail()}")  # fmt: skip

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_process(proc)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 25) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:]) or "(no log)"

    def __enter__(self) -> KubeScheduler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --- the log ------------------------------------------------------------------------------------------


@dataclass
class Attempt:
    """One scheduling attempt of a pod as kube logged it. `scores[plugin][node]` are the plugin's
    weighted scores (kube logs them after NormalizeScore and the weight); empty when fewer than two
    nodes were feasible (kube scores nothing then). `node` is where it was bound, `fit_error` the
    FitError message when no node fit."""

    scores: dict[str, dict[str, int]] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)
    node: str | None = None
    fit_error: str | None = None
    evaluated: int | None = None
    feasible: int | None = None


# klog's header: `I1127 07:40:00.123456   12345 file.go:123] message`
_HEADER = re.compile(r"^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+\d+ [^\]]+\] (.*)$")
_PLUGIN = re.compile(r"^Plugin (\S+) scores on ([^/\s]*)/(\S+) => \[(.*)\]$")
_NODE_SCORE = re.compile(r"\{(\S+) (-?\d+)\}")
_HOST = re.compile(r"^Host (\S+) => Score (-?\d+)$")
_ATTEMPT = re.compile(r"^Attempting to schedule pod: ([^/\s]*)/(\S+)$")
_QUOTED = r'"((?:[^"\\]|\\.)*)"'
_BOUND = re.compile(r'^"Successfully bound pod to node" pod=' + _QUOTED + " node=" + _QUOTED
                    + r" evaluatedNodes=(\d+) feasibleNodes=(\d+)")  # fmt: skip
_NO_FIT = re.compile(r'^"Unable to schedule pod; no fit; waiting" pod=' + _QUOTED + " err=" + _QUOTED)


def _unquote(s: str) -> str:
    """A Go %q string's content (klog quotes InfoS values with %q); JSON reads the escapes kube emits
    for our names and messages."""
    return str(json.loads(f'"{s}"'))


def parse_log(text: str) -> dict[str, list[Attempt]]:
    """Every pod's attempts (`namespace/name` → attempts in log order). Score lines come before the
    decision of the same attempt; one scheduling goroutine logs them, so lines of two pods' cycles never
    interleave."""
    pods: dict[str, list[Attempt]] = {}
    current: dict[str, Attempt] = {}

    def attempt(key: str) -> Attempt:
        a = current.get(key)
        if a is None:
            a = current[key] = Attempt()
            pods.setdefault(key, []).append(a)
        return a

    last_key = ""
    for line in text.splitlines():
        m = _HEADER.match(line)
        if m is None:
            continue
        msg = m.group(1)
        if (a := _ATTEMPT.match(msg)) is not None:
            last_key = f"{a.group(1)}/{a.group(2)}"
            current.pop(last_key, None)  # a new attempt
            attempt(last_key)
        elif (p := _PLUGIN.match(msg)) is not None:
            last_key = f"{p.group(2)}/{p.group(3)}"
            attempt(last_key).scores[p.group(1)] = {n: int(s) for n, s in _NODE_SCORE.findall(p.group(4))}
        elif (h := _HOST.match(msg)) is not None and last_key:
            attempt(last_key).totals[h.group(1)] = int(h.group(2))
        elif (b := _BOUND.match(msg)) is not None:
            key = _unquote(b.group(1))
            got = attempt(key)
            got.node, got.evaluated, got.feasible = _unquote(b.group(2)), int(b.group(3)), int(b.group(4))
            current.pop(key, None)
        elif (f := _NO_FIT.match(msg)) is not None:
            key = _unquote(f.group(1))
            attempt(key).fit_error = _unquote(f.group(2))
            current.pop(key, None)
    return pods
