"""Sharding wired into the scheduler (docs/shards.md#wiring), over a fake Lease API: the informer handlers
queue only the pods this shard owns and a membership change moves exactly the pods whose owner changed;
node and pod events reach the arbiter's ledger while this shard hosts it; the Binder chain refuses binds
while the shard is not a member or no arbiter is known, asks the hosted ledger in-process when it leads,
and the arbiter's decisions and refusals show in the metrics; the flags turn into options."""

from __future__ import annotations

import argparse
import threading
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiClient, Configuration
from prometheus_client import CollectorRegistry

from scheduler.cache import SchedulerCache
from scheduler.config import load_config
from scheduler.framework.interfaces import Pod
from scheduler.framework.runtime import Framework
from scheduler.framework.status import Status
from scheduler.gateway import EventRouter
from scheduler.main import SchedulerService, parse_args
from scheduler.plugins.noderesources import NodeResourcesFit
from scheduler.queue import SchedulingQueue
from scheduler.registry import KNOWN
from scheduler.scheduler import Scheduler
from scheduler.shards.admission import ShardGate
from scheduler.shards.host import ArbiterHost
from scheduler.shards.ring import owns
from scheduler.shards.security import ShardSecurity
from scheduler.shards.wiring import ShardCollector, Sharding, ShardOptions, add_shard_flags, shard_options
from tests.unit.scheduler.shards.test_heartbeat import FakeLeases

SCHEDULER = "koord-scheduler"


def node(name: str, cpu: str = "4") -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "16Gi", "pods": "110"}
    return {"metadata": {"name": name, "labels": {}}, "status": {"allocatable": alloc, "capacity": alloc}}


def pod(i: int, cpu: str = "1", node_name: str = "") -> Pod:
    meta = {"name": f"p{i}", "namespace": "ns", "uid": f"uid-{i}", "resourceVersion": "1"}
    container = {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
    spec: dict[str, Any] = {"schedulerName": SCHEDULER, "containers": [container]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": meta, "spec": spec}


class Recording:
    def __init__(self) -> None:
        self.bound: list[tuple[str, str]] = []

    def bind(self, p: Pod, node_name: str) -> Status:
        self.bound.append((p["metadata"]["name"], node_name))
        return Status.success()


def router_with(gate: ShardGate, host: ArbiterHost) -> tuple[Scheduler, EventRouter]:
    s = Scheduler(
        Framework([NodeResourcesFit()]), SchedulerCache(), SchedulingQueue(), Recording(), bind_workers=0
    )
    router = EventRouter(s, SCHEDULER)
    router.shard(gate, host)
    return s, router


def queued(s: Scheduler, pods: list[Pod]) -> set[str]:
    return {p["metadata"]["name"] for p in pods if s.queue.where(p) is not None}


def test_only_owned_pods_are_queued_and_a_membership_change_moves_exactly_the_changed_ones() -> None:
    host = ArbiterHost(lambda _: None, listen="127.0.0.1:0", advertise="127.0.0.1")
    s, router = router_with(ShardGate("a"), host)
    pods = [pod(i) for i in range(300)]
    for p in pods:
        router.pod_add(p)
    assert queued(s, pods) == set()  # not a member yet: owns nothing
    assert router.reshard(["a"]) == (0, 300)
    assert queued(s, pods) == {p["metadata"]["name"] for p in pods}
    router.pod_add(pod(999, node_name="n1"))  # bound: never moved
    dropped, added = router.reshard(["a", "b", "c"])
    mine = {p["metadata"]["name"] for p in pods if owns("a", p["metadata"]["uid"], ["a", "b", "c"])}
    assert queued(s, pods) == mine and added == 0 and dropped == 300 - len(mine)
    assert 60 < len(mine) < 140  # about a third
    late = [pod(i) for i in range(300, 400)]
    for p in late:
        router.pod_add(p)
    assert queued(s, late) == {
        p["metadata"]["name"] for p in late if owns("a", p["metadata"]["uid"], ["a", "b", "c"])
    }
    # A pod bound, and one deleted, before the next change: neither comes back to the queue.
    # (Two of the pods "a" takes over when "c" leaves.)
    gone, taken = [p for p in pods if owns("c", p["metadata"]["uid"], ["a", "b", "c"])
                   and owns("a", p["metadata"]["uid"], ["a", "b"])][:2]  # fmt: skip
    router.pod_update(gone, {**gone, "spec": {**gone["spec"], "nodeName": "n1"}})
    router.pod_delete(taken)
    # "c" leaves: "a" takes some of c's pods, keeps its own, gains none of b's.
    rest = [p for p in [*pods, *late] if p is not gone and p is not taken]
    dropped, added = router.reshard(["a", "b"])
    now = {p["metadata"]["name"] for p in rest if owns("a", p["metadata"]["uid"], ["a", "b"])}
    assert dropped == 0 and added > 0 and queued(s, rest) == now
    assert s.queue.where(gone) is None and s.queue.where(taken) is None


def test_the_hosted_ledger_hears_node_and_pod_events_only_while_serving() -> None:
    host = ArbiterHost(lambda _: None, listen="127.0.0.1:0", advertise="127.0.0.1", warmup=0)
    _, router = router_with(ShardGate("a", ["a"]), host)
    router.node_add(node("n0"))
    host.start([], [])
    try:
        led = host.ledger
        assert led is not None and led.row("n0") is None  # before serving: not heard
        router.node_add(node("n1"))
        router.pod_add(pod(1, node_name="n1"))
        row = led.row("n1")
        assert row is not None and row.requested["cpu"] == 1000
        router.pod_delete(pod(1, node_name="n1"))
        row = led.row("n1")
        assert row is not None and row.requested["cpu"] == 0
        router.node_delete(node("n1"))
        assert led.row("n1") is None
    finally:
        host.stop()
    router.node_add(node("n2"))  # no ledger: a no-op


def options(**kw: Any) -> ShardOptions:
    base: dict[str, Any] = dict(
        namespace="ns", group=SCHEDULER, identity="a", leader_lease="koord-scheduler",
        listen="127.0.0.1:0", advertise="127.0.0.1", lease_duration=10.0,
    )  # fmt: skip
    return ShardOptions(**{**base, **kw})


def test_the_binder_chain_and_the_metrics() -> None:
    leases = FakeLeases()
    sharding = Sharding(leases, options())
    sharding.host.warmup = 0
    registry = CollectorRegistry()
    ShardCollector(sharding, registry)
    api = Recording()
    binder = sharding.binder(api)
    st = binder.bind(pod(1), "n1")
    assert st.message() == "binding ns/p1 to n1: not a member of shard group koord-scheduler"
    sharding.heartbeat.beat()
    assert sharding.heartbeat.is_member()
    st = binder.bind(pod(1), "n1")  # a member, but nobody leads: no arbiter
    assert not st.is_success() and "no shard arbiter is known" in st.message() and api.bound == []
    sharding.started_leading()  # before attach: remembered, served once the stores are there
    assert sharding.host.ledger is None
    stop = threading.Event()
    moved: list[list[str]] = []

    def on_members(members: list[str]) -> tuple[int, int]:
        moved.append(members)
        return 0, 0

    sharding.attach(lambda: ([node("n1", cpu="2")], [pod(0, node_name="n1")]), on_members, stop)
    try:
        assert sharding.host.ledger is not None and sharding.host.address.startswith("127.0.0.1:")
        assert binder.bind(pod(1), "n1").is_success() and api.bound == [("p1", "n1")]
        st = binder.bind(pod(2), "n1")
        assert st.message() == (
            "binding ns/p2 to n1: rejected by the shard arbiter: node n1: Insufficient cpu"
        )
        sharding._members_changed(["a", "b"])  # as the heartbeat calls it (it already saw ["a"])
        assert moved == [["a", "b"]]
        sharding.stopped_leading()
        assert sharding.host.ledger is None
        values = {s.name + "".join(s.labels.values()): s.value for f in registry.collect() for s in f.samples}
        assert values["koord_scheduler_shard_arbiter_accepted_total"] == 1
        assert values["koord_scheduler_shard_arbiter_rejected_total"] == 1
        assert values["koord_scheduler_shard_arbiter_expired_total"] == 0
        assert values["koord_scheduler_shard_binds_refused_totala"] == 1
        assert values["koord_scheduler_shard_members"] == 1
    finally:
        stop.set()
        sharding.close()
    assert "koord-scheduler-shard-a" not in leases.leases  # deleted when the heartbeat stopped


def test_the_service_builds_the_sharded_binder_and_router() -> None:
    sharding = Sharding(FakeLeases(), options())
    registry = CollectorRegistry()
    api = ApiClient(Configuration(host="http://127.0.0.1:1"))
    service = SchedulerService(api, load_config(None, KNOWN), registry=registry, sharding=sharding)
    try:
        assert service.router.gate is sharding.gate and service.router.host is sharding.host
        assert (
            service.scheduler.binder.bind(pod(1), "n1")
            .message()
            .endswith("not a member of shard group koord-scheduler")
        )
        assert registry.get_sample_value("koord_scheduler_shard_members") == 0
    finally:
        service.close()
        api.close()


def test_flags_make_options(monkeypatch: pytest.MonkeyPatch) -> None:
    p = argparse.ArgumentParser()
    add_shard_flags(p, "scheduler-")
    kw = dict(namespace="ns", group=SCHEDULER, identity="a", leader_lease="koordinator-manager")
    assert shard_options(p.parse_args([]), "scheduler-", **kw) is None
    monkeypatch.delenv("POD_IP", raising=False)
    on = ["--scheduler-sharding", "--scheduler-shard-insecure"]
    o = shard_options(p.parse_args(on), "scheduler-", **kw)
    assert o is not None and (o.listen, o.advertise, o.lease_duration) == ("127.0.0.1:10261", "127.0.0.1", 15)
    assert (o.namespace, o.lease_namespace, o.security) == ("ns", "koordinator-shards", None)
    assert o.interval == 2.0 and options(lease_duration=3).interval == 1.0
    monkeypatch.setenv("POD_IP", "fd00::7")
    o = shard_options(p.parse_args(on), "scheduler-", **kw)
    assert o is not None and o.listen == "[fd00::7]:10261" and o.advertise == "[fd00::7]"
    args = p.parse_args([*on, "--scheduler-shard-arbiter-addr=0.0.0.0:9000",
                         "--scheduler-shard-advertise-host=10.0.0.5",
                         "--scheduler-shard-lease-namespace=sh"])  # fmt: skip
    o = shard_options(args, "scheduler-", **kw)
    assert o is not None and (o.listen, o.advertise, o.lease_namespace) == ("0.0.0.0:9000", "10.0.0.5", "sh")
    with pytest.raises(ValueError, match=r"--scheduler-shard-lease-duration=0.5: must be at least 1 second"):
        shard_options(p.parse_args([*on, "--scheduler-shard-lease-duration=0.5"]), "scheduler-", **kw)


def test_security_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    p = argparse.ArgumentParser()
    add_shard_flags(p)
    kw = dict(namespace="ns", group=SCHEDULER, identity="a", leader_lease="koord-scheduler")
    with pytest.raises(ValueError) as e:  # TLS and authentication unless asked otherwise
        shard_options(p.parse_args(["--sharding"]), "", **kw)
    assert str(e.value) == (
        "--shard-tls-cert, --shard-tls-key and --shard-ca are needed with --sharding (the arbiter serves "
        "TLS and authenticates its callers), or --shard-insecure"
    )
    tls = ["--sharding", "--shard-tls-cert=/c/tls.crt", "--shard-tls-key=/c/tls.key", "--shard-ca=/c/ca.crt"]
    o = shard_options(p.parse_args(tls), "", **kw)
    assert o is not None and o.security == ShardSecurity(
        Path("/c/tls.crt"), Path("/c/tls.key"), Path("/c/ca.crt"),
        Path("/var/run/secrets/kubernetes.io/serviceaccount/token"), "koord-scheduler-shard-arbiter",
        frozenset({"system:serviceaccount:koordinator-system:koord-scheduler",
                   "system:serviceaccount:koordinator-system:koord-manager"}),
    )  # fmt: skip
    o = shard_options(p.parse_args([*tls, "--shard-allowed-users=u1, u2", "--shard-token-file=/t",
                                    "--shard-tls-server-name=arb"]), "", **kw)  # fmt: skip
    assert o is not None and o.security is not None
    assert (o.security.allowed_users, o.security.token_file, o.security.server_name) == (
        frozenset({"u1", "u2"}),
        Path("/t"),
        "arb",
    )
    with pytest.raises(ValueError, match="--shard-allowed-users: must name at least one user"):
        shard_options(p.parse_args([*tls, "--shard-allowed-users=,"]), "", **kw)


def test_an_embedded_scheduler_without_the_flags_follows_the_hub() -> None:
    """koord-manager declares only some --scheduler-shard-* flags: its arbiter serves the hub's
    certificate, checked as the hub Service's name, and is plaintext only when the hub is."""
    kw = dict(namespace="ns", group=SCHEDULER, identity="a", leader_lease="koordinator-manager")
    hub = dict(hub_tls_cert="/h/tls.crt", hub_tls_key="/h/tls.key", hub_ca=None, hub_endpoints=None,
               hub_tls_secret="koord-manager-hub-tls")  # fmt: skip
    args = argparse.Namespace(scheduler_sharding=True, scheduler_shard_arbiter_addr="",
                              scheduler_shard_advertise_host="", scheduler_shard_lease_duration=15.0,
                              **hub)  # fmt: skip
    o = shard_options(args, "scheduler-", **kw)
    assert o is not None and o.lease_namespace == "koordinator-shards" and o.security is not None
    assert (o.security.cert_file, o.security.ca_file, o.security.server_name) == (
        Path("/h/tls.crt"),
        Path("/h/ca.crt"),
        "koord-manager-hub",
    )
    args.hub_tls_cert = None
    o = shard_options(args, "scheduler-", **kw)
    assert o is not None and o.security is None


def test_koord_scheduler_takes_the_sharding_flags() -> None:
    args, _ = parse_args(["--sharding", "--shard-lease-duration=4", "--shard-arbiter-addr=127.0.0.1:0"])
    assert args.sharding and args.shard_lease_duration == 4 and args.shard_arbiter_addr == "127.0.0.1:0"
    args, _ = parse_args([])
    assert not args.sharding


def test_membership_changes_racing_posted_pod_events_and_cycles_neither_deadlock_nor_lose_a_pod() -> None:
    """The router's pod handlers and a membership change take the scheduler's lock before the routing
    lock (docs/architecture.md#informer-mailbox): a heartbeat thread resharding while an informer posts
    pod events and a loop holds the lock for cycles finishes, and the queue then holds exactly the
    pending pods the last membership gives this shard."""
    host = ArbiterHost(lambda _: None, listen="127.0.0.1:0", advertise="127.0.0.1")
    s, router = router_with(ShardGate("a"), host)
    s.queue.close()  # nothing is popped: the queue's contents are the check
    pods = [pod(i) for i in range(400)]
    stop = threading.Event()
    errors: list[BaseException] = []

    def guard(fn: Any) -> Any:
        def run() -> None:
            try:
                fn()
            except BaseException as e:  # a deadlock shows as a join timeout, anything else here
                errors.append(e)

        return run

    def cycles() -> None:
        while not stop.is_set():
            with s.lock:
                sum(range(200))

    resharded = threading.Event()

    def informer() -> None:
        for p in pods:
            s.lock.post(router.pod_add, p)
        while not resharded.wait(0.002):  # resyncs at a bounded rate, for as long as memberships change
            for p in pods[:20]:
                s.lock.post(router.pod_update, p, p)

    memberships = [["a"], ["a", "b"], ["a", "b", "c"], ["a", "c"], ["a", "b"]]

    def heartbeat() -> None:
        for _ in range(40):
            for m in memberships:
                router.reshard(m)
        resharded.set()

    threads = [threading.Thread(target=guard(f)) for f in (cycles, informer, heartbeat)]
    for t in threads:
        t.start()
    for t in threads[1:]:
        t.join(60)
    stop.set()
    threads[0].join(60)
    assert not any(t.is_alive() for t in threads), "deadlock"
    assert errors == []
    s.lock.flush()
    assert s.lock.pending() == 0
    final = memberships[-1]
    want = {p["metadata"]["name"] for p in pods if owns("a", p["metadata"]["uid"], final)}
    assert queued(s, pods) == want
