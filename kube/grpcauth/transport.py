"""TLS and bearer tokens on gRPC channels and servers (docs/shards.md#security): server credentials
from PEM files, client credentials from a CA bundle, the token a client sends (a file re-read on every
call, so a rotated ServiceAccount token is picked up), and `TokenAuthInterceptor`, which puts the
bearer-token gate (kube.grpcauth.gate) and an allow-list of identities in front of every unary method
of a threaded gRPC server: no or an invalid token → UNAUTHENTICATED, an identity not allowed →
PERMISSION_DENIED, the gate's rate and capacity refusals with their own codes.

Imports: grpc, standard library, kube.grpcauth (gate, tokens).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import grpc

from kube.grpcauth.gate import AuthGate
from kube.grpcauth.limits import RefusedError
from kube.grpcauth.tokens import Identity, bearer_token

__all__ = [
    "SERVICE_ACCOUNT_TOKEN", "TokenAuthInterceptor", "TokenFile", "channel_credentials", "server_credentials",
]  # fmt: skip

log = logging.getLogger(__name__)

SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


def server_credentials(cert_file: Path, key_file: Path) -> grpc.ServerCredentials:
    """Server credentials from a PEM certificate chain and its PEM private key."""
    return grpc.ssl_server_credentials([(key_file.read_bytes(), cert_file.read_bytes())])


def channel_credentials(ca_file: Path) -> grpc.ChannelCredentials:
    """Client credentials trusting the CA bundle ``ca_file`` (the server's chain must end there)."""
    return grpc.ssl_channel_credentials(root_certificates=ca_file.read_bytes())


class TokenFile:
    """The ``authorization`` metadata of a bearer token kept in a file, read on every call (a projected
    ServiceAccount token is rotated in place)."""

    def __init__(self, path: Path, what: str = "token file") -> None:
        self.path, self.what = path, what

    def metadata(self) -> list[tuple[str, str]]:
        """[("authorization", "Bearer <token>")], [] for an empty file; RuntimeError when unreadable."""
        try:
            token = self.path.read_text().strip()
        except OSError as e:
            raise RuntimeError(f"{self.what} {self.path}: {e}") from e
        return [("authorization", f"Bearer {token}")] if token else []


_CODES = {
    "UNAUTHENTICATED": grpc.StatusCode.UNAUTHENTICATED,
    "UNAVAILABLE": grpc.StatusCode.UNAVAILABLE,
    "RESOURCE_EXHAUSTED": grpc.StatusCode.RESOURCE_EXHAUSTED,
}


class TokenAuthInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]  # grpc is untyped
    """Every unary-unary call of the server must carry a token whose identity's user is in
    ``allowed_users`` (or one of its groups in ``allowed_groups``). ``on_identity`` sees each admitted
    identity (tests, logs)."""

    def __init__(
        self,
        gate: AuthGate,
        allowed_users: Collection[str],
        allowed_groups: Collection[str] = (),
        *,
        service: str = "the service",
        on_identity: Callable[[Identity], None] | None = None,
    ) -> None:
        self.gate = gate
        self.allowed_users, self.allowed_groups = frozenset(allowed_users), frozenset(allowed_groups)
        self.service = service
        self._on_identity = on_identity

    def allowed(self, ident: Identity) -> bool:
        return ident.user in self.allowed_users or not self.allowed_groups.isdisjoint(ident.groups)

    def _check(self, context: Any) -> None:
        try:
            ident = self.gate.identity_blocking(bearer_token(context.invocation_metadata()), context.peer())
        except RefusedError as e:
            context.abort(_CODES.get(e.code, grpc.StatusCode.UNAUTHENTICATED), e.details)
            raise AssertionError("unreachable") from None  # abort raises
        if not self.allowed(ident):
            self.gate.refused.inc("not_allowed")
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"{ident.user!r} may not call {self.service}")
        if self._on_identity is not None:
            self._on_identity(ident)

    def intercept_service(self, continuation: Any, handler_call_details: Any) -> Any:
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler  # the services guarded here have unary methods only
        inner = handler.unary_unary

        def guarded(request: Any, context: Any) -> Any:
            self._check(context)
            return inner(request, context)

        return grpc.unary_unary_rpc_method_handler(
            guarded,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
