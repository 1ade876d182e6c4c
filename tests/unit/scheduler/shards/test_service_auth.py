"""The shard arbiter's TLS and authentication (docs/shards.md#security): over TLS with the CA and the one
server name, a shard whose token's TokenReview identity is allowed binds; no token is UNAUTHENTICATED, an
invalid one too, an identity not allowed is PERMISSION_DENIED; a client that trusts another CA, checks
another name or dials plaintext never reaches the service. Built by Sharding from its options, the
hosted arbiter serves TLS and authenticates through TokenReview."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import grpc
import pytest

from kube.grpcauth.gate import AuthGate, GateLimits
from kube.grpcauth.limits import Counts
from kube.grpcauth.tokens import TokenReviewAuthenticator
from kube.grpcauth.transport import TokenAuthInterceptor, TokenFile, channel_credentials, server_credentials
from manager.certs import new_serving_cert
from proto.koord.v1 import shardbinder_pb2 as pb
from proto.koord.v1 import shardbinder_pb2_grpc as pb_grpc
from scheduler.shards import wiring
from scheduler.shards.arbiter import request_of
from scheduler.shards.client import ArbiterClient, ArbiterUnavailableError
from scheduler.shards.ledger import Ledger
from scheduler.shards.security import DEFAULT_ALLOWED_USERS, DEFAULT_SERVER_NAME, ShardSecurity
from scheduler.shards.service import ShardBinderServer, serve
from scheduler.shards.wiring import Sharding
from tests.unit.scheduler.shards.test_heartbeat import FakeLeases
from tests.unit.scheduler.shards.test_ledger import node, pod
from tests.unit.scheduler.shards.test_wiring import options

SCHEDULER_SA, MANAGER_SA = DEFAULT_ALLOWED_USERS
USERS = {"sched-tok": SCHEDULER_SA, "mgr-tok": MANAGER_SA, "other-tok": "system:serviceaccount:default:x"}


class Reviews:
    """A TokenReview stand-in: the tokens of USERS are authenticated as their user."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, token: str) -> Mapping[str, Any]:
        self.calls += 1
        user = USERS.get(token)
        return {"authenticated": user is not None, "user": {"username": user or ""}}


def certs(tmp: Path, name: str = "shard") -> ShardSecurity:
    made = new_serving_cert(DEFAULT_SERVER_NAME, [DEFAULT_SERVER_NAME])
    (tmp / f"{name}.crt").write_bytes(made.cert)
    (tmp / f"{name}.key").write_bytes(made.key)
    (tmp / f"{name}-ca.crt").write_bytes(made.ca)
    (tmp / "token").write_text("sched-tok\n")
    return ShardSecurity(tmp / f"{name}.crt", tmp / f"{name}.key", tmp / f"{name}-ca.crt", tmp / "token")


@pytest.fixture()
def secured(tmp_path: Path) -> Iterator[tuple[ShardSecurity, ShardBinderServer, Counts]]:
    sec = certs(tmp_path)
    ledger = Ledger(warmup=0)
    ledger.set_node(node("n0", cpu="4"))
    refused = Counts()
    gate = AuthGate(TokenReviewAuthenticator(Reviews()), GateLimits(), None, refused)
    interceptor = TokenAuthInterceptor(gate, sec.allowed_users, service="the shard arbiter")
    server = serve(
        ledger, credentials=server_credentials(sec.cert_file, sec.key_file), interceptors=[interceptor]
    )
    try:
        yield sec, server, refused
    finally:
        server.stop(None)


def client_for(sec: ShardSecurity, port: int, token: str | None = "sched-tok", **kw: Any) -> ArbiterClient:
    token_file = sec.token_file.with_name(f"token-{token}")
    token_file.write_text(token or "")
    return ArbiterClient(
        lambda: f"127.0.0.1:{port}",
        credentials=kw.get("credentials", lambda: channel_credentials(sec.ca_file)),
        server_name=kw.get("server_name", sec.server_name),
        metadata=TokenFile(token_file).metadata,
    )


def test_an_allowed_identity_binds(secured: Any) -> None:
    sec, server, refused = secured
    for token in ("sched-tok", "mgr-tok"):
        c = client_for(sec, server.port, token)
        try:
            assert c.bind(request_of(pod(f"p-{token}", f"u-{token}", cpu="1"), "n0", "s1")).accepted
            assert c.forget(f"u-{token}", "s1")
        finally:
            c.close()
    assert refused.snapshot() == {}


@pytest.mark.parametrize(
    ("token", "code", "details", "reason"),
    [
        (None, "UNAUTHENTICATED", "missing 'authorization: Bearer <token>'", "missing_token"),
        ("forged", "UNAUTHENTICATED", "invalid bearer token", "invalid_token"),
        (
            "other-tok", "PERMISSION_DENIED",
            "'system:serviceaccount:default:x' may not call the shard arbiter", "not_allowed",
        ),
    ],
)  # fmt: skip
def test_callers_without_an_allowed_identity_are_refused(
    secured: Any, token: str | None, code: str, details: str, reason: str
) -> None:
    sec, server, refused = secured
    c = client_for(sec, server.port, token)
    try:
        with pytest.raises(ArbiterUnavailableError) as e:
            c.bind(request_of(pod("a", "ua"), "n0", "s1"))
        assert str(e.value) == f"shard arbiter 127.0.0.1:{server.port}: StatusCode.{code}: {details}"
        with pytest.raises(ArbiterUnavailableError, match=code):
            c.forget("ua", "s1")
    finally:
        c.close()
    assert refused[reason] == 2


def test_bad_tls_never_reaches_the_service(secured: Any, tmp_path: Path) -> None:
    sec, server, refused = secured
    (tmp_path / "other").mkdir()
    other = certs(tmp_path / "other", "other")
    cases = [
        client_for(sec, server.port, credentials=lambda: channel_credentials(other.ca_file)),  # foreign CA
        client_for(sec, server.port, server_name="koord-manager-hub"),  # a name the cert does not carry
    ]
    for c in cases:
        try:
            with pytest.raises(ArbiterUnavailableError, match=r"StatusCode\.UNAVAILABLE"):
                c.bind(request_of(pod("a", "ua"), "n0", "s1"))
        finally:
            c.close()
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as ch:  # plaintext to a TLS port
        with pytest.raises(grpc.RpcError) as e:
            pb_grpc.ShardBinderStub(ch).Forget(
                pb.ForgetRequest(pod_uid="u"), timeout=2, metadata=[("authorization", "Bearer sched-tok")]
            )
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    assert refused.snapshot() == {}  # none of them got as far as authentication


def test_sharding_serves_tls_and_authenticates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reviews = Reviews()
    monkeypatch.setattr(wiring, "tokenreview_authenticator", lambda api: TokenReviewAuthenticator(reviews))
    sec = certs(tmp_path)
    sharding = Sharding(FakeLeases(), options(security=sec))
    sharding.host.warmup = 0
    stop = threading.Event()
    sharding.attach(lambda: ([node("n0", cpu="4")], []), lambda m: (0, 0), stop)
    sharding.started_leading()
    try:
        port = int(sharding.host.address.rsplit(":", 1)[1])
        remote = sharding._remote.client
        remote._resolve = lambda: f"127.0.0.1:{port}"  # as the heartbeat would find it
        assert remote.bind(request_of(pod("a", "ua"), "n0", "s1")).accepted
        stranger = client_for(sec, port, "other-tok")
        try:
            with pytest.raises(ArbiterUnavailableError, match="PERMISSION_DENIED"):
                stranger.bind(request_of(pod("b", "ub"), "n0", "s1"))
        finally:
            stranger.close()
        assert reviews.calls == 2
        assert sharding.auth_refused.snapshot() == {"not_allowed": 1}
    finally:
        stop.set()
        sharding.close()
