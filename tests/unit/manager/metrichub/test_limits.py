"""The hub's limit decisions, on an injected clock: token buckets refill continuously up to their burst,
a report costs a token per started 64 KiB, the bucket map forgets its least recently used key first,
peers are keyed by address without the port, the tarpit holds at most its maximum, and the limits
refuse a burst that could never pass a largest report; then AuthGate's order of refusals."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from concurrent import futures
from typing import Any

import pytest

from apis.reportlimits import MAX_REPORT_BYTES
from kube.grpcauth.gate import AuthGate
from kube.grpcauth.limits import BucketMap, Counts, RefusedError, Tarpit, TokenBucket, peer_host
from kube.grpcauth.tokens import Identity, TokenReviewAuthenticator
from manager.metrichub.limits import REPORT_TOKEN_BYTES, HubLimits, report_cost


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_refills_up_to_its_burst() -> None:
    b = TokenBucket(burst=3.0, now=0.0)
    assert [b.take(1, rate=2.0, burst=3.0, now=0.0) for _ in range(4)] == [0.0, 0.0, 0.0, 0.5]
    assert b.take(1, 2.0, 3.0, now=0.5) == 0.0  # one token back after half a second
    assert b.take(2, 2.0, 3.0, now=100.0) == 0.0 and b.tokens == 1.0  # never more than the burst


def test_report_cost_is_one_token_per_started_64_kib() -> None:
    assert [report_cost(n) for n in (0, 1, REPORT_TOKEN_BYTES, REPORT_TOKEN_BYTES + 1)] == [1, 1, 1, 2]
    assert report_cost(MAX_REPORT_BYTES) == 16 <= HubLimits().report_burst
    with pytest.raises(ValueError, match="below the cost of a largest report"):
        HubLimits(report_burst=10.0)


def test_the_bucket_map_keeps_its_most_recent_keys() -> None:
    clock = Clock()
    m = BucketMap(rate=1.0, burst=2.0, max_keys=2, clock=clock)
    assert m.take("a", 2) == 0.0 and m.take("a") == 1.0  # a is empty: a second to wait
    assert m.wait("a") == 1.0 and m.wait("never-seen") == 0.0
    m.take("b")
    m.take("c")  # a is the least recently used: forgotten
    assert len(m) == 2 and m.take("a") == 0.0
    m.charge("d", 5.0)  # a fresh key: 2 tokens, then 5 taken: below zero
    assert m.wait("d") == pytest.approx(4.0)  # 4 tokens to one at 1 per second
    m.charge("d", -100.0)  # given back, never past the burst
    assert m.take("d", 2) == 0.0 and m.take("d") > 0


def test_peers_are_keyed_by_address() -> None:
    assert peer_host("ipv4:10.0.0.7:51234") == "ipv4:10.0.0.7"
    assert peer_host("ipv6:[::1]:5000") == "ipv6:[::1]"
    assert peer_host("unix:/tmp/sock") == "unix:/tmp/sock"


def test_the_tarpit_holds_at_most_its_maximum() -> None:
    async def scenario() -> tuple[int, float]:
        pit = Tarpit(delay=0.2, max_held=2)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        held = [asyncio.create_task(pit.hold()) for _ in range(2)]
        await asyncio.sleep(0)
        peak = pit.held
        await pit.hold()  # the third is answered at once
        quick = loop.time() - t0
        await asyncio.gather(*held)
        return peak, quick

    peak, quick = asyncio.run(scenario())
    assert peak == 2 and quick < 0.1


class Review:
    def __init__(self, gate: threading.Event | None = None, down: bool = False) -> None:
        self.calls = 0
        self.gate = gate
        self.down = down

    def __call__(self, token: str) -> Mapping[str, Any]:
        self.calls += 1
        if self.gate is not None:
            self.gate.wait(5.0)
        if self.down:
            raise ConnectionError("api server down")
        ok = token.startswith("good")
        return {"authenticated": ok, "user": {"username": "system:node:n"} if ok else {}}


def refused(gate: AuthGate, token: str, peer: str = "ipv4:10.0.0.1:1") -> RefusedError:
    with pytest.raises(RefusedError) as e:
        asyncio.run(gate.identity(token, peer))
    return e.value


def gate_with(review: Review, pool: futures.Executor, **limits: Any) -> AuthGate:
    lim = HubLimits(refusal_delay=0.0, **limits)
    return AuthGate(TokenReviewAuthenticator(review), lim, pool, Counts())


def test_the_gate_answers_cached_tokens_and_rations_reviews_per_peer() -> None:
    review = Review()
    with futures.ThreadPoolExecutor(2) as pool:
        gate = gate_with(review, pool, auth_failure_burst=2.0, auth_failure_rate=0.001)
        assert refused(gate, "").reason == "missing_token"
        assert asyncio.run(gate.identity("good-1", "ipv4:10.0.0.1:1")) == Identity("system:node:n")
        assert asyncio.run(gate.identity("good-1", "ipv4:10.0.0.9:1")).user == "system:node:n"  # cached
        assert refused(gate, "bad-1").reason == "invalid_token"
        assert refused(gate, "bad-1").reason == "invalid_token"  # cached negative: no review
        assert refused(gate, "bad-2").reason == "invalid_token"
        assert review.calls == 3
        e = refused(gate, "bad-3", "ipv4:10.0.0.1:2")  # same address, other port: the budget is spent
        assert (e.code, e.reason) == ("RESOURCE_EXHAUSTED", "peer_rate_limited") and review.calls == 3
        assert asyncio.run(gate.identity("good-2", "ipv4:10.0.0.2:1")).user == "system:node:n"
        assert gate.refused.snapshot() == {"missing_token": 1, "invalid_token": 3, "peer_rate_limited": 1}


def test_the_gate_refuses_past_its_review_cap_at_once() -> None:
    release = threading.Event()
    review = Review(gate=release)
    with futures.ThreadPoolExecutor(4) as pool:
        gate = gate_with(review, pool, concurrent_reviews=1)

        async def two() -> tuple[Identity | BaseException, ...]:
            first = asyncio.create_task(gate.identity("good-1", "ipv4:10.0.0.1:1"))
            await asyncio.sleep(0.05)
            try:
                await gate.identity("good-2", "ipv4:10.0.0.2:1")
            except RefusedError as e:
                second: Identity | BaseException = e
            release.set()
            return await first, second

        first, second = asyncio.run(two())
    assert first == Identity("system:node:n")
    assert isinstance(second, RefusedError) and (second.code, second.reason) == (
        "UNAVAILABLE",
        "reviews_busy",
    )


def test_an_unreachable_api_server_costs_the_peer_nothing() -> None:
    with futures.ThreadPoolExecutor(1) as pool:
        gate = gate_with(Review(down=True), pool, auth_failure_burst=1.0, auth_failure_rate=0.001)
        for _ in range(3):  # a burst of one: were the token not given back, the second would be limited
            e = refused(gate, "good-1")
            assert (e.code, e.reason) == ("UNAVAILABLE", "auth_unavailable")
            assert "api server down" in e.details
