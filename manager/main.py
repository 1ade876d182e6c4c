"""koord-manager entry point (composition root): the MetricHub gRPC service, the SLO controllers
(config, NodeSLO, NodeMetric, NodeResource) running only while this replica holds the Lease
`koordinator-manager`, `/metrics` `/healthz` `/readyz`, and — unless `--no-enable-scheduler` — the
embedded koord-scheduler, which reads node metrics from this manager's hub over loopback and schedules
only while this replica leads. Losing the lease exits the process (as upstream), so a restarted replica
starts clean.

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
import shutil
import signal
import socket
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from prometheus_client import CollectorRegistry

from apis.constants import DEFAULT_CONFIG_NAMESPACE
from apis.convert import report_to_nodemetric_dict
from apis.version import koord_version
from kube import upstreamflags
from kube.goflags import add_klog_and_gate_flags, parse_go_args
from kube.httpserver import ProbeServer
from manager.controllers.setup import SLOControllers, add_config_flags, build_slo_controllers
from manager.hubendpoints import HubEndpoints, endpoints_body
from manager.metrichub.auth import (
    DEFAULT_READER_USERS,
    Authenticator,
    Authorizer,
    ChainAuthenticator,
    FixedTokenAuthenticator,
    Identity,
    StaticTokenAuthenticator,
)
from manager.metrichub.metrics import HubCollector
from manager.metrichub.server import serve, tls_credentials
from manager.metrichub.store import HubStore
from manager.webhook.flags import GATE_DEFAULTS, add_webhook_flags

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
    add_klog_and_gate_flags(p, "koord-manager")
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


EMBEDDED_SCHEDULER_USER = "system:koord-manager:embedded-scheduler"
HUB_SERVICE = "koord-manager-hub"


def _hub_endpoints(args: argparse.Namespace, hub_port: int) -> HubEndpoints | None:
    """The leader's hub routing (manager.hubendpoints) when --hub-endpoints names a Service."""
    if not args.hub_endpoints:
        return None
    from kube.client import api_client

    namespace = os.environ.get("POD_NAMESPACE") or args.leader_election_namespace
    body = endpoints_body(
        args.hub_endpoints, namespace, os.environ.get("POD_IP", ""), os.environ.get("POD_NAME", ""), hub_port
    )
    return HubEndpoints(api_client(args.kubeconfig), body)


def _hub_tls(args: argparse.Namespace) -> tuple[Any, Path | None]:
    """The hub's TLS credentials and the CA bundle the embedded scheduler trusts; (None, None) for
    plaintext. With --hub-tls-secret the files are made first (manager.certs, docs/install.md)."""
    if not (args.hub_tls_cert or args.hub_tls_key or args.hub_tls_secret):
        return None, None
    if not (args.hub_tls_cert and args.hub_tls_key):
        raise ValueError("--hub-tls-cert and --hub-tls-key go together (--hub-tls-secret writes both)")
    cert, key = Path(args.hub_tls_cert), Path(args.hub_tls_key)
    ca = Path(args.hub_ca) if args.hub_ca else None
    if args.hub_tls_secret:
        from kube.client import api_client
        from manager.certs import bootstrap
        from manager.gateway import Gateway

        namespace = os.environ.get("POD_NAMESPACE") or args.leader_election_namespace
        service = args.hub_endpoints or HUB_SERVICE
        local = [service, f"{service}.{namespace}", f"{service}.{namespace}.svc"]
        hosts = [h for h in args.hub_tls_hosts.split(",") if h] or [
            *local, f"{local[-1]}.cluster.local", "localhost", "127.0.0.1"
        ]  # fmt: skip
        ca = ca or cert.with_name("ca.crt")
        gateway = Gateway(api_client(args.kubeconfig))
        bootstrap(gateway.create_or_read_secret, name=service, hosts=hosts, secret=args.hub_tls_secret,
                  namespace=namespace, cert_file=cert, key_file=key, ca_file=ca)  # fmt: skip
    return tls_credentials(cert, key), ca or cert


def _hub_auth(
    args: argparse.Namespace, internal_token: str
) -> tuple[Authenticator | None, Authorizer | None]:
    """The hub's authenticator and authorizer from the flags. The embedded scheduler always gets in with
    a random per-process token (it reads the hub over loopback like any other scheduler)."""
    if args.hub_auth == "none":
        return None, None
    internal = FixedTokenAuthenticator({internal_token: Identity(EMBEDDED_SCHEDULER_USER)})
    readers = {*DEFAULT_READER_USERS, EMBEDDED_SCHEDULER_USER}
    if args.hub_auth == "static":
        if not args.hub_token_auth_file:
            raise ValueError("--hub-auth=static needs --hub-token-auth-file")
        return ChainAuthenticator(
            internal, StaticTokenAuthenticator(Path(args.hub_token_auth_file))
        ), Authorizer(reader_users=readers)
    from kube.client import api_client
    from manager.metrichub.kubeauth import pod_node_lookup, tokenreview_authenticator

    api = api_client(args.kubeconfig)
    return ChainAuthenticator(internal, tokenreview_authenticator(api)), Authorizer(
        reader_users=readers, pod_node=pod_node_lookup(api)
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


def _hub_lookup(store: HubStore) -> Callable[[str], dict[str, Any] | None]:
    """The hub's latest report for a node as a NodeMetric dict (the NodeResource controller compares it
    with the CR and uses the fresher, docs/rules/manager.md#the-fresher-of-hub-and-cr)."""

    def lookup(name: str) -> dict[str, Any] | None:
        items = store.list(name).items
        return report_to_nodemetric_dict(items[0].report) if items else None

    return lookup


def _start_controllers(
    args: argparse.Namespace, store: HubStore, stop: threading.Event, identity: str
) -> tuple[SLOControllers, CollectorRegistry]:
    from kube.client import api_client
    from kube.events import EventRecorder

    wanted = parse_controllers(args.controllers)
    registry = CollectorRegistry()
    api = api_client(args.kubeconfig, qps=args.rest_config_qps, burst=args.rest_config_burst)
    prefix = args.node_name_prefix
    built = build_slo_controllers(
        api, args.config_namespace, args.slo_config_name, registry, EventRecorder(api, "koord-manager"),
        identity=identity, node_filter=(lambda n: n.startswith(prefix)) if prefix else None,
        resync_seconds=args.sync_period,
        noderesource="noderesource" in wanted, hub_lookup=_hub_lookup(store),
    )  # fmt: skip
    for name, ctrl in (("nodeslo", built.nodeslo.controller), ("nodemetric", built.nodemetric.controller)):
        if name not in wanted:
            built.manager.remove(ctrl)
    built.gateway.start(stop)
    return built, registry


def _start_scheduler(
    args: argparse.Namespace,
    hub_port: int,
    stop: threading.Event,
    leading: threading.Event,
    token_file: Path,
    registry: CollectorRegistry,
    hub_ca: Path | None = None,
) -> Any:
    """The embedded scheduler; its metrics join the manager's /metrics (``registry``). It reads the hub
    over loopback, with TLS (trusting ``hub_ca``) when the hub serves TLS."""
    from kube.client import api_client
    from scheduler.config import load_profile
    from scheduler.main import SchedulerService
    from scheduler.registry import KNOWN

    profile = load_profile(args.scheduler_config, KNOWN)
    api = api_client(args.kubeconfig, qps=500, burst=1000, connections=48)
    service = SchedulerService(
        api, profile, hub_addr=f"127.0.0.1:{hub_port}", hub_token_file=token_file, registry=registry,
        hub_ca=hub_ca,
    )  # fmt: skip
    service.start(stop)
    threading.Thread(target=service.run, args=(stop, leading.is_set), name="scheduler", daemon=True).start()
    return service


def _start_probes(
    args: argparse.Namespace,
    registry: CollectorRegistry,
    built: SLOControllers | None,
    leading: threading.Event,
    store: HubStore | None = None,
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
    liveness = {"process": lambda: (True, "leading" if leading.is_set() else "standby")}
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
    token_dir = tempfile.mkdtemp(prefix="koord-manager-")
    token_file = Path(token_dir) / "hub-token"
    token_file.write_text(internal_token)
    token_file.chmod(0o600)
    try:
        authenticator, authorizer = _hub_auth(args, internal_token)
    except (ValueError, RuntimeError, OSError) as e:  # KubeConfigError is a RuntimeError
        print(f"koord-manager: --hub-auth={args.hub_auth}: {e}", file=sys.stderr)
        shutil.rmtree(token_dir, ignore_errors=True)
        return 1
    try:
        credentials, hub_ca = _hub_tls(args)
    except (ValueError, RuntimeError, OSError) as e:  # GatewayError, KubeConfigError: RuntimeErrors
        print(f"koord-manager: hub TLS: {e}", file=sys.stderr)
        shutil.rmtree(token_dir, ignore_errors=True)
        return 1
    try:
        server, port = serve(
            store, args.hub_addr, authenticator=authenticator, authorizer=authorizer, credentials=credentials
        )
    except (OSError, RuntimeError) as e:
        print(f"koord-manager: --hub-addr={args.hub_addr}: {e}", file=sys.stderr)
        shutil.rmtree(token_dir, ignore_errors=True)
        return 1
    print(f"koord-manager {koord_version()}: MetricHub listening on port {port}", flush=True)

    leading = threading.Event()
    try:
        endpoints = _hub_endpoints(args, port)
    except (ValueError, RuntimeError, OSError) as e:
        print(f"koord-manager: --hub-endpoints={args.hub_endpoints}: {e}", file=sys.stderr)
        server.stop(grace=None)
        shutil.rmtree(token_dir, ignore_errors=True)
        return 1
    if endpoints is not None:
        threading.Thread(
            target=endpoints.run, args=(stop, leading.is_set), name="hub-endpoints", daemon=True
        ).start()
    service = None
    elector_thread = None
    built: SLOControllers | None = None
    probes: list[ProbeServer] = []
    identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    if args.enable_scheduler or args.enable_leader_election or controllers:
        from kube.client import KubeConfigError, api_client
        from kube.leaderelection import LeaderElector
        from scheduler.config import ConfigError

        try:
            registry = CollectorRegistry()
            if controllers:
                built, registry = _start_controllers(args, store, stop, identity)
            probes = _start_probes(args, registry, built, leading, store)

            def started_leading() -> None:
                leading.set()
                if endpoints is not None:
                    endpoints.kick()
                if built is not None:
                    built.manager.on_started_leading()
                log.info("leading as %s", identity)

            def stopped_leading() -> None:
                if built is not None:
                    built.manager.on_stopped_leading()
                stop.set()

            if args.enable_leader_election:
                elector = LeaderElector(
                    api_client(args.kubeconfig), namespace=args.leader_election_namespace, name=LEASE_NAME,
                    identity=identity, on_started_leading=started_leading, on_stopped_leading=stopped_leading,
                )  # fmt: skip
                elector_thread = threading.Thread(target=elector.run, args=(stop,), name="leader-election")
                elector_thread.start()
            else:
                started_leading()
            if args.enable_scheduler:
                service = _start_scheduler(args, port, stop, leading, token_file, registry, hub_ca)
                print("koord-manager: embedded koord-scheduler started", flush=True)
        except (KubeConfigError, ConfigError, TimeoutError, ValueError, OSError) as e:
            print(f"koord-manager: {e}", file=sys.stderr)
            stop.set()
            server.stop(grace=None)
            for probe in probes:
                probe.stop()
            return 1
    if not probes:  # hub only: still /metrics and probes
        try:
            probes = _start_probes(args, CollectorRegistry(), None, leading, store)
        except (ValueError, OSError) as e:
            print(f"koord-manager: {e}", file=sys.stderr)
            stop.set()
    # Everything built so far lives until exit: move it out of the collector's sight, so the cyclic GC
    # stops scanning it (its pauses stalled the hub's event loop by 30-150 ms under load).
    gc.freeze()
    stop.wait()
    if endpoints is not None:
        endpoints.kick()
    if built is not None:
        built.manager.stop()
    for probe in probes:
        probe.stop()
    if service is not None:
        service.close()
    if elector_thread is not None:
        elector_thread.join(timeout=15)
    server.stop(grace=5).wait()
    shutil.rmtree(token_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
