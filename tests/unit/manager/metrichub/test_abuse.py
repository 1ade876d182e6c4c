"""One abusive client against a real hub on loopback (grpc.aio server, sync clients in threads): a node
flooding 1 MiB reports keeps the stored and history bytes under their bounds and honest nodes get
through; a flood of fresh random tokens costs at most the peer's failure budget in TokenReviews, never
more than `concurrent_reviews` at once, and honest agents (cached tokens) are served throughout. Every
loop is bounded in count and time; no latency is asserted beyond a generous bound (bench/hub_abuse.py
measures p99)."""

from __future__ import annotations

import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent import futures
from typing import Any

import grpc
import pytest

from manager.metrichub.auth import Authorizer, FixedTokenAuthenticator, Identity, TokenReviewAuthenticator
from manager.metrichub.limits import HubLimits
from manager.metrichub.server import serve
from manager.metrichub.store import HubStore
from proto.koord.v1 import metrichub_pb2 as pb
from proto.koord.v1 import metrichub_pb2_grpc as pb_grpc

MiB = 1 << 20


def report(node: str, pad: int = 0) -> pb.NodeMetricReport:
    r = pb.NodeMetricReport(node_name=node)
    r.status.update_time.GetCurrentTime()
    r.status.node_metric.node_usage.resources["cpu"] = "1500m"
    if pad:
        r.status.pods_metric.add(name="p" * pad)
    return r


def call(stub: pb_grpc.MetricHubStub, token: str, r: pb.NodeMetricReport) -> grpc.StatusCode:
    try:
        stub.Report(iter([r]), timeout=10, metadata=(("authorization", f"Bearer {token}"),))
    except grpc.RpcError as e:
        return e.code()
    return grpc.StatusCode.OK


class Tally(Counter[grpc.StatusCode]):
    """A Counter the client threads add to under a lock."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()

    def add(self, code: grpc.StatusCode) -> None:
        with self.lock:
            self[code] += 1


def run_for(seconds: float, max_rounds: int, body: Callable[[], object]) -> int:
    """Calls body() until `seconds` passed or `max_rounds` calls were made; returns the count."""
    deadline = time.monotonic() + seconds
    n = 0
    while n < max_rounds and time.monotonic() < deadline:
        body()
        n += 1
    return n


@pytest.fixture()
def channel_to() -> Iterator[Callable[[int], grpc.Channel]]:
    channels: list[grpc.Channel] = []

    def make(port: int) -> grpc.Channel:
        ch = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("test.channel", len(channels))])
        channels.append(ch)
        return ch

    yield make
    for ch in channels:
        ch.close()


def test_a_node_flooding_1mib_reports_stays_within_the_bounds(
    channel_to: Callable[[int], grpc.Channel],
) -> None:
    tokens = {"flood": Identity("system:node:flood-0")}
    tokens |= {f"honest-{i}": Identity(f"system:node:honest-{i}") for i in range(5)}
    store = HubStore(history_bytes=8 * MiB)
    server, port = serve(store, authenticator=FixedTokenAuthenticator(tokens), authorizer=Authorizer())
    outcomes, honest = Tally(), Tally()
    peak = [0, 0]
    stop = threading.Event()

    def flooder() -> None:
        stub = pb_grpc.MetricHubStub(channel_to(port))
        big = report("flood-0", MiB - 200)

        def once() -> None:
            outcomes.add(call(stub, "flood", big))
            peak[0], peak[1] = max(peak[0], store.stored_bytes), max(peak[1], store.history_bytes)

        run_for(4.0, 400, lambda: None if stop.is_set() else once())

    def agent(i: int) -> None:
        stub = pb_grpc.MetricHubStub(channel_to(port))

        def once() -> None:
            honest.add(call(stub, f"honest-{i}", report(f"honest-{i}")))
            time.sleep(0.5)

        run_for(4.0, 8, once)

    try:
        with futures.ThreadPoolExecutor(9) as pool:
            done = [pool.submit(flooder) for _ in range(4)] + [pool.submit(agent, i) for i in range(5)]
            for f in done:
                f.result(timeout=60)
    finally:
        stop.set()
        assert server.stop(grace=None).wait(5)
    assert set(honest) == {grpc.StatusCode.OK} and honest[grpc.StatusCode.OK] >= 5
    assert outcomes[grpc.StatusCode.RESOURCE_EXHAUSTED] > 0 and store.refused["rate_limited"] > 0
    assert 1 <= outcomes[grpc.StatusCode.OK] <= 3  # 20 tokens, 16 per report, 2 refilled a second
    assert peak[0] <= MiB + 64 * 1024 and store.stored_bytes <= MiB + 64 * 1024
    assert peak[1] <= 8 * MiB and store.history_bytes <= 8 * MiB


class SlowReview:
    """A fake TokenReview: `latency` seconds per call; tokens "honest-<i>" are node identities."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()

    def __call__(self, token: str) -> Mapping[str, Any]:
        with self._lock:
            self.calls += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            time.sleep(self.latency)
        finally:
            with self._lock:
                self.in_flight -= 1
        if token.startswith("honest-"):
            return {"authenticated": True, "user": {"username": f"system:node:{token}"}}
        return {"authenticated": False}


def token_flood(
    channel_to: Callable[[int], grpc.Channel], limits: HubLimits, review: SlowReview
) -> tuple[HubStore, Counter[grpc.StatusCode], list[float], float]:
    """Five honest agents (cached once) report while 16 threads send fresh random tokens; returns the
    store, the flood's outcomes, the honest calls' latencies and the flood's duration."""
    store = HubStore()
    server, port = serve(
        store, authenticator=TokenReviewAuthenticator(review), authorizer=Authorizer(), limits=limits
    )
    outcomes = Tally()
    latencies: list[float] = []
    try:
        stubs = [pb_grpc.MetricHubStub(channel_to(port)) for _ in range(4)]
        for i in range(5):  # first contact: one review each, then cached
            assert call(stubs[0], f"honest-{i}", report(f"honest-{i}")) == grpc.StatusCode.OK
        calls_before = review.calls

        def flooder(k: int) -> None:
            stub = stubs[k % len(stubs)]
            run_for(3.0, 300, lambda: outcomes.add(call(stub, secrets.token_hex(16), report("x"))))

        def agent(i: int) -> None:
            def once() -> None:
                t0 = time.monotonic()
                assert call(stubs[i % len(stubs)], f"honest-{i}", report(f"honest-{i}")) == grpc.StatusCode.OK
                latencies.append(time.monotonic() - t0)
                time.sleep(0.5)

            run_for(3.0, 6, once)

        t0 = time.monotonic()
        with futures.ThreadPoolExecutor(21) as pool:
            done = [pool.submit(flooder, k) for k in range(16)] + [pool.submit(agent, i) for i in range(5)]
            for f in done:
                f.result(timeout=60)
        elapsed = time.monotonic() - t0
        review.calls -= calls_before
    finally:
        assert server.stop(grace=None).wait(5)
    return store, outcomes, latencies, elapsed


def test_a_token_flood_costs_at_most_the_peers_failure_budget(
    channel_to: Callable[[int], grpc.Channel],
) -> None:
    limits = HubLimits()
    review = SlowReview(0.05)
    store, outcomes, latencies, elapsed = token_flood(channel_to, limits, review)
    assert len(latencies) >= 5 and max(latencies) < 2.0  # generous: p99 is bench/hub_abuse.py's
    # Every flooder shares the peer 127.0.0.1: its bucket, plus what was in flight when it emptied.
    budget = limits.auth_failure_burst + limits.auth_failure_rate * elapsed + limits.concurrent_reviews
    assert review.calls <= budget
    assert review.max_in_flight <= limits.concurrent_reviews
    assert outcomes[grpc.StatusCode.RESOURCE_EXHAUSTED] > outcomes[grpc.StatusCode.UNAUTHENTICATED]
    assert store.auth_refused["peer_rate_limited"] == outcomes[grpc.StatusCode.RESOURCE_EXHAUSTED]


def test_over_the_review_cap_a_call_is_refused_at_once(channel_to: Callable[[int], grpc.Channel]) -> None:
    limits = HubLimits(auth_failure_burst=1e9)  # no peer limit: only the cap stands
    review = SlowReview(0.2)
    store, outcomes, latencies, _ = token_flood(channel_to, limits, review)
    assert review.max_in_flight <= limits.concurrent_reviews
    assert outcomes[grpc.StatusCode.UNAVAILABLE] > 0 and store.auth_refused["reviews_busy"] > 0
    assert len(latencies) >= 5 and max(latencies) < 2.0


def test_negative_answers_never_push_positive_ones_out() -> None:
    review = SlowReview(0.0)
    auth = TokenReviewAuthenticator(review, max_entries=10, max_negative_entries=10)
    assert auth.authenticate("honest-1") == Identity("system:node:honest-1")
    for _ in range(100):
        assert auth.authenticate(secrets.token_hex(8)) is None
    calls = review.calls
    assert auth.lookup("honest-1") == Identity("system:node:honest-1")
    bad = secrets.token_hex(8)
    assert auth.authenticate(bad) is None and auth.lookup(bad) is None  # cached negative
    assert review.calls == calls + 1
