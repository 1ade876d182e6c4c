"""The arbiter (docs/shards.md#arbiter): NodeResourcesFit's rule on one node over bound and accepted
pods; concurrent binds from several shards never overcommit a node; a pod that fits an empty node is
accepted; accepted pods are counted once, expire, and can be forgotten."""

from __future__ import annotations

import random
import threading
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.snapshot import NodeInfo
from scheduler.shards.arbiter import REASON_UNKNOWN_NODE, BindRequest, decide, request_of
from scheduler.shards.ledger import REASON_WARMING_UP, Ledger

CHECKED = ("cpu", "memory", "ephemeral-storage")


def node(name: str, cpu: str = "4", memory: str = "8Gi", pods: str = "110", **extra: str) -> Any:
    alloc = {"cpu": cpu, "memory": memory, "pods": pods, **extra}
    return {"metadata": {"name": name}, "status": {"allocatable": alloc}}


def pod(name: str, uid: str, cpu: str = "1", memory: str = "1Gi", node_name: str = "", **extra: str) -> Any:
    p: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ns", "uid": uid},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory, **extra}}}]
        },
    }
    if node_name:
        p["spec"]["nodeName"] = node_name
    return p


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_decide_reasons_in_fit_order() -> None:
    row = NodeInfo.of(node("n", cpu="2", memory="1Gi", pods="1"))
    assert decide(row, {"cpu": 1000}, CHECKED) == (True, "")
    assert decide(row, {"cpu": 2001, "memory": 2 << 30}, CHECKED) == (
        False,
        "Insufficient cpu, Insufficient memory",
    )
    assert decide(None, {}, ()) == (False, REASON_UNKNOWN_NODE)
    assert decide(NodeInfo("ghost", {}), {}, ()) == (False, REASON_UNKNOWN_NODE)
    full = NodeInfo.of(node("n", pods="0"))
    assert decide(full, {"cpu": 1}, CHECKED) == (False, "Too many pods")
    # A scalar resource the node lacks: allocatable 0.
    assert decide(row, {"example.com/gpu": 1}, ("cpu", "memory", "ephemeral-storage", "example.com/gpu")) == (
        False,
        "Insufficient example.com/gpu",
    )


def test_decide_wraps_in_int64_as_fit_does() -> None:
    row = NodeInfo.of(node("n", cpu="1"))
    row.requested["cpu"] = 2**63 - 1
    # Go's requested + request wraps negative: Fit lets it through, and so does the arbiter.
    assert decide(row, {"cpu": 1}, CHECKED)[0] is True


def test_request_of_uses_fits_checked_resources() -> None:
    req = request_of(pod("p", "u1", cpu="500m", memory="1Mi"), "n", "shard-a")
    assert (req.uid, req.key, req.node, req.shard) == ("u1", "ns/p", "n", "shard-a")
    assert req.checked == CHECKED
    assert req.requests == {"cpu": 500, "memory": 1 << 20}
    empty = pod("e", "u2")
    empty["spec"]["containers"][0]["resources"] = {}
    assert request_of(empty, "n").checked == ()  # requests nothing: only the pod count is checked


def test_bind_counts_accepted_pods_then_rejects() -> None:
    led = Ledger()
    led.set_node(node("n", cpu="2"))
    assert led.bind(request_of(pod("a", "ua"), "n")).accepted
    assert led.bind(request_of(pod("b", "ub"), "n")).accepted
    d = led.bind(request_of(pod("c", "uc"), "n"))
    assert not d.accepted
    assert d.reason == "node n: Insufficient cpu"
    assert led.pending() == 2


def test_retry_is_idempotent_and_a_move_releases_the_old_node() -> None:
    led = Ledger()
    led.set_node(node("n", cpu="1"))
    led.set_node(node("m", cpu="1"))
    a = pod("a", "ua")
    assert led.bind(request_of(a, "n", "shard-a")).accepted
    assert led.bind(request_of(a, "n", "shard-a")).accepted  # the same pod again: not counted twice
    row = led.row("n")
    assert row is not None and row.requested["cpu"] == 1000 and len(row.pods) == 1
    assert led.bind(request_of(a, "m", "shard-a")).accepted
    row = led.row("n")
    assert row is not None and row.requested.get("cpu", 0) == 0 and not row.pods
    # Another shard (the pod changed owner mid-bind) may not take it elsewhere while it is held.
    d = led.bind(request_of(a, "n", "shard-b"))
    assert not d.accepted and d.reason == "pod ns/a is being bound to m by shard-a"


def test_informer_bound_pod_replaces_the_accepted_one() -> None:
    led = Ledger()
    led.set_node(node("n", cpu="2"))
    a = pod("a", "ua")
    assert led.bind(request_of(a, "n")).accepted
    led.set_pod(pod("a", "ua", node_name="n"))
    row = led.row("n")
    assert row is not None and row.requested["cpu"] == 1000 and led.pending() == 0
    assert led.bind(request_of(a, "n")).accepted  # bound here already: fine
    d = led.bind(request_of(a, "other"))
    assert not d.accepted and d.reason == "pod ns/a is already bound to n"
    terminated = pod("a", "ua", node_name="n")
    terminated["status"] = {"phase": "Succeeded"}
    led.set_pod(terminated)
    row = led.row("n")
    assert row is not None and row.requested.get("cpu", 0) == 0


def test_accepted_pods_expire_and_can_be_forgotten() -> None:
    clock = Clock()
    led = Ledger(ttl=30, clock=clock)
    led.set_node(node("n", cpu="1"))
    assert led.bind(request_of(pod("a", "ua"), "n")).accepted
    assert not led.bind(request_of(pod("b", "ub"), "n")).accepted
    clock.t = 30.0
    assert led.bind(request_of(pod("b", "ub"), "n")).accepted  # a's shard never bound it
    assert led.expired_total == 1
    assert led.forget("ub") and not led.forget("ub")
    assert led.bind(request_of(pod("c", "uc"), "n")).accepted


def test_a_new_arbiter_rejects_during_warmup() -> None:
    clock = Clock()
    led = Ledger(clock=clock, warmup=5)
    led.set_node(node("n"))
    assert led.bind(request_of(pod("a", "ua"), "n")).reason == REASON_WARMING_UP
    clock.t = 5.0
    assert led.bind(request_of(pod("a", "ua"), "n")).accepted


def test_unknown_and_removed_nodes_reject() -> None:
    led = Ledger()
    assert led.bind(request_of(pod("a", "ua"), "n")).reason == "node n: node not found"
    led.set_pod(pod("x", "ux", node_name="n"))  # a pod seen before its node
    assert not led.bind(request_of(pod("a", "ua"), "n")).accepted
    led.set_node(node("n", cpu="2"))
    assert led.bind(request_of(pod("a", "ua"), "n")).accepted  # x's 1 cpu + a's 1 cpu
    assert not led.bind(request_of(pod("b", "ub"), "n")).accepted
    led.remove_node("n")
    led.remove_pod("ux")
    assert led.bind(request_of(pod("c", "uc"), "n")).reason == "node n: node not found"


def test_bind_without_uid_is_rejected() -> None:
    led = Ledger()
    led.set_node(node("n"))
    assert led.bind(BindRequest("", "ns/p", "n")).reason == "pod has no uid"


# --- properties ------------------------------------------------------------------------------------

cpus = st.integers(0, 4000)
mems = st.integers(0, 8 << 30)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 8000), st.integers(0, 16 << 30), st.integers(0, 6)), min_size=1, max_size=6
    ),
    st.lists(st.tuples(cpus, mems), min_size=1, max_size=80),
    st.integers(2, 5),
    st.randoms(use_true_random=False),
)
def test_concurrent_binds_from_shards_never_overcommit(
    nodes: list[tuple[int, int, int]], pods: list[tuple[int, int]], shards: int, rnd: random.Random
) -> None:
    led = Ledger()
    names = [f"n{i}" for i in range(len(nodes))]
    for name, (c, m, p) in zip(names, nodes, strict=True):
        led.set_node(node(name, cpu=f"{c}m", memory=str(m), pods=str(p)))
    reqs = [
        BindRequest(
            f"u{i}", f"ns/p{i}", rnd.choice(names), {"cpu": c, "memory": m}, CHECKED, f"s{i % shards}"
        )
        for i, (c, m) in enumerate(pods)
    ]
    accepted: list[BindRequest] = []
    lock = threading.Lock()

    def shard(k: int) -> None:
        for r in reqs[k::shards]:
            if led.bind(r).accepted:
                with lock:
                    accepted.append(r)

    threads = [threading.Thread(target=shard, args=(k,)) for k in range(shards)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name, (c, m, p) in zip(names, nodes, strict=True):
        on = [r for r in accepted if r.node == name]
        assert len(on) <= p
        assert sum(r.requests["cpu"] for r in on) <= c
        assert sum(r.requests["memory"] for r in on) <= m


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 8000), st.integers(0, 16 << 30), st.integers(0, 3), cpus, mems)
def test_a_pod_that_fits_alone_is_accepted(ncpu: int, nmem: int, npods: int, c: int, m: int) -> None:
    led = Ledger()
    led.set_node(node("n", cpu=f"{ncpu}m", memory=str(nmem), pods=str(npods)))
    fits = npods >= 1 and c <= ncpu and m <= nmem
    assert led.bind(BindRequest("u", "ns/p", "n", {"cpu": c, "memory": m}, CHECKED)).accepted is fits
