"""A real one-node Kubernetes node on this machine for a started ControlPlane: containerd (own root,
state and socket under the node's folder), kubelet v1.20 (cgroupfs driver, QoS cgroups, webhook
authn/authz, free ports) and kube-controller-manager (PDB status, garbage collection, namespace
deletion, service-account tokens). Pods run a local busybox image imported without any registry,
on a CNI bridge that also carries the node IP, so the API server reaches the kubelet there.

Needs root. `stop()` deletes the pods through kubelet, stops every process by PID and then undoes
what the run changed on the host (hoststate.cleanup); `reap_stale` does the same for a crashed run.
Imports: standard library, apis.kubeobjects, koord.localcluster, the kubernetes client (lazily).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from apis.kubeobjects import Pod
from koord.localcluster.controlplane import ControlPlane, _tail, free_ports
from koord.localcluster.hoststate import CGROUP_ROOT, HostSnapshot, cgroup_tops, cleanup, leftovers, snapshot
from koord.localcluster.image import BUSYBOX_IMAGE, PAUSE_IMAGE, ensure_images
from koord.localcluster.nodebinaries import NodeBinaries, find_node_binaries
from koord.localcluster.nodeconfig import NodePaths, cni_conflist, containerd_toml, kubelet_config
from koord.localcluster.pki import issue_cert
from koord.localcluster.podspec import busybox_pod
from koord.localcluster.procs import spawn_logged, stop_process

DEFAULT_NODE_NAME = "koord-node-0"
DEFAULT_BRIDGE = "koordbr0"
DEFAULT_SUBNET = "10.244.77.0/24"
CGROUP_DRIVER = "cgroupfs"
STATE_FILE = "node-state.json"
# One LocalNode per host at a time: two kubelets would share /kubepods, the bridge and the sysctls.
# The lock file names the holder's state folder, so the next holder reaps a run that died holding it.
HOST_LOCK = Path("/run/koord-localnode.lock")


class NodeError(RuntimeError):
    """The node failed to start; the message carries the tail of the failing log."""


class NodeBusyError(NodeError):
    """Another LocalNode holds this host (one kubelet per host)."""


class LocalNode:
    """`with LocalNode(cp) as node:` starts containerd, kubelet and kube-controller-manager and waits
    for the node to be Ready; leaving the block removes everything again."""

    def __init__(self, control_plane: ControlPlane, state_dir: Path | None = None,
                 node_name: str = DEFAULT_NODE_NAME, binaries: NodeBinaries | None = None,
                 bridge: str = DEFAULT_BRIDGE, subnet: str = DEFAULT_SUBNET) -> None:  # fmt: skip
        self.control_plane = control_plane
        self._own_dir = state_dir is None
        self.state_dir = Path(tempfile.mkdtemp(prefix="koord-node-")) if state_dir is None else state_dir
        self.paths = NodePaths(self.state_dir)
        self.node_name = node_name
        self.binaries = binaries
        self.bridge = bridge
        self.subnet = subnet
        self.node_ip = subnet.split("/")[0].rsplit(".", 1)[0] + ".1"
        self.cgroup_root = CGROUP_ROOT
        self.cgroup_driver = CGROUP_DRIVER
        self.image = BUSYBOX_IMAGE
        self.pause_image = PAUSE_IMAGE
        self.kubelet_port = 0
        self.healthz_port = 0
        self.ready_seconds = 0.0
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._snap: HostSnapshot | None = None
        self._lock_fd: int | None = None
        self.last_run: HostSnapshot | None = None  # the host snapshot of the latest stopped run

    # --- helpers for tests and tools ----------------------------------------------------------
    @property
    def kubelet_url(self) -> str:
        """The kubelet API (/pods, /stats/summary); a bearer token of the control plane works."""
        return f"https://{self.node_ip}:{self.kubelet_port}"

    @property
    def state_file(self) -> Path:
        return self.state_dir / STATE_FILE

    def log_path(self, name: str) -> Path:
        return self.paths.logs / f"{name}.log"

    def pod_manifest(self, name: str, **kwargs: Any) -> Pod:
        """busybox_pod() bound to this node unless a schedulerName is given (see podspec)."""
        if kwargs.get("scheduler_name") is None:
            kwargs.setdefault("node_name", self.node_name)
        kwargs.setdefault("image", self.image)
        return busybox_pod(name, **kwargs)

    def exited(self) -> dict[str, int]:
        """Components that have exited since start, with their exit codes."""
        return {n: rc for n, p in self._procs.items() if (rc := p.poll()) is not None}

    def leftovers(self) -> list[str]:
        """What the latest run left on the host (processes, mounts, cgroups, …); [] when clean."""
        snap = self._snap or self.last_run
        return leftovers(snap) if snap is not None else []

    # --- lifecycle ----------------------------------------------------------------------------
    def start(self, timeout: float = 120.0, lock_timeout: float = 240.0) -> LocalNode:
        """Starts the node and waits until it is Ready (and kube-controller-manager issues tokens).
        Waits up to lock_timeout for another LocalNode on this host to stop first."""
        if os.geteuid() != 0:
            raise NodeError("a LocalNode needs root (kubelet and containerd manage cgroups, mounts, netns)")
        if self.control_plane.pki is None:
            raise NodeError("start the ControlPlane before its LocalNode")
        binaries = self.binaries or find_node_binaries()
        self.binaries = binaries
        self._lock_host(lock_timeout)
        t0 = time.monotonic()
        deadline = t0 + timeout
        try:
            reap_stale(self.state_dir)
            if foreign := cgroup_tops():
                # Teardown kills every process under kubepods: never share a host with another kubelet.
                raise NodeError(
                    f"kubepods cgroups exist already ({', '.join(map(str, foreign[:3]))}): another kubelet "
                    "manages this host, or a crashed run left them; stop it or remove them (rmdir bottom-up)"
                )
            for d in (self.paths.logs, self.paths.config, self.paths.cni_conf_dir, self.paths.containerd):
                d.mkdir(parents=True, exist_ok=True)
            # Recorded before anything changes, and saved first: a crash from here on is reapable.
            self._snap = snapshot(self.state_dir, self.paths.containerd_socket, self.bridge)
            self._save_state()
            self._make_bridge(binaries)
            self._start_containerd(binaries, deadline)
            self._import_images(binaries)
            self._start_controller_manager(binaries)
            self._start_kubelet(binaries)
            api = self.control_plane.api_client()
            try:
                self._wait("kubelet", lambda: self._node_ready(api), deadline, "node Ready and untainted")
                self._wait("kube-controller-manager", lambda: self._kcm_ready(api), deadline,
                           "service-account token of default/default")  # fmt: skip
            finally:
                api.close()
        except BaseException:
            self.stop()
            raise
        self.ready_seconds = time.monotonic() - t0
        return self

    def _lock_host(self, timeout: float) -> None:
        fd = os.open(HOST_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 4096, 0).decode(errors="replace").strip()
                    os.close(fd)
                    raise NodeBusyError(
                        f"another LocalNode runs on this host (state {holder or 'unknown'}); it still held "
                        f"{HOST_LOCK} after {timeout:.0f}s"
                    ) from None
                time.sleep(0.5)
        previous = os.pread(fd, 4096, 0).decode(errors="replace").strip()
        if previous and Path(previous) != self.state_dir:
            reap_stale(Path(previous))  # that run died holding the lock
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(self.state_dir).encode(), 0)
        self._lock_fd = fd

    def _unlock_host(self) -> None:
        if self._lock_fd is not None:
            os.ftruncate(self._lock_fd, 0)
            os.close(self._lock_fd)  # closing the only descriptor releases the flock
            self._lock_fd = None

    def _spawn(self, name: str, argv: list[str]) -> None:
        self._procs[name] = spawn_logged(self.log_path(name), argv)
        self._save_state()

    def _wait(self, name: str, probe: Callable[[], bool], deadline: float, what: str) -> None:
        while True:
            for comp, rc in self.exited().items():
                raise NodeError(f"{comp} exited with code {rc} during start; log {self.log_path(comp)}:\n"
                                f"{_tail(self.log_path(comp))}")  # fmt: skip
            if probe():
                return
            if time.monotonic() > deadline:
                raise NodeError(
                    f"{name}: no {what} in time; log {self.log_path(name)}:\n{_tail(self.log_path(name))}"
                )
            time.sleep(0.2)

    def _run(self, argv: list[str], what: str) -> None:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            raise NodeError(f"{what} failed ({' '.join(argv)}): {proc.stderr.strip()}")

    def _make_bridge(self, b: NodeBinaries) -> None:
        # The node IP lives on the pods' bridge: kubelet refuses a loopback node IP, and this keeps the
        # kubelet (and the API server's calls to it) off the host's real interfaces.
        prefix = self.subnet.split("/")[1]
        self._run([str(b.ip), "link", "add", self.bridge, "type", "bridge"], "creating the bridge")
        self._run([str(b.ip), "addr", "add", f"{self.node_ip}/{prefix}", "dev", self.bridge], "node IP")
        self._run([str(b.ip), "link", "set", self.bridge, "up"], "bridge up")

    def _ctr(self, b: NodeBinaries, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [str(b.ctr), "-a", str(self.paths.containerd_socket), "-n", "k8s.io", *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)

    def _start_containerd(self, b: NodeBinaries, deadline: float) -> None:
        conf = self.paths.config / "containerd.toml"
        conf.write_text(containerd_toml(self.paths, self.pause_image, b.runc, b.cni_bin_dir))
        (self.paths.cni_conf_dir / "10-koord-bridge.conflist").write_text(
            cni_conflist(self.paths, self.bridge, self.subnet, self.node_ip)
        )
        self._spawn("containerd", [str(b.containerd), "--config", str(conf)])
        self._wait("containerd", lambda: self._ctr(b, "version").returncode == 0, deadline, "socket")

    def _import_images(self, b: NodeBinaries) -> None:
        from koord.localcluster.binaries import cache_dir

        for tar in ensure_images(b.busybox, cache_dir() / "images"):
            proc = self._ctr(b, "images", "import", str(tar))
            if proc.returncode != 0:
                raise NodeError(f"importing {tar} into containerd failed: {proc.stderr.strip()}")

    def _start_controller_manager(self, b: NodeBinaries) -> None:
        cp = self.control_plane
        pki = cp.pki
        assert pki is not None
        kubeconfig = cp.component_kubeconfig("kube-controller-manager", "system:kube-controller-manager")
        self._spawn("kube-controller-manager", [
            str(b.kube_controller_manager), f"--kubeconfig={kubeconfig}",
            # Each controller acts as its own service account, as in kubeadm clusters.
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki.sa_key}", f"--root-ca-file={pki.ca_cert}",
            f"--cluster-signing-cert-file={pki.ca_cert}", f"--cluster-signing-key-file={pki.ca_key}",
            "--service-cluster-ip-range=10.0.0.0/24",
            # Lifts the new node's not-ready taint within 2 s of Ready (default period 5 s).
            "--node-monitor-period=2s",
            # One instance and no serving ports: nothing to elect, nothing listening.
            "--leader-elect=false", "--port=0", "--secure-port=0", "--v=1",
        ])  # fmt: skip

    def _start_kubelet(self, b: NodeBinaries) -> None:
        cp = self.control_plane
        pki = cp.pki
        assert pki is not None
        self.kubelet_port, self.healthz_port = free_ports(2)
        sans = (f"IP:{self.node_ip}", "IP:127.0.0.1", f"DNS:{self.node_name}", "DNS:localhost")
        cert, key = issue_cert(pki, f"kubelet-serving-{self.node_name}", self.node_name, server_sans=sans,
                               client=False)  # fmt: skip
        kubeconfig = cp.component_kubeconfig(f"kubelet-{self.node_name}", f"system:node:{self.node_name}",
                                             ("system:nodes",))  # fmt: skip
        conf = self.paths.config / "kubelet-config.yaml"
        conf.write_text(kubelet_config(self.paths, address=self.node_ip, port=self.kubelet_port,
                                       healthz_port=self.healthz_port, ca_cert=pki.ca_cert,
                                       tls_cert=cert, tls_key=key))  # fmt: skip
        self.paths.kubelet.mkdir(parents=True, exist_ok=True)
        self._spawn("kubelet", [
            str(b.kubelet), f"--config={conf}", f"--kubeconfig={kubeconfig}",
            "--container-runtime=remote",
            f"--container-runtime-endpoint=unix://{self.paths.containerd_socket}",
            "--runtime-request-timeout=2m", f"--pod-infra-container-image={self.pause_image}",
            f"--root-dir={self.paths.kubelet}", f"--cert-dir={self.paths.kubelet / 'pki'}",
            f"--hostname-override={self.node_name}", f"--node-ip={self.node_ip}", "--v=2",
        ])  # fmt: skip
        self._save_state()

    def _node_ready(self, api: Any) -> bool:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            node: Any = client.CoreV1Api(api).read_node(self.node_name, _request_timeout=5)
        except (ApiException, OSError):
            return False
        conds = node.status.conditions or []
        ready = any(c.type == "Ready" and c.status == "True" for c in conds)
        # The node lifecycle controller lifts the not-ready taint a few seconds after Ready.
        tainted = any(t.key.startswith("node.kubernetes.io/") for t in node.spec.taints or [])
        return ready and not tainted

    @staticmethod
    def _kcm_ready(api: Any) -> bool:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            sa = client.CoreV1Api(api).read_namespaced_service_account(
                "default", "default", _request_timeout=5
            )
        except (ApiException, OSError):
            return False
        return bool(sa.secrets)

    def stop(self, drain_timeout: float = 20.0) -> None:
        """Deletes the node's pods through kubelet (bounded), stops kube-controller-manager, kubelet and
        containerd by PID, then removes every process, mount, cgroup, link, iptables chain and file
        the run left and restores the sysctls. Safe to call twice."""
        snap = self._snap
        if snap is None:
            self._unlock_host()
            return
        # kube-controller-manager first, so no controller recreates the pods being drained.
        if (proc := self._procs.pop("kube-controller-manager", None)) is not None:
            stop_process(proc)
        if "kubelet" in self._procs and self._procs["kubelet"].poll() is None:
            with contextlib.suppress(Exception):
                self._drain(drain_timeout)
        if (proc := self._procs.pop("kubelet", None)) is not None:
            stop_process(proc)
        if self.binaries is not None and (proc := self._procs.get("containerd")) and proc.poll() is None:
            for task in self._ctr(self.binaries, "tasks", "ls", "-q").stdout.split():
                self._ctr(self.binaries, "tasks", "kill", "-s", "SIGKILL", task)
        if (proc := self._procs.pop("containerd", None)) is not None:
            stop_process(proc)
        cleanup(snap)
        _remove_run_dirs(self.paths)
        self.state_file.unlink(missing_ok=True)
        if self._own_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        self.last_run, self._snap = snap, None
        self._unlock_host()

    def _drain(self, timeout: float) -> None:
        """Deletes this node's pods while kubelet runs, so kubelet stops them, tears their network
        down through CNI and removes their cgroups; then drops the API objects and the Node."""
        from kubernetes import client

        assert self.binaries is not None
        api = self.control_plane.api_client()
        try:
            core: Any = client.CoreV1Api(api)
            selector = f"spec.nodeName={self.node_name}"
            pods = core.list_pod_for_all_namespaces(field_selector=selector, _request_timeout=5).items
            for pod in pods:
                with contextlib.suppress(Exception):
                    core.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace,
                                               grace_period_seconds=1, _request_timeout=5)  # fmt: skip
            deadline = time.monotonic() + timeout
            while pods and time.monotonic() < deadline:
                if not self._ctr(self.binaries, "tasks", "ls", "-q").stdout.split():
                    break
                time.sleep(0.2)
            for pod in core.list_pod_for_all_namespaces(field_selector=selector, _request_timeout=5).items:
                with contextlib.suppress(Exception):
                    core.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace,
                                               grace_period_seconds=0, _request_timeout=5)  # fmt: skip
            with contextlib.suppress(Exception):
                core.delete_node(self.node_name, _request_timeout=5)
        finally:
            api.close()

    def __enter__(self) -> LocalNode:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _save_state(self) -> None:
        if self._snap is None:
            return
        self._snap.pids = {n: p.pid for n, p in self._procs.items()}
        self._snap.cmds = {n: str(p.args[0]) for n, p in self._procs.items()}  # type: ignore[index]
        self.state_file.write_text(json.dumps(self._snap.to_json()))


def _remove_run_dirs(paths: NodePaths) -> None:
    from koord.localcluster.hoststate import mounts_under

    for d in paths.run_dirs():
        # rmtree across a mount point would delete the mounted data: only when nothing is mounted.
        if d.exists() and not mounts_under(str(d)):
            shutil.rmtree(d, ignore_errors=True)


def reap_stale(state_dir: Path) -> bool:
    """Cleans up after a crashed earlier node run recorded in state_dir; True if there was one."""
    state_file = state_dir / STATE_FILE
    try:
        snap = HostSnapshot.from_json(json.loads(state_file.read_text()))
    except (OSError, ValueError, TypeError):
        return False
    cleanup(snap)
    _remove_run_dirs(NodePaths(state_dir))
    state_file.unlink(missing_ok=True)
    return True
