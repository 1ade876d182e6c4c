"""koord-scheduler's entry point: flags, configuration, leader election, probes and metrics around the
SchedulerService (scheduler.service, which koord-manager embeds; re-exported here). Standalone, it takes
its own Lease `koord-scheduler` and, after losing it, stands by and campaigns again
(docs/architecture.md#leader-election); embedded, the manager passes its own leadership. With sharding
on (docs/shards.md#wiring) every replica schedules its own share of the pending pods, leader or not,
binds through the group's arbiter, and the leader hosts that arbiter.

Upstream koord-scheduler's argument lists are accepted (kube.goflags; docs/flags.md).
Imports: argparse, prometheus_client, apis, kube, scheduler.
"""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import sys
import threading
import uuid
from pathlib import Path
from types import FrameType
from typing import Any

from prometheus_client import CollectorRegistry

from apis.constants import DEFAULT_CONFIG_NAMESPACE
from apis.version import koord_version
from kube import upstreamflags
from kube.client import KubeConfigError, api_client, guard_writes
from kube.goflags import add_klog_and_gate_flags, parse_go_args
from kube.httpserver import ProbeServer
from kube.leaderelection import LeaderElector
from scheduler.config import ConfigError, SchedulerConfig, load_config
from scheduler.registry import KNOWN
from scheduler.service import LeaderGatedBinder, SchedulerService
from scheduler.shards.wiring import Sharding, ShardOptions, add_shard_flags, shard_options

__all__ = [
    "LeaderGatedBinder", "SchedulerService", "ShardOptions", "Sharding", "add_shard_flags", "main",
    "shard_options",
]  # fmt: skip

SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
log = logging.getLogger("koord-scheduler")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="koord-scheduler", description="koord-scheduler: the load-aware scheduler"
    )
    p.add_argument("--version", action="version", version=f"koord-scheduler {koord_version()}")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else in-cluster)")
    p.add_argument("--config", help="KubeSchedulerConfiguration file (YAML or JSON)")
    p.add_argument(
        "--ignore-unknown-plugins",
        action="store_true",
        help="skip (with a warning) the plugins the configuration names that koord-scheduler does not have",
    )
    p.add_argument(
        "--hub-addr", help="MetricHub gRPC address (host:port); NodeMetric CRs are always watched too"
    )
    p.add_argument(
        "--hub-token-file",
        default=None,
        help="bearer token for the MetricHub (default: the pod's ServiceAccount token when mounted)",
    )
    p.add_argument(
        "--hub-ca",
        default=None,
        help="CA bundle (PEM) the hub's certificate must chain to: connect with TLS (default: plaintext)",
    )
    # Unset leader-election flags take the --config file's leaderElection, else these defaults.
    p.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=None, help="(on)")
    p.add_argument("--leader-elect-resource-namespace", default=None, help=f"({DEFAULT_CONFIG_NAMESPACE})")
    p.add_argument("--leader-elect-resource-name", default=None, help="(koord-scheduler)")
    p.add_argument("--leader-elect-identity", help="this replica's name in the Lease (default: host_random)")
    p.add_argument(
        "--metrics-port", type=int, default=10251, help="/metrics, /healthz and /readyz port (0: off)"
    )
    p.add_argument("--bind-workers", type=int, default=16)
    # Every bind is one request: the client limit must exceed the target binding rate.
    p.add_argument("--kube-api-qps", type=float, default=500)
    p.add_argument("--kube-api-burst", type=int, default=1000)
    add_shard_flags(p)
    add_klog_and_gate_flags(p, "koord-scheduler")
    return p


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """The flags (upstream's Go-style argument lists too, kube.goflags; ``--port`` is --metrics-port) and
    the warning lines for accepted arguments without effect. A bad or unknown flag exits naming it."""
    return parse_go_args(
        build_parser(),
        argv,
        "koord-scheduler",
        upstreamflags.SCHEDULER,
        upstreamflags.SCHEDULER_GATES,
        {},
        upstreamflags.SCHEDULER_ALIASES,
    )


def leader_election(args: argparse.Namespace, config: SchedulerConfig) -> tuple[bool, str, str]:
    """(elect, namespace, name): each flag given wins, then the configuration's leaderElection, then
    the defaults (on, koordinator-system, koord-scheduler)."""
    cfg = config.leader_election

    def pick(flag: Any, configured: Any, default: Any) -> Any:
        return flag if flag is not None else configured if configured is not None else default

    return (
        bool(pick(args.leader_elect, cfg.leader_elect, True)),
        str(pick(args.leader_elect_resource_namespace, cfg.resource_namespace, DEFAULT_CONFIG_NAMESPACE)),
        str(pick(args.leader_elect_resource_name, cfg.resource_name, "koord-scheduler")),
    )


def main(argv: list[str] | None = None) -> int:
    args, warnings = parse_args(argv)
    level = logging.DEBUG if args.v >= 4 else logging.INFO
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for warning in warnings:
        log.warning("%s", warning)
    try:
        config = load_config(args.config, KNOWN, args.ignore_unknown_plugins)
        # One pooled connection per bind worker, plus informers, reporters and events.
        api = api_client(
            args.kubeconfig,
            qps=args.kube_api_qps,
            burst=args.kube_api_burst,
            connections=args.bind_workers + 16,
        )
        elect, lease_namespace, lease_name = leader_election(args, config)
        identity = args.leader_elect_identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        opts = shard_options(
            args, "", namespace=lease_namespace, group=config.profiles[0].scheduler_name,
            identity=identity, leader_lease=lease_name,
        )  # fmt: skip
        if opts is not None and not elect:
            raise ValueError("--sharding needs leader election: the leader hosts the group's arbiter")
    except (ConfigError, KubeConfigError, OSError, ValueError) as e:
        print(f"koord-scheduler: {e}", file=sys.stderr)
        return 1
    stop = threading.Event()

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    registry = CollectorRegistry()
    synced = threading.Event()
    probes = None
    if args.metrics_port:
        # /metrics, /healthz (the process serves) and /readyz (informers synced) on one port.
        probes = ProbeServer(
            f":{args.metrics_port}",
            registry,
            liveness={"ping": lambda: (True, "ok")},
            readiness={"informers": lambda: (synced.is_set(), "synced" if synced.is_set() else "syncing")},
        ).start()
    token = Path(args.hub_token_file) if args.hub_token_file else None
    if token is None and SERVICE_ACCOUNT_TOKEN.exists():
        token = SERVICE_ACCOUNT_TOKEN
    leading = threading.Event()
    elector: LeaderElector | None = None
    sharding = Sharding(api, opts) if opts is not None else None
    if elect:

        def started_leading() -> None:
            leading.set()
            if sharding is not None:
                sharding.started_leading()

        def stopped_leading() -> None:
            leading.clear()
            if sharding is not None:
                sharding.stopped_leading()
            if not stop.is_set():
                what = "the shard arbiter" if sharding is not None else "scheduling"
                log.warning("lost the lease: %s stopped, standing by to campaign again", what)

        # The elector talks over a client of its own (kube.client.dedicated_client), never queued
        # behind binds.
        elector = LeaderElector(
            api,
            namespace=lease_namespace,
            name=lease_name,
            identity=identity,
            on_started_leading=started_leading,
            on_stopped_leading=stopped_leading,
        )

    def is_leading() -> bool:
        return elector is None or (leading.is_set() and elector.is_leading())

    if sharding is None:
        guard_writes(api, is_leading)
    else:  # every shard writes (binds, statuses, events) while its own Lease holds
        guard_writes(api, sharding.heartbeat.is_member, "not a shard member")
    service = SchedulerService(
        api,
        config,
        hub_addr=args.hub_addr,
        registry=registry,
        bind_workers=args.bind_workers,
        hub_token_file=token,
        hub_ca=Path(args.hub_ca) if args.hub_ca else None,
        leading=is_leading if sharding is None else None,
        sharding=sharding,
    )
    service.start(stop)
    synced.set()
    log.info(
        "koord-scheduler %s: informers synced; profiles %s",
        koord_version(), ", ".join(p.scheduler_name for p in config.profiles),
    )  # fmt: skip
    if elector is None:
        service.run(stop)
    else:
        t = threading.Thread(target=elector.run_forever, args=(stop,), name="leader-election", daemon=True)
        t.start()
        service.run(stop, active=is_leading if sharding is None else lambda: True)
        t.join(timeout=15)
    service.close()
    if probes is not None:
        probes.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
