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
The flags (upstream koord-manager's argument lists accepted too; docs/flags.md) are manager.options's.
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

from apis.version import koord_version
from kube.httpserver import ProbeServer
from kube.supervise import supervise
from manager.controllers.setup import SLOControllers, build_slo_controllers
from manager.hubsetup import hub_auth, hub_endpoints, hub_lookup, hub_tls
from manager.leadership import Leadership
from manager.metrichub.metrics import HubCollector
from manager.metrichub.server import serve
from manager.metrichub.store import HubStore
from manager.options import parse_args, parse_controllers

if TYPE_CHECKING:
    from manager.webhook.service import WebhookService
from manager.webhook.flags import start_from_args

LEASE_NAME = "koordinator-manager"
log = logging.getLogger("koord-manager")


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
