"""What a sharded scheduler on the real API server needs for its arbiter's security (docs/shards.md#security):
a namespace of its own for the shard Leases, a certificate for the arbiter's one server name, and the
token of a real ServiceAccount (TokenRequest API; checked by the arbiter through TokenReview); and a raw
call to an arbiter with any token, to see what it answers."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from kubernetes import client

from kube.grpcauth.transport import channel_credentials
from manager.certs import new_serving_cert
from proto.koord.v1 import shardbinder_pb2 as pb
from proto.koord.v1 import shardbinder_pb2_grpc as pb_grpc
from scheduler.shards.security import DEFAULT_SERVER_NAME


def service_account_token(core: Any, namespace: str, name: str) -> str:
    """A token of ServiceAccount namespace/name (created when missing), valid for an hour."""
    with contextlib.suppress(client.exceptions.ApiException):
        core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    req = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
    )
    return str(core.create_namespaced_service_account_token(name, namespace, req).status.token)


@dataclass(frozen=True)
class ShardSecurity:
    lease_namespace: str
    cert: Path
    key: Path
    ca: Path
    token_file: Path
    user: str

    def flags(self, prefix: str = "") -> list[str]:
        return [
            f"--{prefix}shard-lease-namespace={self.lease_namespace}",
            f"--{prefix}shard-tls-cert={self.cert}", f"--{prefix}shard-tls-key={self.key}",
            f"--{prefix}shard-ca={self.ca}", f"--{prefix}shard-token-file={self.token_file}",
            f"--{prefix}shard-allowed-users={self.user}",
        ]  # fmt: skip


@pytest.fixture()
def shard_sec(kube: Any, namespace: str, tmp_path: Path) -> Iterator[ShardSecurity]:
    """The shards' Lease namespace (deleted after), the arbiter's certificate, and the token of the
    ServiceAccount koord-scheduler of ``namespace``, the one identity allowed. Import it into a test
    module to use it."""
    tmp = tmp_path
    core = client.CoreV1Api(kube)
    leases = f"shards-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": leases}})
    try:
        made = new_serving_cert(DEFAULT_SERVER_NAME, [DEFAULT_SERVER_NAME])
        cert, key, ca, token = tmp / "shard.crt", tmp / "shard.key", tmp / "shard-ca.crt", tmp / "shard-token"
        cert.write_bytes(made.cert)
        key.write_bytes(made.key)
        ca.write_bytes(made.ca)
        token.write_text(service_account_token(core, namespace, "koord-scheduler"))
        yield ShardSecurity(
            leases, cert, key, ca, token, f"system:serviceaccount:{namespace}:koord-scheduler"
        )
    finally:
        core.delete_namespace(leases)


def forget_as(sec: ShardSecurity, address: str, token: str | None) -> grpc.StatusCode:
    """The arbiter at ``address``'s answer to a Forget sent with ``token`` over TLS."""
    creds = channel_credentials(sec.ca)
    options = [("grpc.ssl_target_name_override", DEFAULT_SERVER_NAME)]
    metadata = [("authorization", f"Bearer {token}")] if token else []
    with grpc.secure_channel(address, creds, options=options) as ch:
        try:
            pb_grpc.ShardBinderStub(ch).Forget(pb.ForgetRequest(pod_uid="none"), timeout=5, metadata=metadata)
        except grpc.RpcError as e:
            return e.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK
