"""koord-manager's MetricHub, composed from its flags: authentication (manager.metrichub.auth, TokenReview
through manager.metrichub.kubeauth), TLS (files, or a Secret through manager.certs), the leader's Endpoints
routing (manager.hubendpoints) and the latest-report lookup the NodeResource controller reads.

Imports: the standard library, apis.convert, kube.client (lazily), manager.{certs,gateway,hubendpoints,
metrichub.*}.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from apis.convert import report_to_nodemetric_dict
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
from manager.metrichub.server import tls_credentials
from manager.metrichub.store import HubStore

__all__ = ["EMBEDDED_SCHEDULER_USER", "HUB_SERVICE", "hub_auth", "hub_endpoints", "hub_lookup", "hub_tls"]

EMBEDDED_SCHEDULER_USER = "system:koord-manager:embedded-scheduler"
HUB_SERVICE = "koord-manager-hub"


def hub_endpoints(
    args: argparse.Namespace, hub_port: int, leading: Callable[[], bool] | None = None
) -> HubEndpoints | None:
    """The leader's hub routing (manager.hubendpoints) when --hub-endpoints names a Service. With
    ``leading``, its client sends a write only while ``leading()`` holds, and once (kube.client.guard_writes):
    a replica whose lease may have expired never points the Service at itself."""
    if not args.hub_endpoints:
        return None
    from kube.client import api_client, guard_writes

    namespace = os.environ.get("POD_NAMESPACE") or args.leader_election_namespace
    body = endpoints_body(
        args.hub_endpoints, namespace, os.environ.get("POD_IP", ""), os.environ.get("POD_NAME", ""), hub_port
    )
    api = api_client(args.kubeconfig)
    if leading is not None:
        guard_writes(api, leading)
    return HubEndpoints(api, body)


def hub_tls(args: argparse.Namespace) -> tuple[Any, Path | None]:
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


def hub_auth(args: argparse.Namespace, internal_token: str) -> tuple[Authenticator | None, Authorizer | None]:
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


def hub_lookup(store: HubStore) -> Callable[[str], dict[str, Any] | None]:
    """The hub's latest report for a node as a NodeMetric dict (the NodeResource controller compares it
    with the CR and uses the fresher, docs/rules/manager.md#the-fresher-of-hub-and-cr)."""

    def lookup(name: str) -> dict[str, Any] | None:
        items = store.list(name).items
        return report_to_nodemetric_dict(items[0].report) if items else None

    return lookup
