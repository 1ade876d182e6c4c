"""koord-manager's command line: its flags (upstream koord-manager's argument lists accepted too,
kube.goflags; docs/flags.md) and the ``--controllers`` selection. The composition root (manager.main)
parses with these and wires what they name.
Imports: argparse, apis.{constants,version}, kube.{goflags,upstreamflags}, manager.controllers.setup
(its flags), manager.webhook.flags (its flags and gates).
"""

from __future__ import annotations

import argparse

from apis.constants import DEFAULT_CONFIG_NAMESPACE
from apis.version import koord_version
from kube import upstreamflags
from kube.goflags import add_klog_and_gate_flags, parse_go_args
from manager.controllers.setup import add_config_flags
from manager.webhook.flags import GATE_DEFAULTS, add_webhook_flags

__all__ = ["CONTROLLERS", "DEFAULT_HUB_ADDR", "build_parser", "parse_args", "parse_controllers"]

DEFAULT_HUB_ADDR = "0.0.0.0:9317"
CONTROLLERS = ("nodemetric", "noderesource", "nodeslo")


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
