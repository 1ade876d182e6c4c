"""Shard membership against the real API server (docs/shards.md#membership), short durations (lease
3 s, heartbeat 0.3 s): two shards see each other; one that stops without a word (a crash) drops out of
the other's view once its Lease expires by the reader's clock, not before; one that stops cleanly
deletes its Lease and leaves at once; the arbiter's address is read from the leader's shard Lease, the
shard Leases in a namespace of their own and the leader Lease in the lock namespace
(docs/shards.md#deploy)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from kube.leaderelection import micro_time
from scheduler.shards.heartbeat import ShardHeartbeat
from scheduler.shards.membership import ARBITER_ANNOTATION, GROUP_LABEL, lease_name
from tests.helpers.threads import stop_and_join
from tests.integration.kube.helpers import wait_for

pytestmark = pytest.mark.apiserver

LEASE, INTERVAL = 3.0, 0.3


class Shard:
    def __init__(self, kube: Any, namespace: str, identity: str, **kwargs: Any) -> None:
        self.changes: list[list[str]] = []
        self.stop = threading.Event()
        self.hb = ShardHeartbeat(
            kube, namespace=namespace, group="koord-scheduler", identity=identity,
            lease_duration=LEASE, interval=INTERVAL, on_change=self.changes.append, **kwargs,
        )  # fmt: skip
        self.thread = threading.Thread(target=self.hb.run, args=(self.stop,), name=f"shard-{identity}")
        self.thread.start()

    def halt(self) -> None:
        assert stop_and_join([self]) == []


@pytest.fixture()
def shards(kube: Any, namespace: str) -> Iterator[list[Shard]]:
    made: list[Shard] = []
    yield made
    stop_and_join(made)


def test_members_join_crash_and_leave(kube: Any, namespace: str, shards: list[Shard]) -> None:
    a = Shard(kube, namespace, "shard-a")
    b = Shard(kube, namespace, "shard-b", delete_on_stop=False)
    shards += [a, b]
    wait_for(lambda: a.hb.members() == ["shard-a", "shard-b"] == b.hb.members(), what="both see both")
    assert a.hb.is_member() and b.hb.is_member()
    api: Any = client.CoordinationV1Api(kube)
    lease = api.read_namespaced_lease(lease_name("shard-b"), namespace)
    assert lease.metadata.labels == {GROUP_LABEL: "koord-scheduler"}
    assert lease.spec.holder_identity == "shard-b" and lease.spec.lease_duration_seconds == 3

    # b crashes: its Lease stays, unrenewed. a keeps it for a lease duration by a's own clock.
    b.halt()
    crashed = time.monotonic()
    wait_for(lambda: a.hb.members() == ["shard-a"], timeout=LEASE + 5, what="b expires")
    waited = time.monotonic() - crashed
    assert waited >= LEASE - 2 * INTERVAL, waited
    assert a.changes[-1] == ["shard-a"]
    assert ["shard-a", "shard-b"] in a.changes

    # c joins, then stops cleanly: its Lease is deleted and it leaves well within a lease duration.
    c = Shard(kube, namespace, "shard-c")
    shards.append(c)
    wait_for(lambda: a.hb.members() == ["shard-a", "shard-c"], what="c joins")
    c.halt()
    left = time.monotonic()
    wait_for(lambda: a.hb.members() == ["shard-a"], timeout=LEASE, what="c leaves")
    assert time.monotonic() - left < LEASE - INTERVAL
    with pytest.raises(client.ApiException) as e:
        api.read_namespaced_lease(lease_name("shard-c"), namespace)
    assert e.value.status == 404


def test_arbiter_address_follows_the_leader_lease(kube: Any, namespace: str, shards: list[Shard]) -> None:
    own = f"shards-{uuid.uuid4().hex[:8]}"  # the shard Leases' namespace; the leader Lease's is `namespace`
    core: Any = client.CoreV1Api(kube)
    core.create_namespace({"metadata": {"name": own}})
    try:
        check_arbiter_address(kube, namespace, own, shards)
    finally:
        stop_and_join(shards)
        core.delete_namespace(own)


def check_arbiter_address(kube: Any, namespace: str, own: str, shards: list[Shard]) -> None:
    a = Shard(kube, own, "shard-a", leader_namespace=namespace)
    b = Shard(kube, own, "shard-b", leader_namespace=namespace)
    shards += [a, b]
    wait_for(lambda: b.hb.members() == ["shard-a", "shard-b"], what="both members")
    assert b.hb.arbiter_address() == ""  # no leader Lease yet
    leases: Any = client.CoordinationV1Api(kube)
    now = micro_time()
    spec = {"holderIdentity": "shard-a", "leaseDurationSeconds": 15, "acquireTime": now, "renewTime": now}
    leases.create_namespaced_lease(namespace, {"metadata": {"name": "koord-scheduler"}, "spec": spec})
    wait_for(lambda: b.hb.leader() == "shard-a", what="leader read")
    assert b.hb.arbiter_address() == ""  # the leader serves no arbiter yet
    a.hb.publish("127.0.0.1:7070")
    wait_for(lambda: b.hb.arbiter_address() == "127.0.0.1:7070", what="address published")
    annotations = leases.read_namespaced_lease(lease_name("shard-a"), own).metadata.annotations
    assert annotations == {ARBITER_ANNOTATION: "127.0.0.1:7070"}
    assert [x.metadata.name for x in leases.list_namespaced_lease(namespace).items] == ["koord-scheduler"]
    a.hb.publish("")  # stopped leading: withdrawn
    wait_for(lambda: b.hb.arbiter_address() == "", what="address withdrawn")
    # Renewals after the withdrawal must leave no annotation behind: a strategic-merge null for a key
    # of a map the object no longer has is stored as "" by this API server; a merge patch drops it.
    renewed = a.hb.renewals
    wait_for(lambda: a.hb.renewals >= renewed + 3, what="three more renewals")
    annotations = leases.read_namespaced_lease(lease_name("shard-a"), own).metadata.annotations
    assert not annotations
