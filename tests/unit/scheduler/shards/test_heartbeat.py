"""The shard heartbeat's logic over a fake Lease API and clock (docs/shards.md#membership): it renews and
lists every beat, reports member changes once, fences itself when renewals stop succeeding for a lease
duration less the margin, and publishes the arbiter address through a merge patch."""

from __future__ import annotations

import json
import threading
from typing import Any

from kubernetes.client.exceptions import ApiException

from scheduler.shards.heartbeat import ShardHeartbeat
from scheduler.shards.membership import ARBITER_ANNOTATION, lease_name


class Resp:
    def __init__(self, body: Any) -> None:
        self.data = json.dumps(body).encode()


class FakeLeases:
    """Leases of one namespace in a dict; ``down`` makes every call fail as an unreachable server."""

    def __init__(self) -> None:
        self.leases: dict[str, dict[str, Any]] = {}
        self.down = False
        self.calls: list[str] = []

    def _check(self, method: str) -> None:
        self.calls.append(method)
        if self.down:
            raise OSError("connection refused")

    def patch_namespaced_lease(self, name: str, ns: str, body: dict[str, Any], **_: Any) -> Resp:
        self._check("patch")
        if name not in self.leases:
            raise ApiException(status=404, reason="Not Found")
        lease = self.leases[name]
        lease["spec"].update(body["spec"])
        ann = lease["metadata"].setdefault("annotations", {})
        for k, v in body["metadata"]["annotations"].items():
            if v is None:
                ann.pop(k, None)
            else:
                ann[k] = v
        return Resp(lease)

    def create_namespaced_lease(self, ns: str, body: dict[str, Any], **_: Any) -> Resp:
        self._check("create")
        self.leases[body["metadata"]["name"]] = json.loads(json.dumps(body))
        return Resp(body)

    def list_namespaced_lease(self, ns: str, label_selector: str = "", **_: Any) -> Resp:
        self._check("list")
        return Resp({"items": [v for k, v in self.leases.items() if k != "koord-scheduler"]})

    def read_namespaced_lease(self, name: str, ns: str, **_: Any) -> Resp:
        self._check("read")
        if name not in self.leases:
            raise ApiException(status=404, reason="Not Found")
        return Resp(self.leases[name])

    def delete_namespaced_lease(self, name: str, ns: str, **_: Any) -> Resp:
        self._check("delete")
        self.leases.pop(name, None)
        return Resp({})


class Clock:
    t = 100.0

    def __call__(self) -> float:
        return self.t


def heartbeat(api: FakeLeases, identity: str, clock: Clock, changes: list[list[str]]) -> ShardHeartbeat:
    return ShardHeartbeat(
        api, namespace="ns", group="koord-scheduler", identity=identity,
        lease_duration=10, interval=2, clock=clock, on_change=changes.append,
    )  # fmt: skip


def test_beats_create_renew_and_see_members() -> None:
    api, clock = FakeLeases(), Clock()
    changes: list[list[str]] = []
    a = heartbeat(api, "a", clock, changes)
    b = heartbeat(api, "b", clock, [])
    a.beat()
    assert api.calls[:3] == ["patch", "create", "list"]
    assert a.members() == ["a"] and changes == [["a"]]
    b.beat()
    a.beat()
    assert a.members() == ["a", "b"] and changes == [["a"], ["a", "b"]]
    a.beat()
    assert changes == [["a"], ["a", "b"]]  # no change, no call
    assert a.renewals == 3 and a.failures == 0


def test_a_shard_that_cannot_renew_fences_itself() -> None:
    api, clock = FakeLeases(), Clock()
    changes: list[list[str]] = []
    a = heartbeat(api, "a", clock, changes)
    a.beat()
    assert a.is_member()
    api.down = True
    clock.t += 2
    a.beat()
    assert a.failures == 2  # the renewal and the listing
    assert a.margin == 2.0
    clock.t = 100 + 10 - 2 - 0.01  # the last good renewal was sent at 100
    assert a.is_member() and a.members() == ["a"]
    clock.t = 100 + 10 - 2
    assert not a.is_member() and a.members() == []


def test_publish_and_withdraw_the_arbiter_address() -> None:
    api, clock = FakeLeases(), Clock()
    a = heartbeat(api, "a", clock, [])
    b = heartbeat(api, "b", clock, [])
    api.leases["koord-scheduler"] = {"metadata": {"name": "koord-scheduler"}, "spec": {"holderIdentity": "a"}}
    a.publish("10.0.0.1:7070")
    a.beat()
    b.beat()
    assert b.leader() == "a" and b.arbiter_address() == "10.0.0.1:7070"
    a.publish("")
    clock.t += 2
    a.beat()
    b.beat()
    assert api.leases[lease_name("a")]["metadata"]["annotations"] == {}
    assert b.arbiter_address() == ""
    assert ARBITER_ANNOTATION not in api.leases[lease_name("a")]["metadata"]["annotations"]


def test_run_deletes_the_lease_on_stop_unless_told_not_to() -> None:
    api, clock = FakeLeases(), Clock()
    stop = threading.Event()
    stop.set()
    heartbeat(api, "a", clock, []).run(stop)
    assert lease_name("a") not in api.leases and api.calls[-1] == "delete"
    keep = heartbeat(api, "b", clock, [])
    keep.delete_on_stop = False
    keep.run(stop)
    assert lease_name("b") in api.leases


class NamespacedLeases(FakeLeases):
    """Records the namespace of every call."""

    def __init__(self) -> None:
        super().__init__()
        self.namespaces: list[tuple[str, str]] = []

    def patch_namespaced_lease(self, name: str, ns: str, body: dict[str, Any], **kw: Any) -> Resp:
        self.namespaces.append(("patch", ns))
        return super().patch_namespaced_lease(name, ns, body, **kw)

    def create_namespaced_lease(self, ns: str, body: dict[str, Any], **kw: Any) -> Resp:
        self.namespaces.append(("create", ns))
        assert body["metadata"]["namespace"] == ns
        return super().create_namespaced_lease(ns, body, **kw)

    def list_namespaced_lease(self, ns: str, label_selector: str = "", **kw: Any) -> Resp:
        self.namespaces.append(("list", ns))
        return super().list_namespaced_lease(ns, label_selector, **kw)

    def read_namespaced_lease(self, name: str, ns: str, **kw: Any) -> Resp:
        self.namespaces.append((f"read {name}", ns))
        return super().read_namespaced_lease(name, ns, **kw)

    def delete_namespaced_lease(self, name: str, ns: str, **kw: Any) -> Resp:
        self.namespaces.append(("delete", ns))
        return super().delete_namespaced_lease(name, ns, **kw)


def test_shard_leases_in_their_namespace_the_leader_lease_in_the_lock_namespace() -> None:
    """docs/shards.md#deploy: full Lease rights only in the shards' namespace; the group's leader Lease
    is only read, where its elector keeps it."""
    api = NamespacedLeases()
    hb = ShardHeartbeat(
        api, namespace="koordinator-shards", group="koord-scheduler", identity="a",
        leader_namespace="koordinator-system", lease_duration=10, interval=2, clock=Clock(),
    )  # fmt: skip
    hb.beat()
    stop = threading.Event()
    stop.set()
    hb.run(stop)
    assert api.namespaces == [
        ("patch", "koordinator-shards"), ("create", "koordinator-shards"), ("list", "koordinator-shards"),
        ("read koord-scheduler", "koordinator-system"),
        ("patch", "koordinator-shards"), ("list", "koordinator-shards"),
        ("read koord-scheduler", "koordinator-system"), ("delete", "koordinator-shards"),
    ]  # fmt: skip
