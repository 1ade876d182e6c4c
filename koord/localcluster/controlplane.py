"""A real local Kubernetes control plane: etcd + kube-apiserver on 127.0.0.1 with free ports, a
throw-away CA, a static admin token and a kubeconfig. Used by the test fixture and by `koord up`.

Processes are started in their own session and stopped by PID (SIGTERM, then SIGKILL); a state file
records the PIDs so a crashed run's leftovers are reaped by the next start in the same folder.
Imports: standard library and koord.localcluster only (the kubernetes client is imported lazily).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from koord.localcluster.binaries import Binaries, find_binaries
from koord.localcluster.pki import ADMIN_USER, PKI, issue_cert, make_pki
from koord.localcluster.procs import spawn_logged, stop_pid, stop_process

SERVICE_CIDR = "10.0.0.0/24"
# The API server's client identity towards kubelets (logs, exec, the node proxy); system:masters
# passes the kubelet's webhook authorization.
KUBELET_CLIENT_USER = "kube-apiserver-kubelet-client"


class ControlPlaneError(RuntimeError):
    """The control plane failed to start; the message carries the tail of the failing log."""


def free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1 (held open together so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"

    return True


class ControlPlane:
    """etcd + kube-apiserver. `with ControlPlane() as cp:` starts and stops it."""

    def __init__(self, state_dir: Path | None = None, binaries: Binaries | None = None) -> None:
        self._own_dir = state_dir is None
        self.state_dir = Path(tempfile.mkdtemp(prefix="koord-cp-")) if state_dir is None else state_dir
        self.binaries = binaries
        self.pki: PKI | None = None
        self.etcd_port = 0
        self.apiserver_port = 0
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._etcd_data: Path | None = None
        self._kubelet_client: tuple[Path, Path] | None = None

    # --- paths and client settings ------------------------------------------------------------
    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def kubeconfig_path(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    @property
    def token(self) -> str:
        assert self.pki is not None, "control plane not started"
        return self.pki.admin_token

    @property
    def ca_cert(self) -> Path:
        assert self.pki is not None, "control plane not started"
        return self.pki.ca_cert

    def log_path(self, name: str) -> Path:
        return self.state_dir / "logs" / f"{name}.log"

    # --- lifecycle ----------------------------------------------------------------------------
    def start(self, timeout: float = 90.0) -> ControlPlane:
        reap_stale(self.state_dir)
        binaries = self.binaries or find_binaries()
        self.binaries = binaries
        (self.state_dir / "logs").mkdir(parents=True, exist_ok=True)
        self.pki = make_pki(self.state_dir / "pki")
        self._kubelet_client = issue_cert(self.pki, "apiserver-kubelet-client", KUBELET_CLIENT_USER,
                                          ("system:masters",))  # fmt: skip
        self.etcd_port, etcd_peer, self.apiserver_port = free_ports(3)
        try:
            self._start_etcd(binaries, etcd_peer, timeout)
            self._start_apiserver(binaries, timeout)
        except BaseException:
            self.stop()
            raise
        self._write_kubeconfig()
        return self

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        proc = spawn_logged(self.log_path(name), argv)
        self._procs[name] = proc
        self._save_state()
        return proc

    def _start_etcd(self, binaries: Binaries, peer_port: int, timeout: float) -> None:
        # tmpfs keeps etcd's fsyncs cheap (Debian's etcd 3.4 has no --unsafe-no-fsync).
        shm = Path("/dev/shm")
        base = shm if shm.is_dir() and os.access(shm, os.W_OK) else self.state_dir
        self._etcd_data = Path(tempfile.mkdtemp(prefix="koord-etcd-", dir=base))
        client = f"http://127.0.0.1:{self.etcd_port}"
        peer = f"http://127.0.0.1:{peer_port}"
        self._spawn("etcd", [
            str(binaries.etcd), "--name", "default", "--data-dir", str(self._etcd_data),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"default={peer}", "--log-level", "warn",
        ])  # fmt: skip
        self._wait("etcd", lambda: http_ok(f"{client}/health"), timeout)

    def _start_apiserver(self, binaries: Binaries, timeout: float) -> None:
        pki = self.pki
        assert pki is not None and self._kubelet_client is not None
        kubelet_cert, kubelet_key = self._kubelet_client
        self._spawn("kube-apiserver", [
            str(binaries.kube_apiserver),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={self.apiserver_port}", "--insecure-port=0",
            f"--tls-cert-file={pki.server_cert}", f"--tls-private-key-file={pki.server_key}",
            f"--client-ca-file={pki.ca_cert}", f"--token-auth-file={pki.token_file}",
            "--authorization-mode=Node,RBAC",
            # Reach kubelets (a LocalNode) by their InternalIP, as a verified TLS client of our CA.
            f"--kubelet-client-certificate={kubelet_cert}", f"--kubelet-client-key={kubelet_key}",
            f"--kubelet-certificate-authority={pki.ca_cert}",
            "--kubelet-preferred-address-types=InternalIP",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.sa_pub}", f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--disable-admission-plugins=ServiceAccount",
            "--allow-privileged=true", "--endpoint-reconciler-type=none",
            f"--cert-dir={self.state_dir / 'apiserver-certs'}", "--v=1",
        ])  # fmt: skip
        ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
        url = f"{self.server}/readyz"
        self._wait("kube-apiserver", lambda: http_ok(url, ctx=ctx, token=pki.admin_token), timeout)

    def _wait(self, name: str, probe: Any, timeout: float) -> None:
        proc = self._procs[name]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ControlPlaneError(
                    f"{name} exited with code {proc.returncode} during start; log {self.log_path(name)}:\n"
                    f"{_tail(self.log_path(name))}"
                )
            if probe():
                return
            time.sleep(0.1)
        raise ControlPlaneError(
            f"{name} not ready after {timeout:.0f}s; log {self.log_path(name)}:\n{_tail(self.log_path(name))}"
        )

    def stop(self) -> None:
        """Stops the API server, then etcd, by PID; removes etcd's data and a self-made state folder."""
        for name in ("kube-apiserver", "etcd"):
            proc = self._procs.pop(name, None)
            if proc is not None:
                stop_process(proc)
        if self._etcd_data is not None:
            shutil.rmtree(self._etcd_data, ignore_errors=True)
            self._etcd_data = None
        with contextlib.suppress(FileNotFoundError):
            self.state_file.unlink()
        if self._own_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def exited(self) -> dict[str, int]:
        """Components that have exited since start, with their exit codes."""
        return {n: rc for n, p in self._procs.items() if (rc := p.poll()) is not None}

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- state and kubeconfig -----------------------------------------------------------------
    def _save_state(self) -> None:
        state = {
            "pids": {n: p.pid for n, p in self._procs.items()},
            "cmd": {n: str(p.args[0]) for n, p in self._procs.items()},  # type: ignore[index]
            "etcdData": str(self._etcd_data) if self._etcd_data else None,
            "server": self.server,
        }
        self.state_file.write_text(json.dumps(state))

    def _kubeconfig(self, user: str, credentials: dict[str, str]) -> dict[str, Any]:
        assert self.pki is not None
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "koord-local", "cluster": {
                "server": self.server, "certificate-authority": str(self.pki.ca_cert)}}],
            "users": [{"name": user, "user": credentials}],
            "contexts": [{"name": "koord-local", "context": {"cluster": "koord-local", "user": user}}],
            "current-context": "koord-local",
        }  # fmt: skip

    def _write_kubeconfig(self) -> None:
        assert self.pki is not None
        cfg = self._kubeconfig(ADMIN_USER, {"token": self.pki.admin_token})
        # JSON is valid YAML, so every kubeconfig reader accepts it.
        self.kubeconfig_path.write_text(json.dumps(cfg, indent=2))
        self.kubeconfig_path.chmod(0o600)

    def component_kubeconfig(self, name: str, user: str, groups: tuple[str, ...] = ()) -> Path:
        """Writes `<state>/components/<name>.kubeconfig` for a component acting as `user` in `groups`
        (e.g. `system:node:<node>` in `system:nodes` for a kubelet), with a client certificate of the
        control plane's CA: the API server accepts it without a restart, unlike a token-file entry."""
        assert self.pki is not None, "control plane not started"
        cert, key = issue_cert(self.pki, f"client-{name}", user, groups)
        path = self.state_dir / "components" / f"{name}.kubeconfig"
        path.parent.mkdir(parents=True, exist_ok=True)
        cfg = self._kubeconfig(user, {"client-certificate": str(cert), "client-key": str(key)})
        path.write_text(json.dumps(cfg, indent=2))
        path.chmod(0o600)
        return path

    def api_client(self) -> Any:
        """A kubernetes.client.ApiClient authenticated as the admin."""
        from kubernetes import client

        conf = client.Configuration()
        conf.host = self.server
        conf.ssl_ca_cert = str(self.ca_cert)
        conf.api_key = {"authorization": f"Bearer {self.token}"}
        return client.ApiClient(conf)


def http_ok(url: str, ctx: ssl.SSLContext | None = None, token: str | None = None) -> bool:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=2, context=ctx) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError, ssl.SSLError):
        return False


def reap_stale(state_dir: Path) -> list[int]:
    """Stops processes a crashed earlier run recorded in state_dir (only if they still run the same
    binary), removes its etcd data, and returns the PIDs it stopped."""
    state_file = state_dir / "state.json"
    try:
        state = json.loads(state_file.read_text())
    except (OSError, ValueError):
        return []
    stopped = []
    for name, pid in state.get("pids", {}).items():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
        except OSError:
            continue
        if cmdline == state.get("cmd", {}).get(name):
            stop_pid(int(pid))
            stopped.append(int(pid))
    if state.get("etcdData"):
        shutil.rmtree(state["etcdData"], ignore_errors=True)
    state_file.unlink(missing_ok=True)
    return stopped
