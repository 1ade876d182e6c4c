"""The `koord` command: `koord version`, `koord up` (a local control plane with koord's CRDs and
defaults plus, as root, a real local node, until interrupted), `koord simulate FILE...` (scenario
evaluation).

Imports: koord.localcluster; argparse and the standard library.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from koord import __version__
from koord.localcluster.binaries import MissingBinaryError, build_components, cache_dir, ensure_binaries
from koord.localcluster.bootstrap import bootstrap
from koord.localcluster.controlplane import ControlPlane, ControlPlaneError
from koord.localcluster.node import DEFAULT_NODE_NAME, LocalNode, NodeBusyError, NodeError
from koord.localcluster.nodebinaries import NodeBinaries, find_node_binaries


def _cmd_version(_: argparse.Namespace) -> int:
    print(f"koord {__version__}")
    return 0


def _node_binaries(build: bool) -> NodeBinaries | None:
    """The real node's binaries, building kubelet and kube-controller-manager when allowed; None (with
    the reason printed) when the node cannot run here."""
    if os.geteuid() != 0:
        print("koord up: not root, so no real node (kubelet needs root); control plane only", file=sys.stderr)
        return None
    try:
        return find_node_binaries()
    except MissingBinaryError as e:
        if not build or ("kubelet" not in str(e) and "kube-controller-manager" not in str(e)):
            print(f"koord up: no real node: {e}", file=sys.stderr)
            return None
    try:
        build_components("kubelet", "kube-controller-manager")
        return find_node_binaries()
    except (MissingBinaryError, OSError, RuntimeError) as e:
        print(f"koord up: no real node: {e}", file=sys.stderr)
        return None


def _cmd_up(args: argparse.Namespace) -> int:
    try:
        binaries = ensure_binaries(build=args.build)
    except MissingBinaryError as e:
        print(f"koord up: {e}", file=sys.stderr)
        return 1
    state_dir = Path(args.state_dir) if args.state_dir else cache_dir() / "up"
    state_dir.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    node_binaries = None if args.no_node else _node_binaries(args.build)
    cp = ControlPlane(state_dir=state_dir, binaries=binaries)
    node: LocalNode | None = None
    try:
        cp.start()
        api = cp.api_client()
        bootstrap(api)
        api.close()
        if node_binaries is not None and not stop.is_set():
            node = LocalNode(
                cp, state_dir=state_dir / "node", node_name=args.node_name, binaries=node_binaries
            )
            try:
                node.start(lock_timeout=0)
            except NodeBusyError as e:
                # Someone else's node (a test session, another `koord up`) keeps the host: serve the
                # control plane alone rather than wait.
                print(f"koord up: no real node: {e}", file=sys.stderr)
                node = None
    except (ControlPlaneError, NodeError, MissingBinaryError, OSError, ValueError, TimeoutError) as e:
        if node is not None:
            node.stop()
        cp.stop()
        print(f"koord up: {e}", file=sys.stderr)
        return 1
    print(f"koord is up: API server {cp.server} (etcd 127.0.0.1:{cp.etcd_port})")
    print(f"  export KUBECONFIG={cp.kubeconfig_path}")
    print("  CRDs nodemetrics/nodeslos.slo.koordinator.sh, namespace koordinator-system, PriorityClasses")
    print("  koord-{prod,mid,batch,free} and the slo-controller-config ConfigMap are installed.")
    if node is not None:
        print(
            f"  node {node.node_name} is Ready ({node.ready_seconds:.1f}s): containerd, kubelet "
            f"({node.kubelet_url}, cgroupfs) and kube-controller-manager; logs in {node.paths.logs}"
        )
        print(
            f"  pods run image {node.image} (imagePullPolicy: Never) on bridge {node.bridge} ({node.subnet})"
        )
    print("Press Ctrl-C to stop.", flush=True)
    try:
        while not stop.wait(0.5):
            exited = {**cp.exited(), **(node.exited() if node is not None else {})}
            for name, rc in exited.items():
                log = node.log_path(name) if node is not None and name in node.exited() else cp.log_path(name)
                print(f"koord up: {name} exited with {rc}; see {log}", file=sys.stderr)
                return 1
    finally:
        if node is not None:
            node.stop()
        cp.stop()
        print(
            "koord stopped" + (" (node removed: processes, mounts, cgroups, bridge)" if node else ""),
            flush=True,
        )
    return 0


def _cmd_simulate(args: argparse.Namespace) -> int:
    from koord.simulate import main as simulate_main

    return simulate_main(args.files)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="koord", description="koord: colocation for Kubernetes")
    sub = p.add_subparsers(dest="command", required=True)
    v = sub.add_parser("version", help="print the version")
    v.set_defaults(func=_cmd_version)
    up = sub.add_parser(
        "up",
        help="run koord locally on its embedded default until interrupted",
        description="Starts etcd + kube-apiserver on 127.0.0.1, installs koord's CRDs and defaults and, "
        "as root with the binaries present, a real node (containerd, kubelet, kube-controller-manager) "
        "that runs pods from a local busybox image. Ctrl-C stops every process by PID and removes what "
        "the run made (mounts, cgroups, the bridge, iptables chains; kubelet's sysctls are restored).",
    )
    up.add_argument("--state-dir", help="folder for PKI, kubeconfig and logs (default ~/.cache/koord/up)")
    up.add_argument("--no-build", dest="build", action="store_false",
                    help="fail instead of building kube-apiserver (and skip the node instead of building "
                         "kubelet and kube-controller-manager) when they are missing")  # fmt: skip
    up.add_argument("--no-node", action="store_true",
                    help="run the control plane only; by default, as root and with the binaries present, a "
                         "real node (containerd, kubelet, kube-controller-manager) joins it")  # fmt: skip
    up.add_argument("--node-name", default=DEFAULT_NODE_NAME,
                    help=f"name of the real node (default {DEFAULT_NODE_NAME})")  # fmt: skip
    up.set_defaults(func=_cmd_up)
    sim = sub.add_parser("simulate", help="evaluate scenario files with the daemons' own decision code")
    sim.add_argument("files", nargs="+", metavar="FILE")
    sim.set_defaults(func=_cmd_simulate)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    rc: int = args.func(args)
    return rc


if __name__ == "__main__":
    sys.exit(main())
