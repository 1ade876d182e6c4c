"""TopologyEvents: NodeResourceTopology and Device objects reach only the plugins that follow them, under the
scheduler's lock, a deleted object as None, and every change becomes a ClusterEvent; a scheduler without
such plugins watches neither kind."""

from __future__ import annotations

import threading
from typing import Any

from scheduler.framework.interfaces import ClusterEvent
from scheduler.topologyevents import TopologyEvents


class _Follower:
    def __init__(self, lock: threading.RLock) -> None:
        self.lock = lock
        self.seen: list[tuple[str, str, Any]] = []

    def name(self) -> str:
        return "Follower"


class _Topo(_Follower):
    def on_topology(self, node_name: str, nrt: Any) -> None:
        assert self.lock._is_owned()  # type: ignore[attr-defined]
        self.seen.append(("topology", node_name, nrt))


class _Dev(_Follower):
    def on_device(self, node_name: str, device: Any) -> None:
        assert self.lock._is_owned()  # type: ignore[attr-defined]
        self.seen.append(("device", node_name, device))


class _Other:
    def name(self) -> str:
        return "Other"


def test_objects_reach_the_plugins_that_follow_them() -> None:
    lock = threading.RLock()
    events: list[ClusterEvent] = []
    topo, dev = _Topo(lock), _Dev(lock)
    te = TopologyEvents([topo, dev, _Other()], lock, events.append)  # type: ignore[list-item]
    assert te.wanted
    assert [id(p) for p in te.topology_plugins] == [id(topo)]
    assert [id(p) for p in te.device_plugins] == [id(dev)]
    nrt = {"metadata": {"name": "n1", "annotations": {}}}
    te.nrt_add(nrt)
    te.nrt_update(nrt, nrt)
    te.nrt_delete(nrt)
    d = {"metadata": {"name": "n2"}, "spec": {"devices": []}}
    te.device_add(d)
    te.device_delete(d)
    assert topo.seen == [("topology", "n1", nrt), ("topology", "n1", nrt), ("topology", "n1", None)]
    assert dev.seen == [("device", "n2", d), ("device", "n2", None)]
    assert [(e.resource, e.action) for e in events] == [
        ("NodeResourceTopology", "Add"), ("NodeResourceTopology", "Update"),
        ("NodeResourceTopology", "Delete"), ("Device", "Add"), ("Device", "Delete"),
    ]  # fmt: skip


def test_an_object_without_a_name_is_ignored() -> None:
    lock = threading.RLock()
    events: list[ClusterEvent] = []
    topo = _Topo(lock)
    te = TopologyEvents([topo], lock, events.append)  # type: ignore[list-item]
    te.nrt_add({"metadata": {}})
    te.device_add({"metadata": {"name": "n"}})  # no device plugin: nobody is told, the event still counts
    assert topo.seen == []
    assert [(e.resource, e.action) for e in events] == [("Device", "Add")]


def test_no_following_plugin_means_nothing_is_watched() -> None:
    te = TopologyEvents([_Other()], threading.RLock(), lambda e: None)  # type: ignore[list-item]
    assert not te.wanted
