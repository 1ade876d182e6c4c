"""koord's own daemons for `koord up`: one koord-manager (with the embedded koord-scheduler and the
MetricHub) and one koordlet per node, each a child process in its own session with its log under
``<state>/logs``, stopped by PID (koordlets first, so their last reports reach a live hub).

Local-mode MetricHub credentials: one static token per node (user ``system:node:<name>``, the identity
the hub binds a report stream to), written to ``<state>/hub-tokens.csv`` (mode 0600) for the manager
and to one file per koordlet. The PIDs are recorded in ``<state>/koord-components.json`` so a crashed
run's daemons are stopped by the next one (``reap_stale``).

Imports: standard library, koord.localcluster.{controlplane,procs}.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from koord.localcluster.controlplane import ControlPlane, free_ports, http_ok
from koord.localcluster.procs import spawn_logged, stop_pid, stop_process

STATE_FILE = "koord-components.json"
WEBHOOK_SECRET = "koord-manager-webhook-certs"  # as deploy/manager/deployment.yaml
# As the manifests set it: two malloc arenas keep RSS flat (docs/install.md#memory-of-the-daemons).
DAEMON_ENV = {"MALLOC_ARENA_MAX": "2"}
_ENTRY = {
    "koord-manager": "import sys; from manager.main import main; sys.exit(main())",
    "koordlet": "import sys; from agent.daemon import main; sys.exit(main())",
}


class ComponentError(RuntimeError):
    """A daemon did not start or become healthy; the message names it and its log."""


@dataclass(frozen=True, slots=True)
class NodeHost:
    """Where a koordlet reads its host: the real one (/proc, /sys, the kubelet's cgroup root) or a
    simulated tree."""

    proc: Path
    sys: Path
    cgroup_root: Path
    simulated: bool
    qos: str = "on"  # "on", "dry-run" (audit, write nothing) or "off"
    kubelet_config: Path | None = None
    """The kubelet's KubeletConfiguration file (None: the koordlet's default path)."""
    kubelet_dir: Path | None = None
    """The kubelet's ``--root-dir``, holding ``cpu_manager_state`` (None: the koordlet's default)."""


@dataclass(slots=True)
class Daemon:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    metrics_url: str


_QOS_ARGS = {
    "on": ["--enable-qos"],
    "dry-run": ["--enable-qos", "--qos-dry-run"],
    "off": ["--no-enable-qos"],
}


def koordlet_args(
    node: str, host: NodeHost, kubeconfig: Path, port: int, hub_addr: str, node_dir: Path
) -> list[str]:
    """Pure: the koordlet's arguments for ``node`` (its hub token, metric cache and audit log live in
    ``node_dir``)."""
    return [
        f"--node-name={node}",
        f"--kubeconfig={kubeconfig}",
        f"--cgroup-root-dir={host.cgroup_root}",
        f"--proc-root-dir={host.proc}",
        f"--sys-root-dir={host.sys}",
        "--cgroup-driver=cgroupfs",
        f"--addr=127.0.0.1:{port}",
        f"--hub-address={hub_addr}",
        f"--hub-token-file={node_dir / 'hub-token'}",
        f"--metric-cache-path={node_dir / 'metric-cache.npz'}",
        f"--audit-log={node_dir / 'audit.log'}",
        *_QOS_ARGS[host.qos],
        # The real node's kubelet keeps its files under the node's folder, not /var/lib/kubelet
        # (docs/rules/koordlet-topology.md#kubelet-cpu-manager).
        *([f"--kubelet-config-file={host.kubelet_config}"] if host.kubelet_config else []),
        *([f"--kubelet-root-dir={host.kubelet_dir}"] if host.kubelet_dir else []),
    ]


def reap_stale(state_dir: Path) -> list[int]:
    """Stops the daemons a crashed run recorded (only processes still running our entry points)."""
    path = state_dir / STATE_FILE
    try:
        pids = [int(p) for p in json.loads(path.read_text()).get("pids", [])]
    except (OSError, ValueError, AttributeError):
        return []
    stopped = []
    for pid in pids:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if any(code.encode() in cmdline for code in _ENTRY.values()):
            stop_pid(pid)
            stopped.append(pid)
    path.unlink(missing_ok=True)
    return stopped


class KoordComponents:
    """`KoordComponents(cp, state_dir)`: ``start_manager(nodes)``, then ``start_koordlet(node, host)``
    per node; ``stop()`` stops them all by PID."""

    def __init__(self, cp: ControlPlane, state_dir: Path, python: str = sys.executable) -> None:
        self.cp = cp
        self.state_dir = state_dir
        self.python = python
        self.logs = state_dir / "logs"
        self.daemons: dict[str, Daemon] = {}
        self.hub_addr = ""
        self.webhook_port = 0
        self._tokens: dict[str, str] = {}

    def reserve_webhook_port(self) -> int:
        """Chooses the webhooks' port before the manager starts, so their configurations can name it."""
        (self.webhook_port,) = free_ports(1)
        return self.webhook_port

    def webhook_url(self, path: str) -> str:
        """The URL of the manager's webhook at ``path`` (after ``reserve_webhook_port``)."""
        return f"https://127.0.0.1:{self.webhook_port}{path}"

    def _spawn(self, name: str, entry: str, args: list[str], metrics_url: str) -> Daemon:
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"{name}.log"
        proc = spawn_logged(
            log, [self.python, "-c", _ENTRY[entry], *args], die_with_parent=True, env=DAEMON_ENV
        )
        daemon = self.daemons[name] = Daemon(name, proc, log, metrics_url)
        (self.state_dir / STATE_FILE).write_text(
            json.dumps({"pids": [d.proc.pid for d in self.daemons.values()]})
        )
        return daemon

    def _wait_healthy(self, daemon: Daemon, url: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (rc := daemon.proc.poll()) is not None:
                raise ComponentError(f"{daemon.name} exited with {rc} while starting; see {daemon.log}")
            if http_ok(url):
                return
            time.sleep(0.2)
        raise ComponentError(f"{daemon.name} not healthy at {url} after {timeout:.0f}s; see {daemon.log}")

    def start_manager(self, nodes: list[str], timeout: float = 60.0, webhooks: bool = False) -> Daemon:
        """koord-manager with the embedded scheduler; hub tokens for ``nodes`` (static, local mode).
        ``webhooks``: it also serves the admission webhooks on 127.0.0.1:``webhook_port``, with a
        certificate from the Secret koord-manager-webhook-certs naming 127.0.0.1 (the API server calls
        them by URL: ``webhook_url``)."""
        self._tokens = {n: secrets.token_urlsafe(24) for n in nodes}
        tokens = self.state_dir / "hub-tokens.csv"
        tokens.write_text("".join(f"{t},system:node:{n}\n" for n, t in self._tokens.items()))
        tokens.chmod(0o600)
        hub, metrics, probe = free_ports(3)
        if webhooks and not self.webhook_port:
            self.reserve_webhook_port()
        self.hub_addr = f"127.0.0.1:{hub}"
        webhook_args = [
            f"--webhook-addr=127.0.0.1:{self.webhook_port}",
            f"--webhook-tls-secret={WEBHOOK_SECRET}",
            f"--webhook-cert-dir={self.state_dir / 'webhook-certs'}",
            "--webhook-hosts=127.0.0.1",
        ]
        daemon = self._spawn(
            "koord-manager",
            "koord-manager",
            [
                f"--kubeconfig={self.cp.kubeconfig_path}",
                f"--hub-addr={self.hub_addr}",
                f"--metrics-addr=127.0.0.1:{metrics}",
                f"--health-probe-addr=127.0.0.1:{probe}",
                "--hub-auth=static",
                f"--hub-token-auth-file={tokens}",
                *(webhook_args if webhooks else []),
            ],
            f"http://127.0.0.1:{metrics}/metrics",
        )
        self._wait_healthy(daemon, f"http://127.0.0.1:{probe}/healthz", timeout)
        return daemon

    def start_koordlet(self, node: str, host: NodeHost, timeout: float = 60.0) -> Daemon:
        if node not in self._tokens:
            raise ComponentError(f"no hub token for node {node!r}: start_manager() with it first")
        node_dir = self.state_dir / "koordlet" / node
        node_dir.mkdir(parents=True, exist_ok=True)
        token = node_dir / "hub-token"
        token.write_text(self._tokens[node])
        token.chmod(0o600)
        (port,) = free_ports(1)
        args = koordlet_args(node, host, self.cp.kubeconfig_path, port, self.hub_addr, node_dir)
        daemon = self._spawn(f"koordlet-{node}", "koordlet", args, f"http://127.0.0.1:{port}/metrics")
        self._wait_healthy(daemon, f"http://127.0.0.1:{port}/healthz", timeout)
        return daemon

    def exited(self) -> dict[str, int]:
        return {n: rc for n, d in self.daemons.items() if (rc := d.proc.poll()) is not None}

    def stop(self) -> None:
        order = sorted(self.daemons, key=lambda n: n == "koord-manager")  # koordlets first
        for name in order:
            daemon = self.daemons.pop(name)
            stop_process(daemon.proc)
        (self.state_dir / STATE_FILE).unlink(missing_ok=True)
