"""The `koord` command: `koord version`, `koord up` (a local control plane with koord's CRDs and
defaults, until interrupted), `koord simulate FILE...` (scenario evaluation).

Imports: koord.localcluster; argparse and the standard library.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from koord import __version__
from koord.localcluster.binaries import MissingBinaryError, cache_dir, ensure_binaries
from koord.localcluster.bootstrap import bootstrap
from koord.localcluster.controlplane import ControlPlane, ControlPlaneError


def _cmd_version(_: argparse.Namespace) -> int:
    print(f"koord {__version__}")
    return 0


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
    cp = ControlPlane(state_dir=state_dir, binaries=binaries)
    try:
        cp.start()
        api = cp.api_client()
        bootstrap(api)
        api.close()
    except (ControlPlaneError, OSError, ValueError, TimeoutError) as e:
        cp.stop()
        print(f"koord up: {e}", file=sys.stderr)
        return 1
    print(f"koord is up: API server {cp.server} (etcd 127.0.0.1:{cp.etcd_port})")
    print(f"  export KUBECONFIG={cp.kubeconfig_path}")
    print("  CRDs nodemetrics/nodeslos.slo.koordinator.sh, namespace koordinator-system, PriorityClasses")
    print("  koord-{prod,mid,batch,free} and the slo-controller-config ConfigMap are installed.")
    print("Press Ctrl-C to stop.", flush=True)
    try:
        while not stop.wait(0.5):
            for name, rc in cp.exited().items():
                print(f"koord up: {name} exited with {rc}; see {cp.log_path(name)}", file=sys.stderr)
                return 1
    finally:
        cp.stop()
        print("koord stopped", flush=True)
    return 0


def _cmd_simulate(args: argparse.Namespace) -> int:
    from koord.simulate import main as simulate_main

    return simulate_main(args.files)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="koord", description="koord: colocation for Kubernetes")
    sub = p.add_subparsers(dest="command", required=True)
    v = sub.add_parser("version", help="print the version")
    v.set_defaults(func=_cmd_version)
    up = sub.add_parser("up", help="run koord locally on its embedded default until interrupted")
    up.add_argument("--state-dir", help="folder for PKI, kubeconfig and logs (default ~/.cache/koord/up)")
    up.add_argument("--no-build", dest="build", action="store_false",
                    help="fail instead of building kube-apiserver when it is missing")  # fmt: skip
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
