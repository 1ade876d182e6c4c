"""Helpers of the fault tests: freezing a control plane's API server, or killing it and starting it again
on its port over the same etcd data; polling; the daemons' probes and Prometheus samples."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import time
import urllib.request
from collections.abc import Iterator

from koord.localcluster.controlplane import ControlPlane
from tests.helpers.polling import wait_for as wait_for  # the fault tests import it from here


class FreezableControlPlane:
    """A ControlPlane whose kube-apiserver can be frozen: it keeps its connections and the kernel keeps
    accepting new ones, but nothing is answered — a hung API server, the worst case for a client."""

    def __init__(self, cp: ControlPlane) -> None:
        self.cp = cp
        pids = json.loads(cp.state_file.read_text())["pids"]
        self.apiserver_pid = int(pids["kube-apiserver"])
        self.frozen_at: float | None = None

    def freeze(self) -> float:
        os.kill(self.apiserver_pid, signal.SIGSTOP)
        self.frozen_at = time.monotonic()
        return self.frozen_at

    def resume(self) -> float:
        os.kill(self.apiserver_pid, signal.SIGCONT)
        self.frozen_at = None
        return time.monotonic()

    @contextlib.contextmanager
    def frozen(self) -> Iterator[float]:
        try:
            yield self.freeze()
        finally:
            self.resume()


def http_get(port: int, path: str, timeout: float = 3.0) -> tuple[int, str]:
    """Status and body of ``http://127.0.0.1:port/path``; (0, error) when it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return int(r.status), r.read().decode()
    except OSError as e:
        return 0, str(e)


def accepts(port: int) -> bool:
    """A TCP connection to 127.0.0.1:port succeeds."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3):
            return True
    except OSError:
        return False


# --- a crashed kube-apiserver, restarted on the same port over the same etcd data -----------------------


def kill_apiserver(plane: FreezableControlPlane) -> float:
    """SIGKILL the plane's kube-apiserver (a crash: its connections reset, its port refuses); etcd and
    its data stay. Returns when it was reaped."""
    proc = plane.cp._procs["kube-apiserver"]
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    plane.frozen_at = None
    return time.monotonic()


def start_apiserver(plane: FreezableControlPlane, timeout: float = 90.0) -> float:
    """A new kube-apiserver with the same flags, certificates and port over the same etcd; returns once
    it is ready. The plane follows the new process (freeze/resume)."""
    binaries = plane.cp.binaries
    assert binaries is not None, "control plane not started"
    plane.cp._start_apiserver(binaries, timeout)
    plane.apiserver_pid = plane.cp._procs["kube-apiserver"].pid
    return time.monotonic()


@contextlib.contextmanager
def apiserver_down(plane: FreezableControlPlane) -> Iterator[float]:
    """The API server killed for the ``with`` block and started again after it (even when the block
    fails, so the plane's later tests find it up)."""
    killed = kill_apiserver(plane)
    try:
        yield killed
    finally:
        start_apiserver(plane)


def scrape(port: int, path: str = "/metrics") -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The samples a Prometheus endpoint on 127.0.0.1 serves, by (name, labels); empty when it does not
    answer."""
    from prometheus_client.parser import text_string_to_metric_families

    status, text = http_get(port, path)
    if status != 200:
        return {}
    return {
        (s.name, frozenset(s.labels.items())): float(s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def sample(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels`` (0 when there is none)."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)
