"""koord-manager's admission-webhook flags and feature gates (docs/flags.md#koord-manager).

``add_webhook_flags`` registers the flags; ``GATE_DEFAULTS`` are the upstream gates koord implements for
the webhooks, with koord's defaults (the ConfigMap check is on by default here, off upstream);
``WebhookOptions.from_args`` turns parsed flags into the arguments of manager.webhook.service's
``start_webhooks``, which ``start_from_args`` calls for koord-manager's entry point.
Imports: the standard library, kube.client (lazily), manager.webhook.{handlers,service}.
"""

from __future__ import annotations

import argparse
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from manager.webhook.handlers import HandlerOptions
from manager.webhook.service import WebhookService, service_hosts

__all__ = ["GATE_DEFAULTS", "WebhookOptions", "add_webhook_flags", "start_from_args"]

# Off unless asked for: deploy/ turns them on (:9443); a manager run by hand or by tests serves none.
DEFAULT_ADDR: Final = ""
DEFAULT_SERVICE: Final = "koord-manager-webhook"
MUTATING_CONFIG: Final = "koordinator-mutating-webhook-configuration"
VALIDATING_CONFIG: Final = "koordinator-validating-webhook-configuration"

POD_MUTATING: Final = "PodMutatingWebhook"
POD_VALIDATING: Final = "PodValidatingWebhook"
CONFIGMAP_VALIDATING: Final = "ConfigMapValidatingWebhook"
SKIP_MUTATING_RESOURCES: Final = "ColocationProfileSkipMutatingResources"
SKIP_VALIDATING_PRIORITY: Final = "ColocationProfileSkipValidatingPriority"
GATE_DEFAULTS: Final[Mapping[str, bool]] = {
    POD_MUTATING: True,
    POD_VALIDATING: True,
    CONFIGMAP_VALIDATING: True,
    SKIP_MUTATING_RESOURCES: False,
    SKIP_VALIDATING_PRIORITY: False,
}


def add_webhook_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--webhook-addr",
        default=DEFAULT_ADDR,
        help="admission webhooks' HTTPS listen address, e.g. :9443 (deploy/ sets it); empty (default): no "
        "webhooks",
    )
    p.add_argument(
        "--webhook-tls-secret",
        default="",
        help="Secret (in POD_NAMESPACE, else --leader-election-namespace) keeping the webhooks' self-signed "
        "CA and certificate: the first replica creates it, every replica serves it, keeps the caBundle of "
        "the webhook configurations equal to its CA and renews it before it expires. Empty: serve "
        "tls.crt/tls.key of --webhook-cert-dir as they are (e.g. cert-manager's), patch nothing",
    )
    p.add_argument(
        "--webhook-cert-dir",
        default="",
        help="folder of the webhooks' tls.crt, tls.key and ca.crt (default: a private temporary folder)",
    )
    p.add_argument(
        "--webhook-service",
        default=DEFAULT_SERVICE,
        help=f"the webhooks' Service, whose DNS names the certificate carries ({DEFAULT_SERVICE})",
    )
    p.add_argument(
        "--webhook-hosts",
        default="",
        help="comma-separated extra names (DNS or IP) for the webhooks' certificate, e.g. 127.0.0.1 when "
        "the API server calls the webhooks by URL",
    )
    configurations = [
        ("--mutating-webhook-configuration", "Mutating", MUTATING_CONFIG),
        ("--validating-webhook-configuration", "Validating", VALIDATING_CONFIG),
    ]
    for flag, kind, name in configurations:
        p.add_argument(
            flag, default=name, help=f"the {kind}WebhookConfiguration whose caBundle is kept ({name})"
        )


@dataclass(frozen=True)
class WebhookOptions:
    """The webhook flags, checked: the arguments of manager.webhook.service.start_webhooks."""

    addr: str
    namespace: str
    secret: str
    service_name: str
    hosts: tuple[str, ...]
    mutating_config: str
    validating_config: str
    cert_dir: Path | None
    options: HandlerOptions

    @classmethod
    def from_args(cls, args: argparse.Namespace, namespace: str) -> WebhookOptions | None:
        """The options, or None when --webhook-addr is empty; ValueError names a bad flag value.
        ``namespace``: where the Secret lives (the manager's own)."""
        addr: str = args.webhook_addr
        if not addr:
            return None
        _, sep, port = addr.rpartition(":")
        if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError(f"--webhook-addr={addr!r}: expected [host]:port with a port in 0..65535")
        extra = [h.strip() for h in str(args.webhook_hosts).split(",") if h.strip()]
        given: Mapping[str, bool] = args.feature_gates if isinstance(args.feature_gates, Mapping) else {}
        gates = {**GATE_DEFAULTS, **given}
        return cls(
            addr=addr,
            namespace=namespace,
            secret=args.webhook_tls_secret,
            service_name=args.webhook_service,
            hosts=tuple(dict.fromkeys([*service_hosts(args.webhook_service, namespace), *extra])),
            mutating_config=args.mutating_webhook_configuration,
            validating_config=args.validating_webhook_configuration,
            cert_dir=Path(args.webhook_cert_dir) if args.webhook_cert_dir else None,
            options=HandlerOptions(
                mutate_pods=gates[POD_MUTATING],
                validate_pods=gates[POD_VALIDATING],
                validate_configmaps=gates[CONFIGMAP_VALIDATING],
                skip_mutating_resources=gates[SKIP_MUTATING_RESOURCES],
                skip_validating_priority=gates[SKIP_VALIDATING_PRIORITY],
                config_namespace=args.config_namespace,
                config_name=args.slo_config_name,
            ),
        )


class _NodeReader(Protocol):
    def node_names(self) -> list[str]: ...
    def node(self, name: str) -> Any: ...


def start_from_args(
    args: argparse.Namespace, registry: Any, stop: threading.Event, nodes: _NodeReader | None = None
) -> WebhookService | None:
    """The admission webhooks of this replica when --webhook-addr is set (manager.webhook.service), the
    Secret in POD_NAMESPACE, else --leader-election-namespace. ``nodes``: the controllers' gateway when
    they run, whose Node informer the ConfigMap check reads."""
    opts = WebhookOptions.from_args(args, os.environ.get("POD_NAMESPACE") or args.leader_election_namespace)
    if opts is None:
        return None
    from kube.client import api_client
    from manager.webhook.service import start_webhooks

    listed = None
    if nodes is not None:
        gw = nodes
        listed = lambda: [n for k in gw.node_names() if (n := gw.node(k)) is not None]  # noqa: E731
    service = start_webhooks(
        api_client(args.kubeconfig), addr=opts.addr, namespace=opts.namespace, secret=opts.secret,
        service_name=opts.service_name, hosts=opts.hosts, mutating_config=opts.mutating_config,
        validating_config=opts.validating_config, cert_dir=opts.cert_dir, registry=registry, stop=stop,
        options=opts.options, nodes=listed,
    )  # fmt: skip
    print(f"koord-manager: admission webhooks on port {service.port}", flush=True)
    return service
