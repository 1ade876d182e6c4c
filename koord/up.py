"""`koord up`: the whole system on one machine, until Ctrl-C (or ``--duration``).

In order: the control plane (etcd + kube-apiserver) with koord's CRDs, namespace, PriorityClasses and
default ``slo-controller-config``; the real node (containerd, kubelet, kube-controller-manager) when
root; ``--nodes N`` simulated nodes (`EmulatedNode`, each on a generated host tree); koord-manager with
the embedded koord-scheduler, the MetricHub and the admission webhooks (their configurations call it by
URL); one koordlet per node; a Prometheus scraping every component when installed; the demo workload,
whose batch Deployment the demo's ClusterColocationProfile rewrites. Then a status view every
``--status-interval`` seconds.
Stopping reverses the order; every process is stopped by PID and the real node removes every cgroup,
mount, bridge and sysctl change it made.

Imports: standard library, koord.{status, localcluster.*}.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from koord.localcluster.bootstrap import bootstrap, install_webhooks
from koord.localcluster.components import ComponentError, KoordComponents, NodeHost, reap_stale
from koord.localcluster.controlplane import ControlPlane, ControlPlaneError
from koord.localcluster.demo import NAMESPACE, apply_demo, demo_pods, prepare_demo, webhook_serves
from koord.localcluster.emulated import EmulatedHost
from koord.localcluster.emunode import EmulatedNode
from koord.localcluster.node import LocalNode, NodeBusyError, NodeError
from koord.localcluster.nodebinaries import NodeBinaries
from koord.localcluster.prometheus import Prometheus
from koord.status import gather, render

# Background load of the simulated nodes, in turn: one above the load-aware filter's 65 % CPU threshold
# (no pod may land there), one middling, one idle, then round again.
SIM_LOADS = (0.85, 0.45, 0.15, 0.6, 0.3)
WEBHOOK_WAIT_S = 60.0  # koord-manager's first certificate and caBundle patch; generous on a busy machine


def sim_node_name(i: int) -> str:
    return f"sim-node-{i + 1}"


def writable_cgroups(root: Path) -> bool:
    """Whether the koordlet may write cgroups here (root, and a writable cgroup tree)."""
    probe = root / "cpu" if (root / "cpu").is_dir() else root
    return os.geteuid() == 0 and os.access(probe, os.W_OK)


class Up:
    """One `koord up` run; ``start()`` then ``loop(stop)``; ``stop()`` always (idempotent)."""

    def __init__(
        self,
        args: argparse.Namespace,
        state_dir: Path,
        binaries: Any,
        node_binaries: NodeBinaries | None,
        out: Callable[[str], None] = print,
    ) -> None:
        self.args = args
        self.state_dir = state_dir
        self.out = out
        self.cp = ControlPlane(state_dir=state_dir, binaries=binaries)
        self.node_binaries = node_binaries
        self.node: LocalNode | None = None
        self.sims: list[EmulatedNode] = []
        self.components = KoordComponents(self.cp, state_dir)
        self.prometheus: Prometheus | None = None
        self.api: Any = None
        self.qos_mode = "off"

    def start(self, stop: threading.Event) -> None:
        reap_stale(self.state_dir)
        shutil.rmtree(self.state_dir / "sim", ignore_errors=True)
        self.cp.start()
        self.api = self.cp.api_client()
        bootstrap(self.api)
        if self.node_binaries is not None and not stop.is_set():
            node = LocalNode(
                self.cp,
                state_dir=self.state_dir / "node",
                node_name=self.args.node_name,
                binaries=self.node_binaries,
            )
            try:
                self.node = node.start(lock_timeout=0)
            except NodeBusyError as e:
                # Another LocalNode (a test session, another `koord up`) holds the host: go on without one.
                self.out(f"koord up: no real node: {e}")
        for i in range(self.args.nodes):
            if stop.is_set():
                return
            host = EmulatedHost(
                self.state_dir / "sim" / sim_node_name(i),
                cpus=self.args.sim_cpus,
                memory_bytes=self.args.sim_memory_gib << 30,
                base_load=SIM_LOADS[i % len(SIM_LOADS)],
            )
            self.sims.append(EmulatedNode(self.api, sim_node_name(i), host).start())
        names = ([self.node.node_name] if self.node else []) + [s.name for s in self.sims]
        # The webhook configurations name the manager's port, so they exist before it starts and its
        # first certificate round fills their caBundle.
        self.components.reserve_webhook_port()
        install_webhooks(self.api, self.components.webhook_url)
        self.components.start_manager(names, webhooks=True)
        if self.node is not None:
            root = self.node.cgroup_root
            self.qos_mode = "dry-run" if self.args.qos_dry_run or not writable_cgroups(root) else "on"
            paths = self.node.paths
            real = NodeHost(
                Path("/proc"),
                Path("/sys"),
                root,
                simulated=False,
                qos=self.qos_mode,
                kubelet_config=paths.config / "kubelet-config.yaml",
                kubelet_dir=paths.kubelet,
            )
            self.components.start_koordlet(self.node.node_name, real)
        for sim in self.sims:
            p = sim.host.paths
            self.components.start_koordlet(sim.name, NodeHost(p.proc, p.sys, p.cgroup_root, True, qos="off"))
        if self.args.prometheus != "off":
            self._start_prometheus()
        if self.args.demo:
            self._start_demo(stop)

    def _start_demo(self, stop: threading.Event) -> None:
        """The demo namespace and profile first; its workload once the mutating webhook serves (a pod
        admitted before would keep its plain cpu/memory requests: failurePolicy Ignore)."""
        prepare_demo(self.api)
        deadline = time.monotonic() + WEBHOOK_WAIT_S
        while not webhook_serves(self.api):
            if stop.wait(0.5):
                return
            if time.monotonic() > deadline:
                log = self.components.daemons["koord-manager"].log
                raise ComponentError(
                    f"the mutating webhook did not serve within {WEBHOOK_WAIT_S:.0f}s; see {log}"
                )
        pods = demo_pods(self.node.node_name if self.node else None)
        apply_demo(self.api, pods, batch=self.args.demo_batch_pods, deployments=self.node is not None)

    def _start_prometheus(self) -> None:
        if shutil.which("prometheus") is None:
            if self.args.prometheus == "on":
                raise ComponentError(
                    "--prometheus=on but no `prometheus` binary (Debian: apt-get install prometheus)"
                )
            return
        targets = [
            (name, d.metrics_url.split("//", 1)[1].split("/", 1)[0])
            for name, d in self.components.daemons.items()
        ]
        self.prometheus = Prometheus(self.state_dir / "prometheus", targets)
        self.prometheus.start(timeout=30.0)

    def banner(self) -> None:
        cp = self.cp
        self.out(f"koord is up: API server {cp.server}")
        self.out(f"  export KUBECONFIG={cp.kubeconfig_path}")
        if self.node is not None:
            mode = {"on": "enforcing", "dry-run": "DRY-RUN: decisions audited, no cgroup written"}[
                self.qos_mode
            ]
            self.out(
                f"  real node {self.node.node_name}: containerd, kubelet, kube-controller-manager "
                f"(Ready in {self.node.ready_seconds:.1f}s); koordlet QoS {mode}"
            )
        else:
            why = "--no-node" if self.args.no_node else "needs root, kubelet and a free host"
            self.out(f"  no real node ({why}); pods run only on simulated nodes")
        for sim in self.sims:
            self.out(
                f"  simulated node {sim.name}: {sim.host.cpus} CPUs, background load "
                f"{sim.host.base_load:.0%} (host tree {sim.host.base}; no QoS, containers not run)"
            )
        for name, d in self.components.daemons.items():
            self.out(f"  {name}: metrics {d.metrics_url}, log {d.log}")
        self.out(f"  MetricHub gRPC {self.components.hub_addr}")
        if self.prometheus is not None:
            self.out(f"  Prometheus {self.prometheus.url}")
        if self.args.demo:
            self.out(
                f"  demo workload in namespace {NAMESPACE}, scheduled by koord-scheduler; its batch "
                "Deployment is plain, rewritten to BE by the ClusterColocationProfile koord-demo-batch"
            )
        self.out("Press Ctrl-C to stop.")

    def failed(self) -> str | None:
        """The first component that has exited, with where to look; None while all run."""
        sources: list[tuple[dict[str, int], Callable[[str], Path]]] = [
            (self.cp.exited(), self.cp.log_path),
            (self.components.exited(), lambda n: self.components.daemons[n].log),
        ]
        if self.node is not None:
            sources.append((self.node.exited(), self.node.log_path))
        for exited, log in sources:
            for name, rc in exited.items():
                return f"{name} exited with {rc}; see {log(name)}"
        return None

    def loop(self, stop: threading.Event) -> int:
        deadline = time.monotonic() + self.args.duration if self.args.duration else None
        next_status = time.monotonic()
        metrics = {
            n.removeprefix("koordlet-"): d.metrics_url
            for n, d in self.components.daemons.items()
            if n.startswith("koordlet-")
        }
        while not stop.wait(0.5):
            if (why := self.failed()) is not None:
                self.out(f"koord up: {why}")
                return 1
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return 0
            if self.args.status_interval > 0 and now >= next_status:
                next_status = now + self.args.status_interval
                try:
                    snap = gather(self.api, metrics, (NAMESPACE, "default") if self.args.demo else ())
                except Exception as e:  # the view must not end the run; said on screen
                    self.out(f"(status unavailable: {e})")
                    continue
                self.out(render(snap))
        return 0

    def stop(self) -> None:
        if self.prometheus is not None:
            with contextlib.suppress(Exception):
                self.prometheus.stop()
            self.prometheus = None
        self.components.stop()
        for sim in self.sims:
            with contextlib.suppress(Exception):
                sim.stop()
        self.sims = []
        if self.node is not None:
            self.node.stop()
        if self.api is not None:
            with contextlib.suppress(Exception):
                self.api.close()
            self.api = None
        self.cp.stop()
        shutil.rmtree(self.state_dir / "sim", ignore_errors=True)


ERRORS = (ControlPlaneError, NodeError, ComponentError, OSError, ValueError, TimeoutError)


def run(
    args: argparse.Namespace,
    state_dir: Path,
    binaries: Any,
    node_binaries: NodeBinaries | None,
    stop: threading.Event,
) -> int:
    def out(line: str) -> None:
        print(line, flush=True)

    up = Up(args, state_dir, binaries, node_binaries, out)
    try:
        try:
            up.start(stop)
        except ERRORS as e:
            print(f"koord up: {e}", file=sys.stderr, flush=True)
            return 1
        if stop.is_set():
            return 0
        up.banner()
        return up.loop(stop)
    finally:
        real = up.node is not None
        up.stop()
        out("koord stopped" + (" (node removed: processes, mounts, cgroups, bridge)" if real else ""))
