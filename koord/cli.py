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
from koord.localcluster.node import DEFAULT_NODE_NAME
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
    from koord.up import run

    bad = [
        f"--{name.replace('_', '-')}={value}"
        for name, value, ok in (
            ("nodes", args.nodes, args.nodes >= 0),
            ("sim_cpus", args.sim_cpus, args.sim_cpus >= 1),
            ("sim_memory_gib", args.sim_memory_gib, args.sim_memory_gib >= 1),
            ("demo_batch_pods", args.demo_batch_pods, args.demo_batch_pods >= 0),
            ("status_interval", args.status_interval, args.status_interval >= 0),
            ("duration", args.duration, args.duration is None or args.duration > 0),
        )
        if not ok
    ]
    if bad:
        print(
            f"koord up: bad option {', '.join(bad)}: counts must not be negative, a simulated node needs at "
            "least 1 CPU and 1 GiB, and --duration must be positive",
            file=sys.stderr,
        )
        return 2
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
    return run(args, state_dir, binaries, node_binaries, stop)


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
        description="Starts etcd + kube-apiserver on 127.0.0.1, installs koord's CRDs and defaults, and, "
        "as root with the binaries present, a real node (containerd, kubelet, kube-controller-manager) "
        "that runs pods from a local busybox image; then koord-manager (with the embedded koord-scheduler "
        "and the MetricHub), one koordlet per node, Prometheus when installed, and a demo workload, and "
        "prints a status view (node usage and thresholds, batch allocatable, each pod's node and QoS, "
        "the BE CPU suppress value, evictions). Ctrl-C stops every process by PID and removes what "
        "the run made (mounts, cgroups, the bridge, iptables chains, simulated host trees; kubelet's "
        "sysctls are restored).",
    )
    up.add_argument("--state-dir", help="folder for PKI, kubeconfig and logs (default ~/.cache/koord/up)")
    up.add_argument(
        "--no-build",
        dest="build",
        action="store_false",
        help="fail instead of building kube-apiserver (and skip the node instead of building "
        "kubelet and kube-controller-manager) when they are missing",
    )
    up.add_argument(
        "--no-node",
        action="store_true",
        help="no real node (the control plane, koord's daemons and any simulated nodes still run); by "
        "default, as root and with the binaries present, a real node (containerd, kubelet, "
        "kube-controller-manager) joins",
    )
    up.add_argument(
        "--node-name", default=DEFAULT_NODE_NAME, help=f"name of the real node (default {DEFAULT_NODE_NAME})"
    )
    up.add_argument(
        "--nodes",
        type=int,
        default=0,
        metavar="N",
        help="add N simulated nodes: Node objects labelled koord.sh/simulated=true, kept Ready by "
        "koord, each with a koordlet reading a generated host tree whose background load "
        "differs (85%%, 45%%, 15%%, ... of its CPUs), so load-aware placement is visible",
    )
    up.add_argument("--sim-cpus", type=int, default=4, help="CPUs of each simulated node (default 4)")
    up.add_argument("--sim-memory-gib", type=int, default=8, help="memory of each simulated node (default 8)")
    up.add_argument(
        "--no-demo",
        dest="demo",
        action="store_false",
        help="do not create the demo workload (namespace koord-demo: an LS service and BE batch "
        "pods, all scheduled by koord-scheduler)",
    )
    up.add_argument(
        "--demo-batch-pods",
        type=int,
        default=6,
        help="number of unpinned BE batch pods in the demo (default 6)",
    )
    up.add_argument(
        "--status-interval",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="print the status view every SECONDS (default 5; 0 turns it off)",
    )
    up.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop by itself after SECONDS (default: run until Ctrl-C)",
    )
    up.add_argument(
        "--qos-dry-run",
        action="store_true",
        help="the real node's koordlet decides and audits every cgroup write but writes nothing "
        "(chosen by itself when the cgroup tree is not writable)",
    )
    up.add_argument(
        "--prometheus",
        choices=("auto", "on", "off"),
        default="auto",
        help="run a Prometheus scraping every component: auto (when the `prometheus` binary is "
        "installed; default), on (fail without it), off",
    )
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
