"""The ShardBinder over gRPC on loopback (docs/shards.md#transport): binds from several shard clients
are decided by one ledger; a rejection or an unreachable arbiter fails the scheduler's bind, and an API
bind failure after acceptance gives the room back."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from apis.kubeobjects import Pod
from scheduler.framework.status import Code, Status
from scheduler.shards.arbiter import BindRequest, request_of
from scheduler.shards.client import (
    ArbiterClient,
    ArbiterUnavailableError,
    ArbitratedBinder,
    CoalescingArbiter,
    LocalFirstArbiter,
)
from scheduler.shards.host import ArbiterHost
from scheduler.shards.ledger import Ledger
from scheduler.shards.service import ShardBinderServer, from_message, serve, to_message
from tests.unit.scheduler.shards.test_ledger import CHECKED, node, pod


@pytest.fixture()
def arbiter() -> Iterator[tuple[Ledger, ShardBinderServer]]:
    ledger = Ledger()
    for i in range(3):
        ledger.set_node(node(f"n{i}", cpu="2"))
    server = serve(ledger)
    try:
        yield ledger, server
    finally:
        server.stop(None)


@pytest.fixture()
def client(arbiter: tuple[Ledger, ShardBinderServer]) -> Iterator[ArbiterClient]:
    c = ArbiterClient(lambda: f"127.0.0.1:{arbiter[1].port}")
    try:
        yield c
    finally:
        c.close()


class FakeAPI:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.bound: list[tuple[str, str]] = []

    def bind(self, pod: Pod, node: str) -> Status:
        if self.fail:
            return Status.error("binding: 409 Conflict", plugin="DefaultBinder")
        self.bound.append((pod["metadata"]["name"], node))
        return Status.success()


def test_message_round_trip() -> None:
    req = BindRequest("u", "ns/p", "n", {"cpu": 1500, "memory": 1 << 40}, CHECKED, "s1")
    assert from_message(to_message(req)) == req


def test_binds_from_two_shards_share_one_ledger(arbiter: Any, client: ArbiterClient) -> None:
    other = ArbiterClient(lambda: f"127.0.0.1:{arbiter[1].port}")
    try:
        assert client.bind(request_of(pod("a", "ua"), "n0", "s1")).accepted
        assert other.bind(request_of(pod("b", "ub"), "n0", "s2")).accepted
        d = other.bind(request_of(pod("c", "uc"), "n0", "s2"))
        assert not d.accepted and d.reason == "node n0: Insufficient cpu"
        batch = client.bind_batch([request_of(pod(f"p{i}", f"u{i}"), "n1", "s1") for i in range(3)])
        assert [d.accepted for d in batch] == [True, True, False]
        assert client.forget("u0", "s1") and not client.forget("u0", "s1")
    finally:
        other.close()


def test_arbitrated_binder_binds_after_acceptance(arbiter: Any, client: ArbiterClient) -> None:
    api = FakeAPI()
    binder = ArbitratedBinder(api, client, "s1")
    assert binder.bind(pod("a", "ua"), "n2").is_success()
    assert binder.bind(pod("b", "ub"), "n2").is_success()
    st = binder.bind(pod("c", "uc"), "n2")
    assert st.code == Code.ERROR and st.plugin == "DefaultBinder"
    assert st.message() == "binding ns/c to n2: rejected by the shard arbiter: node n2: Insufficient cpu"
    assert api.bound == [("a", "n2"), ("b", "n2")]
    assert binder.rejections == 1


def test_a_failed_api_bind_gives_the_room_back(arbiter: Any, client: ArbiterClient) -> None:
    ledger: Ledger = arbiter[0]
    st = ArbitratedBinder(FakeAPI(fail=True), client, "s1").bind(pod("a", "ua", cpu="2"), "n0")
    assert not st.is_success()
    assert ledger.pending() == 0
    assert ArbitratedBinder(FakeAPI(), client, "s1").bind(pod("b", "ub", cpu="2"), "n0").is_success()


def test_no_or_unreachable_arbiter_fails_the_bind() -> None:
    api = FakeAPI()
    nowhere = ArbiterClient(lambda: "")
    st = ArbitratedBinder(api, nowhere, "s1").bind(pod("a", "ua"), "n0")
    assert st.code == Code.ERROR and "no shard arbiter is known" in st.message()
    dead = ArbiterClient(lambda: "127.0.0.1:1", timeout=0.5)
    try:
        with pytest.raises(ArbiterUnavailableError, match=r"127\.0\.0\.1:1"):
            dead.bind(request_of(pod("a", "ua"), "n0"))
        assert not ArbitratedBinder(api, dead, "s1").bind(pod("a", "ua"), "n0").is_success()
    finally:
        dead.close()
    assert api.bound == []


def test_concurrent_shards_over_grpc_never_overcommit(arbiter: Any) -> None:
    port = arbiter[1].port
    accepted: list[BindRequest] = []
    lock = threading.Lock()

    def shard(k: int) -> None:
        c = ArbiterClient(lambda: f"127.0.0.1:{port}")
        try:
            for i in range(20):
                r = request_of(pod(f"p{k}-{i}", f"u{k}-{i}", cpu="300m"), f"n{i % 3}", f"s{k}")
                if c.bind(r).accepted:
                    with lock:
                        accepted.append(r)
        finally:
            c.close()

    threads = [threading.Thread(target=shard, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for n in ("n0", "n1", "n2"):
        assert sum(r.requests["cpu"] for r in accepted if r.node == n) <= 2000
    assert len(accepted) == 3 * 6  # 6 x 300m fit in 2 cpu on each node


def test_coalescing_arbiter_shares_round_trips(arbiter: Any, client: ArbiterClient) -> None:
    co = CoalescingArbiter(client, max_batch=16)
    results: list[bool] = []
    lock = threading.Lock()

    def shard(k: int) -> None:
        for i in range(25):
            d = co.bind(request_of(pod(f"p{k}-{i}", f"u{k}-{i}", cpu="10m", memory="1Mi"), f"n{i % 3}", "s"))
            with lock:
                results.append(d.accepted)

    threads = [threading.Thread(target=shard, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 200
    assert co.batches <= 200
    co.close()
    with pytest.raises(ArbiterUnavailableError, match="closed"):
        co.bind(request_of(pod("late", "ul"), "n0"))


def test_coalescing_arbiter_passes_errors_to_every_caller() -> None:
    co = CoalescingArbiter(ArbiterClient(lambda: "127.0.0.1:1", timeout=0.3))
    try:
        with pytest.raises(ArbiterUnavailableError):
            co.bind(request_of(pod("a", "ua"), "n0"))
        st = ArbitratedBinder(FakeAPI(), co, "s1").bind(pod("a", "ua"), "n0")
        assert st.code == Code.ERROR
    finally:
        co.close()


def test_arbiter_host_serves_while_leading_and_withdraws() -> None:
    published: list[str] = []
    host = ArbiterHost(published.append, listen="127.0.0.1:0", advertise="127.0.0.1", warmup=0)
    host.set_pod(pod("early", "ue", node_name="n0"))  # not leading: ignored
    address = host.start([node("n0", cpu="2")], [pod("x", "ux", node_name="n0")])
    assert published == [address] and address == host.address
    c = ArbiterClient(lambda: published[-1])
    try:
        assert c.bind(request_of(pod("a", "ua"), "n0", "s")).accepted  # x's 1 cpu + a's 1 cpu
        assert not c.bind(request_of(pod("b", "ub"), "n0", "s")).accepted
        host.remove_pod(pod("x", "ux", node_name="n0"))
        assert c.bind(request_of(pod("b", "ub"), "n0", "s")).accepted
        host.set_node(node("n1"))
        assert c.bind(request_of(pod("c", "uc"), "n1", "s")).accepted
        host.remove_node("n1")
        assert not c.bind(request_of(pod("d", "ud"), "n1", "s")).accepted
    finally:
        c.close()
        host.stop()
    assert published[-1] == "" and host.ledger is None and host.address == ""
    host.stop()  # idempotent
    assert published.count("") == 1


def test_local_first_arbiter_skips_grpc_on_the_host() -> None:
    ledger = Ledger()
    ledger.set_node(node("n0", cpu="1"))
    hosted: list[Ledger | None] = [ledger]
    remote = ArbiterClient(lambda: "127.0.0.1:1", timeout=0.3)  # unreachable: must not be asked
    arb = LocalFirstArbiter(lambda: hosted[0], remote)
    try:
        assert arb.bind(request_of(pod("a", "ua"), "n0", "s")).accepted
        assert not arb.bind(request_of(pod("b", "ub"), "n0", "s")).accepted
        assert arb.forget("ua") and ledger.pending() == 0
        hosted[0] = None  # no longer the host: remote, which fails here
        with pytest.raises(ArbiterUnavailableError):
            arb.bind(request_of(pod("b", "ub"), "n0", "s"))
    finally:
        remote.close()
