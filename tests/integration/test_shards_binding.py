"""Optimistic binds through the arbiter against the real API server (docs/shards.md#transport): two
shards race to bind twelve 1-cpu pods onto the same 8-cpu node, each through ArbitratedBinder over the
real APIBinder; the arbiter (served over gRPC from a ledger built from the API server's nodes and pods)
lets exactly eight through, the API server shows exactly those eight bound, the other four are refused
with Fit's reason and stay pending; once the ledger sees the binds as its informer would, nothing is
left accepted-but-unseen."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from scheduler.framework.status import Status
from scheduler.gateway import APIBinder
from scheduler.shards.client import ArbiterClient, ArbitratedBinder, CoalescingArbiter
from scheduler.shards.host import ArbiterHost
from tests.integration.podhelpers import make_pod

pytestmark = pytest.mark.apiserver


def test_two_shards_never_double_book_a_node(kube: Any, namespace: str, cluster: dict[str, Any]) -> None:
    core: Any = cluster["core"]
    target = cluster["names"]["hot"]  # 8 cpu allocatable
    for i in range(12):
        make_pod(core, namespace, f"p{i}", cpu="1")
    pods = [core.api_client.sanitize_for_serialization(p) for p in core.list_namespaced_pod(namespace).items]
    nodes = [core.api_client.sanitize_for_serialization(n) for n in core.list_node().items]

    published: list[str] = []
    host = ArbiterHost(published.append, listen="127.0.0.1:0", advertise="127.0.0.1", warmup=0)
    host.start(nodes, core.api_client.sanitize_for_serialization(core.list_pod_for_all_namespaces().items))
    results: dict[str, Status] = {}
    lock = threading.Lock()
    clients: list[ArbiterClient | CoalescingArbiter] = [
        CoalescingArbiter(ArbiterClient(lambda: published[-1])),
        ArbiterClient(lambda: published[-1]),
    ]

    def shard(k: int) -> None:
        binder = ArbitratedBinder(APIBinder(kube), clients[k], f"shard-{k}")
        for p in pods[k::2]:
            st = binder.bind(p, target)
            with lock:
                results[p["metadata"]["name"]] = st

    try:
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
    finally:
        for c in clients:
            c.close()
        host.stop()
