"""koord-manager entry point (composition root): the MetricHub gRPC service (manager.hubsetup), the SLO
controllers (config, NodeSLO, NodeMetric, NodeResource) running only while this replica holds the Lease
`koordinator-manager`, `/metrics` `/healthz` `/readyz`, the admission webhooks on every replica (with
--webhook-addr; manager.webhook), and — unless `--no-enable-scheduler` — the embedded koord-scheduler,
which reads node metrics from this manager's hub over loopback and schedules only while this replica
leads (with --scheduler-sharding every replica runs one shard of it, the leader hosting the shards'
arbiter: docs/shards.md#wiring). Leader-only work (controllers, embedded scheduler, hub Endpoints)
checks before each write that the lease cannot have expired by the elector's own clock; losing the
lease stops it and the replica campaigns again, while the process, its hub, webhooks and probes stay up
(docs/architecture.md#leader-election).

The one place that may import the scheduler (its public entry point, scheduler.main).
Upstream koord-manager's argument lists are accepted (kube.goflags; docs/flags.md).
Imports: argparse, signal, apis, kube, manager.*, scheduler.main.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import secrets
import signal
import socket
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from apis.constants import DEFAULT_CONFIG_NAMESPACE
from apis.version import koord_version
from kube import upstreamflags
from kube.goflags import add_klog_and_gate_flags, parse_go_args
from kube.httpserver import ProbeServer
from kube.supervise import supervise
from manager.controllers.setup import SLOControllers, add_config_flags, build_slo_controllers
from manager.hubsetup import hub_auth, hub_endpoints, hub_lookup, hub_tls
from manager.leadership import Leadership
from manager.metrichub.metrics import HubCollector
from manager.metrichub.server import serve
from manager.metrichub.store import HubStore

if TYPE_CHECKING:
    from manager.webhook.service import WebhookService
from manager.webhook.flags import GATE_DEFAULTS, add_webhook_flags, start_from_args

DEFAULT_HUB_ADDR = "0.0.0.0:9317"
CONTROLLERS = ("nodemetric", "noderesource", "nodeslo")
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
    p.add_argument(
        "--scheduler-ignore-unknown-plugins",
        action="store_true",
        help="the embedded scheduler skips (with a warning) configured plugins it does not have",
    )
    # The embedded scheduler's sharding flags: scheduler.shards.wiring.add_shard_flags's with the prefix,
    # declared here so parsing needs no scheduler import.
    p.add_argument("--scheduler-sharding", action=argparse.BooleanOptionalAction, default=False,
                   help="each replica schedules its share of the pending pods (docs/shards.md)")  # fmt: skip
    p.add_argument("--scheduler-shard-arbiter-addr", default="",
                   help="the leader's shard arbiter address (<advertise host>:10261)")  # fmt: skip
    p.add_argument("--scheduler-shard-advertise-host", default="",
                   help="the host replicas dial for the arbiter ($POD_IP, else 127.0.0.1)")  # fmt: skip
    p.add_argument("--scheduler-shard-lease-duration", type=float, default=15.0,
                   help="seconds a shard's Lease stays live without renewal (15)")  # fmt: skip
    p.add_argument("--enable-leader-election", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--leader-election-namespace", default=DEFAULT_CONFIG_NAMESPACE)
    p.add_argument("--metrics-addr", default=":8080", help="/metrics (and /healthz, /readyz) address (:8080)")
    p.add_argument("--health-probe-addr", default=":8000", help="/healthz and /readyz address (:8000)")
    p.add_argument("--rest-config-qps", type=float, default=30.0)
    p.add_argument("--rest-config-burst", type=int, default=50)
    p.add_argument(
        "--controllers",
        default="*",
        help=f"controllers to run: '*', names, '-name' to drop one (known: {', '.join(CONTROLLERS)})",
    )
    p.add_argument(
        "--node-name-prefix",
        default="",
        help="manage only nodes whose names start with this (sharding a cluster between managers; tests)",
    )
    p.add_argument(
        "--hub-auth",
        choices=["tokenreview", "static", "none"],
        default="tokenreview",
        help="how MetricHub callers are authenticated: ServiceAccount tokens via TokenReview (default), "
        "a static token file (--hub-token-auth-file; local mode), or none (loopback testing only)",
    )
    p.add_argument("--hub-token-auth-file", help="static tokens: lines 'token,user[,group1|group2]'")
    p.add_argument(
        "--hub-endpoints",
        default="",
        help="name of the selector-less hub Service whose Endpoints the leader points at its own pod "
        "(POD_IP, POD_NAME, POD_NAMESPACE from the downward API), so every koordlet reports to the leader; "
        "empty (default) leaves routing to the Service",
    )
    p.add_argument("--hub-tls-cert", help="PEM certificate chain: the hub serves TLS (with --hub-tls-key)")
    p.add_argument("--hub-tls-key", help="PEM private key of --hub-tls-cert")
    p.add_argument(
        "--hub-ca",
        help="CA bundle (PEM) the embedded scheduler verifies the hub with (default: --hub-tls-cert itself)",
    )
    p.add_argument(
        "--hub-tls-secret",
        default="",
        help="Secret (in POD_NAMESPACE, else --leader-election-namespace) keeping the hub's self-signed CA "
        "and certificate: the first replica creates it, every replica writes it to --hub-tls-cert, "
        "--hub-tls-key and --hub-ca (default: ca.crt next to the certificate)",
    )
    p.add_argument(
        "--hub-tls-hosts",
        default="",
        help="comma-separated names for --hub-tls-secret's certificate (default: the hub Service's DNS "
        "names, localhost, 127.0.0.1)",
    )
    add_klog_and_gate_flags(p, "koord-manager", GATE_DEFAULTS)
    add_config_flags(p)
    add_webhook_flags(p)
    return p


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """The flags (upstream's Go-style argument lists too, kube.goflags) and the warning lines for the
    accepted arguments that have no effect. A bad or unknown flag exits naming it."""
    return parse_go_args(
        build_parser(),
        argv,
        "koord-manager",
        upstreamflags.MANAGER,
        upstreamflags.MANAGER_GATES,
        GATE_DEFAULTS,
    )


def parse_controllers(text: str) -> set[str]:
    """``*``, ``name``, ``-name`` (comma separated), as upstream's --controllers; unknown names refused."""
    chosen: set[str] = set()
    for raw in (t.strip() for t in text.split(",")):
        if not raw:
            continue
        name = raw.lstrip("-")
        if raw == "*":
            chosen |= set(CONTROLLERS)
        elif name not in CONTROLLERS:
            raise ValueError(f"--controllers: unknown controller {name!r} (known: {', '.join(CONTROLLERS)})")
        elif raw.startswith("-"):
            chosen.discard(name)
        else:
            chosen.add(name)
    return chosen


def _start_controllers(
    args: argparse.Namespace,
    store: HubStore,
    stop: threading.Event,
    identity: str,
    leading: Callable[[], bool],
) -> tuple[SLOControllers, CollectorRegistry]:
    """The SLO controllers; their client's writes go out only while ``leading()`` holds."""
    from kube.client import api_client, guard_writes
    from kube.events import EventRecorder

    wanted = parse_controllers(args.controllers)
    registry = CollectorRegistry()
    api = api_client(args.kubeconfig, qps=args.rest_config_qps, burst=args.rest_config_burst)
    guard_writes(api, leading)
    prefix = args.node_name_prefix
    built = build_slo_controllers(
        api, args.config_namespace, args.slo_config_name, registry, EventRecorder(api, "koord-manager"),
        identity=identity, node_filter=(lambda n: n.startswith(prefix)) if prefix else None,
        resync_seconds=args.sync_period,
        noderesource="noderesource" in wanted, hub_lookup=hub_lookup(store),
    )  # fmt: skip
    for name, ctrl in (("nodeslo", built.nodeslo.controller), ("nodemetric", built.nodemetric.controller)):
        if name not in wanted:
            built.manager.remove(ctrl)
    built.manager.gate(leading)
    built.gateway.start(stop)
    return built, registry


def _start_scheduler(
    args: argparse.Namespace,
    hub_port: int,
    stop: threading.Event,
    leadership: Leadership,
    token_file: Path,
    registry: CollectorRegistry,
    hub_ca: Path | None = None,
) -> Any:
    """The embedded scheduler; its metrics join the manager's /metrics (``registry``). It reads the hub
    over loopback, with TLS (trusting ``hub_ca``) when the hub serves TLS; it schedules, binds and
    writes only while this replica leads, or, sharded, on every replica while its shard Lease holds,
    the leader hosting the arbiter (docs/shards.md#wiring)."""
    from kube.client import api_client, guard_writes
    from scheduler.config import load_config
    from scheduler.main import SchedulerService, Sharding, shard_options
    from scheduler.registry import KNOWN

    config = load_config(args.scheduler_config, KNOWN, args.scheduler_ignore_unknown_plugins)
    api = api_client(args.kubeconfig, qps=500, burst=1000, connections=48)
    opts = shard_options(
        args, "scheduler-", namespace=args.leader_election_namespace, identity=leadership.identity,
        group=config.profiles[0].scheduler_name, leader_lease=LEASE_NAME,
    )  # fmt: skip
    if opts is not None and not args.enable_leader_election:
        raise ValueError("--scheduler-sharding needs leader election: the leader hosts the shards' arbiter")
    sharding = Sharding(api, opts) if opts is not None else None
    leading = leadership.is_leading
    guard_writes(api, leading if sharding is None else sharding.heartbeat.is_member)
    service = SchedulerService(
        api, config, hub_addr=f"127.0.0.1:{hub_port}", hub_token_file=token_file, registry=registry,
        hub_ca=hub_ca, leading=leading if sharding is None else None, sharding=sharding,
    )  # fmt: skip
    if sharding is not None:
        leadership.on_start(sharding.started_leading)
        leadership.on_stop(sharding.stopped_leading)
        if leadership.is_leading():  # the elector may have called back before the hooks were added
            sharding.started_leading()
    service.start(stop)
    active = leading if sharding is None else (lambda: True)
    # Supervised (docs/architecture.md#supervised-threads): a cycle that raised ended the embedded
    # scheduler for good while the manager led on and /healthz said nothing.
    supervise("scheduler", lambda s: service.run(s, active), stop, on_crash=service.metrics.on_thread_crash)
    return service


def _start_probes(
    args: argparse.Namespace,
    registry: CollectorRegistry,
    built: SLOControllers | None,
    leading: Callable[[], bool],
    store: HubStore | None = None,
    webhooks: WebhookService | None = None,
) -> list[ProbeServer]:
    """/metrics on --metrics-addr; /healthz and /readyz there and on --health-probe-addr. Ready once the
    informers synced (a standby is ready too: it serves the hub and takes over on leader loss)."""

    def synced() -> tuple[bool, str]:
        if built is None:
            return True, "no controllers"
        return built.gateway.wait_synced(0), "informers synced"

    if store is not None:
        HubCollector(store, registry)
    checks = {"informers": synced}
    if webhooks is not None:
        checks["webhooks"] = webhooks.ready
    liveness = {"process": lambda: (True, "leading" if leading() else "standby")}
    probes = [ProbeServer(args.metrics_addr, registry, liveness, checks).start()]
    if args.health_probe_addr and args.health_probe_addr != args.metrics_addr:
        probes.append(ProbeServer(args.health_probe_addr, registry, liveness, checks).start())
    print(f"koord-manager: /metrics on port {probes[0].port}", flush=True)
    return probes


def main(argv: list[str] | None = None) -> int:
    args, warnings = parse_args(argv)
    level = logging.DEBUG if args.v >= 4 else logging.INFO
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for warning in warnings:
        log.warning("%s", warning)
    stop = threading.Event()

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    try:
        controllers = parse_controllers(args.controllers)
    except ValueError as e:
        print(f"koord-manager: {e}", file=sys.stderr)
        return 2
    store = HubStore()
    internal_token = secrets.token_urlsafe(32)
    # The embedded scheduler reads its hub token from a file; an anonymous in-memory file (memfd) serves
    # it without anything on disk, so not even a SIGKILL leaves the token behind.
    token_fd = os.memfd_create("koord-manager-hub-token", os.MFD_CLOEXEC)
    os.write(token_fd, internal_token.encode())
    token_file = Path(f"/proc/self/fd/{token_fd}")
    try:
        authenticator, authorizer = hub_auth(args, internal_token)
    except (ValueError, RuntimeError, OSError) as e:  # KubeConfigError is a RuntimeError
        print(f"koord-manager: --hub-auth={args.hub_auth}: {e}", file=sys.stderr)
        os.close(token_fd)
        return 1
    try:
        credentials, hub_ca = hub_tls(args)
    except (ValueError, RuntimeError, OSError) as e:  # GatewayError, KubeConfigError: RuntimeErrors
        print(f"koord-manager: hub TLS: {e}", file=sys.stderr)
        os.close(token_fd)
        return 1
    try:
        server, port = serve(
            store, args.hub_addr, authenticator=authenticator, authorizer=authorizer, credentials=credentials
        )
    except (OSError, RuntimeError) as e:
        print(f"koord-manager: --hub-addr={args.hub_addr}: {e}", file=sys.stderr)
        os.close(token_fd)
        return 1
    print(f"koord-manager {koord_version()}: MetricHub listening on port {port}", flush=True)

    identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    leadership = Leadership(identity, stop)
    is_leading = leadership.is_leading
    try:
        endpoints = hub_endpoints(args, port, is_leading)
    except (ValueError, RuntimeError, OSError) as e:
        print(f"koord-manager: --hub-endpoints={args.hub_endpoints}: {e}", file=sys.stderr)
        server.stop(grace=None)
        os.close(token_fd)
        return 1
    if endpoints is not None:
        leadership.on_start(endpoints.kick)
        routing = endpoints
        supervise("hub-endpoints", lambda s: routing.run(s, is_leading), stop)
    service = None
    elector_thread = None
    built: SLOControllers | None = None
    probes: list[ProbeServer] = []
    webhooks: WebhookService | None = None
    if args.enable_scheduler or args.enable_leader_election or controllers or args.webhook_addr:
        from kube.client import KubeConfigError, api_client
        from kube.leaderelection import LeaderElector
        from scheduler.config import ConfigError

        try:
            registry = CollectorRegistry()
            if controllers:
                built, registry = _start_controllers(args, store, stop, identity, is_leading)
                leadership.on_start(built.manager.on_started_leading)
                leadership.on_stop(built.manager.on_stopped_leading)
            webhooks = start_from_args(args, registry, stop, built.gateway if built else None)
            probes = _start_probes(args, registry, built, is_leading, store, webhooks)
            if args.enable_leader_election:  # losing the lease: stand by, campaign again
                elector = LeaderElector(
                    api_client(args.kubeconfig), namespace=args.leader_election_namespace, name=LEASE_NAME,
                    identity=identity, on_started_leading=leadership.started_leading,
                    on_stopped_leading=leadership.stopped_leading,
                )  # fmt: skip
                leadership.follow(elector.is_leading)
                elector_thread = threading.Thread(
                    target=elector.run_forever, args=(stop,), name="leader-election"
                )
                elector_thread.start()
            else:
                leadership.started_leading()
            if args.enable_scheduler:
                service = _start_scheduler(args, port, stop, leadership, token_file, registry, hub_ca)
                print("koord-manager: embedded koord-scheduler started", flush=True)
        except (KubeConfigError, ConfigError, TimeoutError, ValueError, OSError, RuntimeError) as e:
            print(f"koord-manager: {e}", file=sys.stderr)  # GatewayError (a RuntimeError): webhook Secret
            stop.set()
            server.stop(grace=None)
            for probe in probes:
                probe.stop()
            if webhooks is not None:
                webhooks.stop()
            os.close(token_fd)
            return 1
    if not probes:  # hub only: still /metrics and probes
        try:
            probes = _start_probes(args, CollectorRegistry(), None, is_leading, store)
        except (ValueError, OSError) as e:
            print(f"koord-manager: {e}", file=sys.stderr)
            stop.set()
    # Everything built so far lives until exit: move it out of the collector's sight, so the cyclic GC
    # stops scanning it (its pauses stalled the hub's event loop by 30-150 ms under load).
    gc.freeze()
    stop.wait()
    try:
        if endpoints is not None:
            endpoints.kick()
        if built is not None:
            built.manager.stop()
        for probe in probes:
            probe.stop()
        if webhooks is not None:
            webhooks.stop()
        if service is not None:
            service.close()
        if elector_thread is not None:
            elector_thread.join(timeout=15)
        server.stop(grace=5).wait()
    finally:
        os.close(token_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
