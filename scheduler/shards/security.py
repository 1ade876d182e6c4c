"""The shard arbiter's TLS and authentication as flags and options (docs/shards.md#security): the
arbiter serves a certificate and admits only callers whose bearer token's TokenReview identity is
allowed; a shard verifies the arbiter against a CA bundle and one server name (it is dialed by pod IP)
and sends its ServiceAccount token. Sharding off: none of this is read.
Imports: argparse, kube.grpcauth (tokens, transport), the standard library.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kube.grpcauth.tokens import service_account_user
from kube.grpcauth.transport import SERVICE_ACCOUNT_TOKEN

__all__ = [
    "DEFAULT_ALLOWED_USERS", "DEFAULT_SERVER_NAME", "HUB_SERVICE", "ShardSecurity", "add_security_flags",
    "security_options",
]  # fmt: skip

log = logging.getLogger(__name__)

# The one name every arbiter's certificate carries: the arbiter is dialed by pod IP (docs/shards.md#security).
DEFAULT_SERVER_NAME = "koord-scheduler-shard-arbiter"
# The identities allowed to call the arbiter: the shards of a standalone and of an embedded scheduler.
DEFAULT_ALLOWED_USERS = (
    service_account_user("koordinator-system", "koord-scheduler"),
    service_account_user("koordinator-system", "koord-manager"),
)
# The embedded scheduler, until koord-manager declares the --scheduler-shard-tls-* flags, serves the
# hub's certificate, issued for the hub Service's names (docs/shards.md#security).
HUB_SERVICE = "koord-manager-hub"


@dataclass(frozen=True, slots=True)
class ShardSecurity:
    """The arbiter's TLS and authentication (docs/shards.md#security): it serves ``cert_file``/``key_file``
    and admits a call only with a bearer token whose TokenReview identity is in ``allowed_users`` (or a
    group in ``allowed_groups``); a shard verifies the arbiter's certificate against ``ca_file`` and the
    name ``server_name``, and sends the token in ``token_file`` (re-read on every call)."""

    cert_file: Path
    key_file: Path
    ca_file: Path
    token_file: Path = SERVICE_ACCOUNT_TOKEN
    server_name: str = DEFAULT_SERVER_NAME
    allowed_users: frozenset[str] = frozenset(DEFAULT_ALLOWED_USERS)
    allowed_groups: frozenset[str] = frozenset()


def add_security_flags(p: argparse.ArgumentParser, prefix: str = "") -> None:
    """The arbiter's TLS and authentication flags (docs/flags.md)."""
    p.add_argument(
        f"--{prefix}shard-tls-cert", default="",
        help="PEM certificate the arbiter serves, with --shard-tls-key (needed unless --shard-insecure)",
    )  # fmt: skip
    p.add_argument(f"--{prefix}shard-tls-key", default="", help="PEM private key of --shard-tls-cert")
    p.add_argument(
        f"--{prefix}shard-ca", default="",
        help="CA bundle (PEM) a shard verifies the arbiter with (needed unless --shard-insecure)",
    )  # fmt: skip
    p.add_argument(
        f"--{prefix}shard-tls-server-name", default=DEFAULT_SERVER_NAME,
        help=f"the name checked in the arbiter's certificate ({DEFAULT_SERVER_NAME}); it is dialed by pod IP",
    )  # fmt: skip
    p.add_argument(
        f"--{prefix}shard-token-file", default=str(SERVICE_ACCOUNT_TOKEN),
        help="bearer token a shard sends to the arbiter, re-read each call (the pod's ServiceAccount token)",
    )  # fmt: skip
    p.add_argument(
        f"--{prefix}shard-allowed-users", default=",".join(DEFAULT_ALLOWED_USERS),
        help="comma-separated users (TokenReview identities) the arbiter admits "
        "(the koord-scheduler and koord-manager ServiceAccounts of koordinator-system)",
    )  # fmt: skip
    p.add_argument(
        f"--{prefix}shard-insecure", action="store_true",
        help="the arbiter serves plaintext without authentication (tests and one host only)",
    )  # fmt: skip


def security_options(args: argparse.Namespace, prefix: str, flag: Callable[..., Any]) -> ShardSecurity | None:
    """The security the flags ask for (``flag(name, default)`` reads one); None with --shard-insecure.
    Raises ValueError naming the flags when TLS is asked for by omission but not given."""
    if flag("shard-insecure", False):
        return None
    cert, key, ca = flag("shard-tls-cert", ""), flag("shard-tls-key", ""), flag("shard-ca", "")
    server_name = flag("shard-tls-server-name", DEFAULT_SERVER_NAME)
    if not (cert or key or ca) and not hasattr(args, (prefix + "shard_tls_cert").replace("-", "_")):
        # An embedded scheduler whose manager does not declare the flags: the hub's certificate and CA
        # (manager/hubsetup.py's hub_tls picks the same files), checked as the hub Service's name.
        cert, key = getattr(args, "hub_tls_cert", None) or "", getattr(args, "hub_tls_key", None) or ""
        if not (cert and key):
            log.warning(
                "shard arbiter is INSECURE: the hub serves no TLS, so the embedded scheduler's arbiter "
                "serves plaintext without authentication (docs/shards.md#security)"
            )
            return None
        ca = getattr(args, "hub_ca", None) or (
            str(Path(cert).with_name("ca.crt")) if getattr(args, "hub_tls_secret", None) else cert
        )
        server_name = getattr(args, "hub_endpoints", None) or HUB_SERVICE
    if not (cert and key and ca):
        raise ValueError(
            f"--{prefix}shard-tls-cert, --{prefix}shard-tls-key and --{prefix}shard-ca are needed with "
            f"--{prefix}sharding (the arbiter serves TLS and authenticates its callers), "
            f"or --{prefix}shard-insecure"
        )
    users = frozenset(
        u.strip()
        for u in str(flag("shard-allowed-users", ",".join(DEFAULT_ALLOWED_USERS))).split(",")
        if u.strip()
    )
    if not users:
        raise ValueError(f"--{prefix}shard-allowed-users: must name at least one user")
    token = flag("shard-token-file", str(SERVICE_ACCOUNT_TOKEN)) or str(SERVICE_ACCOUNT_TOKEN)
    return ShardSecurity(Path(cert), Path(key), Path(ca), Path(token), server_name, users)
