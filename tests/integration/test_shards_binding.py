"""Optimistic binds through the arbiter against the real API server (docs/shards.md#transport): two
shards race to bind twelve 1-cpu pods onto the same 8-cpu node, each through ArbitratedBinder over the
real APIBinder; the arbiter (served over gRPC from a ledger built from the API server's nodes and pods)
lets exactly eight through, the API server shows exactly those eight bound, the other four are refused
with Fit's reason and stay pending; once the ledger sees the binds as its informer would, nothing is
left accepted-but-unseen. The arbiter serves TLS and authenticates the shards by TokenReview of their
real ServiceAccount token (docs/shards.md#security); a shard with another ServiceAccount's token is
refused."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from kube.grpcauth.gate import AuthGate, GateLimits
from kube.grpcauth.kubeauth import tokenreview_authenticator
from kube.grpcauth.limits import Counts
from kube.grpcauth.transport import TokenAuthInterceptor, TokenFile, channel_credentials, server_credentials
from scheduler.framework.status import Status
from scheduler.gateway import APIBinder
from scheduler.shards.client import ArbiterClient, ArbitratedBinder, CoalescingArbiter
from scheduler.shards.host import ArbiterHost
from scheduler.shards.security import DEFAULT_SERVER_NAME
from tests.integration.podhelpers import make_pod
from tests.integration.shardsecurity import ShardSecurity, service_account_token
from tests.integration.shardsecurity import shard_sec as shard_sec  # the fixture

pytestmark = pytest.mark.apiserver


def test_two_shards_never_double_book_a_node(
    kube: Any, namespace: str, cluster: dict[str, Any], shard_sec: ShardSecurity
) -> None:
    core: Any = cluster["core"]
    target = cluster["names"]["hot"]  # 8 cpu allocatable
    for i in range(12):
        make_pod(core, namespace, f"p{i}", cpu="1")
    pods = [core.api_client.sanitize_for_serialization(p) for p in core.list_namespaced_pod(namespace).items]
    nodes = [core.api_client.sanitize_for_serialization(n) for n in core.list_node().items]

    published: list[str] = []
    auth_refused = Counts()
    gate = AuthGate(tokenreview_authenticator(kube), GateLimits(), None, auth_refused)

    def security() -> tuple[Any, list[Any]]:
        creds = server_credentials(shard_sec.cert, shard_sec.key)
        return creds, [TokenAuthInterceptor(gate, {shard_sec.user}, service="the shard arbiter")]

    host = ArbiterHost(
        published.append, listen="127.0.0.1:0", advertise="127.0.0.1", warmup=0, security=security
    )

    def client_with(token_file: Any) -> ArbiterClient:
        return ArbiterClient(
            lambda: published[-1], credentials=lambda: channel_credentials(shard_sec.ca),
            server_name=DEFAULT_SERVER_NAME, metadata=TokenFile(token_file).metadata,
        )  # fmt: skip

    host.start(nodes, core.api_client.sanitize_for_serialization(core.list_pod_for_all_namespaces().items))
    results: dict[str, Status] = {}
    lock = threading.Lock()
    clients: list[ArbiterClient | CoalescingArbiter] = [
        CoalescingArbiter(client_with(shard_sec.token_file)),
        client_with(shard_sec.token_file),
    ]
    stranger_token = shard_sec.token_file.with_name("stranger-token")
    stranger_token.write_text(service_account_token(core, namespace, "stranger"))
    clients.append(client_with(stranger_token))

    def shard(k: int) -> None:
        binder = ArbitratedBinder(APIBinder(kube), clients[k], f"shard-{k}")
        for p in pods[k::2]:
            st = binder.bind(p, target)
            with lock:
                results[p["metadata"]["name"]] = st

    try:
        st = ArbitratedBinder(APIBinder(kube), clients[2], "shard-x").bind(pods[0], target)
        assert not st.is_success() and "StatusCode.PERMISSION_DENIED" in st.message(), st.message()
        assert auth_refused.snapshot() == {"not_allowed": 1}
        threads = [threading.Thread(target=shard, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        ok = sorted(n for n, st in results.items() if st.is_success())
        refused = {n: st.message() for n, st in results.items() if not st.is_success()}
        assert len(ok) == 8 and len(refused) == 4
        why = f"rejected by the shard arbiter: node {target}: Insufficient cpu"
        for name, msg in refused.items():
            assert msg == f"binding {namespace}/{name} to {target}: {why}"
        on_node = sorted(
            p.metadata.name for p in core.list_namespaced_pod(namespace).items if p.spec.node_name == target
        )
        assert on_node == ok
        led = host.ledger
        assert led is not None and led.pending() == 8
        for p in core.list_namespaced_pod(namespace).items:  # what the arbiter's informer would deliver
            led.set_pod(core.api_client.sanitize_for_serialization(p))
        assert led.pending() == 0
        row = led.row(target)
        assert row is not None and row.requested["cpu"] == 8000
        assert auth_refused.snapshot() == {"not_allowed": 1}  # the shards were all admitted
    finally:
        for c in clients:
            c.close()
        host.stop()
