"""koord-manager entry point (composition root): the MetricHub gRPC service, leader election on the
Lease `koordinator-manager`, and — unless `--no-enable-scheduler` — the embedded koord-scheduler,
which reads node metrics from this manager's hub over loopback and schedules only while this
replica leads. The SLO controllers join in a later increment.

The one place that may import the scheduler (its public entry point, scheduler.main).
Imports: argparse, signal, apis, kube, manager.metrichub, scheduler.main.
"""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import sys
import threading
import uuid
from types import FrameType
from typing import Any

from apis.constants import DEFAULT_CONFIG_NAMESPACE
from apis.version import koord_version
from manager.metrichub.server import serve
from manager.metrichub.store import HubStore

DEFAULT_HUB_ADDR = "0.0.0.0:9317"
LEASE_NAME = "koordinator-manager"
log = logging.getLogger("koord-manager")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="koord-manager", description="koord-manager: SLO controllers and the MetricHub"
    )
    p.add_argument("--version", action="version", version=f"koord-manager {koord_version()}")
    p.add_argument(
        "--hub-addr", default=DEFAULT_HUB_ADDR, help=f"MetricHub gRPC listen address ({DEFAULT_HUB_ADDR})"
    )
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else in-cluster)")
    p.add_argument("--enable-scheduler", action=argparse.BooleanOptionalAction, default=True,
                   help="run the load-aware scheduler embedded (default on)")  # fmt: skip
    p.add_argument("--scheduler-config", help="KubeSchedulerConfiguration file for the embedded scheduler")
    p.add_argument("--enable-leader-election", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--leader-election-namespace", default=DEFAULT_CONFIG_NAMESPACE)
    return p


def _start_scheduler(
    args: argparse.Namespace, hub_port: int, stop: threading.Event, leading: threading.Event
) -> Any:
    from kube.client import api_client
    from scheduler.config import load_profile
    from scheduler.main import SchedulerService
    from scheduler.registry import KNOWN

    profile = load_profile(args.scheduler_config, KNOWN)
    api = api_client(args.kubeconfig, qps=500, burst=1000, connections=48)
    service = SchedulerService(api, profile, hub_addr=f"127.0.0.1:{hub_port}")
    service.start(stop)
    threading.Thread(target=service.run, args=(stop, leading.is_set), name="scheduler", daemon=True).start()
    return service


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    try:
        server, port = serve(HubStore(), args.hub_addr)
    except (OSError, RuntimeError) as e:
        print(f"koord-manager: --hub-addr={args.hub_addr}: {e}", file=sys.stderr)
        return 1
    print(f"koord-manager {koord_version()}: MetricHub listening on port {port}", flush=True)

    leading = threading.Event()
    service = None
    elector_thread = None
    if args.enable_scheduler or args.enable_leader_election:
        from kube.client import KubeConfigError, api_client
        from kube.leaderelection import LeaderElector
        from scheduler.config import ConfigError

        try:
            if args.enable_leader_election:
                elector = LeaderElector(
                    api_client(args.kubeconfig), namespace=args.leader_election_namespace, name=LEASE_NAME,
                    identity=f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}",
                    on_started_leading=leading.set, on_stopped_leading=stop.set,
                )  # fmt: skip
                elector_thread = threading.Thread(target=elector.run, args=(stop,), name="leader-election")
                elector_thread.start()
            else:
                leading.set()
            if args.enable_scheduler:
                service = _start_scheduler(args, port, stop, leading)
                print("koord-manager: embedded koord-scheduler started", flush=True)
        except (KubeConfigError, ConfigError, TimeoutError) as e:
            print(f"koord-manager: {e}", file=sys.stderr)
            stop.set()
            server.stop(grace=None)
            return 1
    stop.wait()
    if service is not None:
        service.close()
    if elector_thread is not None:
        elector_thread.join(timeout=15)
    server.stop(grace=5).wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
