"""kube.grpcauth's blocking gate, as the threaded shard arbiter runs it (docs/shards.md#security): the
caches answer first, a review takes one of the peer's failure tokens (given back when the token proves
valid or the API server cannot answer), a peer out of tokens is RESOURCE_EXHAUSTED without a review,
reviews beyond the cap are UNAVAILABLE at once; the same steps as the hub's asyncio form. And the token
file a client sends."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from kube.grpcauth.gate import AuthGate, GateLimits
from kube.grpcauth.limits import Counts, RefusedError
from kube.grpcauth.tokens import Identity, TokenReviewAuthenticator
from kube.grpcauth.transport import TokenFile

PEER = "ipv4:10.0.0.7:5000"


def gate(review: Any, **limits: Any) -> AuthGate:
    return AuthGate(
        TokenReviewAuthenticator(review), GateLimits(**{"auth_failure_burst": 2.0, **limits}), None, Counts()
    )


def valid(token: str) -> Mapping[str, Any]:
    return {"authenticated": token == "good", "user": {"username": "u" if token == "good" else ""}}


def refusal(g: AuthGate, token: str) -> tuple[str, str]:
    with pytest.raises(RefusedError) as e:
        g.identity_blocking(token, PEER)
    return e.value.code, e.value.reason


def test_reviews_are_cached_and_failures_charged_per_peer() -> None:
    g = gate(valid, auth_failure_rate=0.0)
    assert g.identity_blocking("good", PEER) == Identity("u")
    assert g.identity_blocking("good", PEER) == Identity("u") and g.reviews == 1  # cached
    assert refusal(g, "") == ("UNAUTHENTICATED", "missing_token")
    assert refusal(g, "bad1") == ("UNAUTHENTICATED", "invalid_token")
    assert refusal(g, "bad1") == ("UNAUTHENTICATED", "invalid_token") and g.reviews == 2  # negative cache
    assert refusal(g, "bad2") == ("UNAUTHENTICATED", "invalid_token")  # the peer's second failure
    assert refusal(g, "bad3") == ("RESOURCE_EXHAUSTED", "peer_rate_limited") and g.reviews == 3
    assert g.identity_blocking("good", PEER) == Identity("u")  # a cached valid token still passes
    assert g.identity_blocking("good", "ipv4:10.0.0.8:1") == Identity("u")
    assert g.refused.snapshot() == {
        "missing_token": 1, "invalid_token": 3, "peer_rate_limited": 1,
    }  # fmt: skip


def test_reviews_beyond_the_cap_are_refused_at_once_and_outages_cost_no_failure_token() -> None:
    entered, release = threading.Event(), threading.Event()

    def slow(token: str) -> Mapping[str, Any]:
        entered.set()
        assert release.wait(5)
        return valid(token)

    g = gate(slow, concurrent_reviews=1)
    t = threading.Thread(target=g.identity_blocking, args=("good", PEER))
    t.start()
    try:
        assert entered.wait(5)
        assert refusal(g, "other") == ("UNAVAILABLE", "reviews_busy")
    finally:
        release.set()
        t.join()
    assert g.in_flight == 0

    def down(token: str) -> Mapping[str, Any]:
        raise OSError("connection refused")

    g = gate(down, auth_failure_rate=0.0)
    for _ in range(4):  # more than the burst: an outage is not the caller's failure
        assert refusal(g, "good") == ("UNAVAILABLE", "auth_unavailable")


def test_token_file_is_read_on_every_call(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("one\n")
    tf = TokenFile(path, "shard token file")
    assert tf.metadata() == [("authorization", "Bearer one")]
    path.write_text("two")
    assert tf.metadata() == [("authorization", "Bearer two")]
    path.write_text("")
    assert tf.metadata() == []
    path.unlink()
    with pytest.raises(RuntimeError, match=r"shard token file .*token: "):
        tf.metadata()
