"""koord-scheduler's Reservation controller and informer handlers (docs/rules/scheduler-reservation.md#wiring,
docs/rules/scheduler-reservation.md#controller-wiring) with a recording status writer and router: owners
from pod events, a status patch only when ``sync`` changed it, expiry, the worker loop gated by
leadership, the garbage collection, and each Reservation event reaching the router as its reserve pod."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import threading
from typing import Any

from apis.reservation import ANNOTATION_RESERVATION_ALLOCATED, Reservation, parse_reservation
from apis.reservation_pod import new_reserve_pod
from scheduler.framework.status import Status
from scheduler.plugins.reservation.plugin import Reservation as ReservationPlugin
from scheduler.reservationcontroller import ReservationController, status_json
from scheduler.reservationevents import ReservationEvents, ReservationWiring
from tests.unit.scheduler.plugins.reservation._support import reservation

NOW = _dt.datetime(2026, 1, 1, 12, 0, tzinfo=_dt.UTC)
Obj = dict[str, Any]


class Writer:
    def __init__(self) -> None:
        self.patched: list[Reservation] = []
        self.deleted: list[str] = []

    def patch(self, r: Reservation) -> None:
        self.patched.append(r)

    def delete(self, name: str) -> None:
        self.deleted.append(name)

    def unschedulable(self, r: Reservation, message: str) -> None:
        self.patched.append(r)


def controller(nodes: set[str] | None = None, active: bool = True) -> tuple[ReservationController, Writer]:
    w = Writer()
    known = {"n1"} if nodes is None else nodes
    c = ReservationController(w, known.__contains__, lambda: active, clock=lambda: NOW)  # type: ignore[arg-type]
    return c, w


def resv(name: str = "r1", created: str = "2026-01-01T11:59:00Z", **kw: Any) -> Obj:
    obj = reservation(name, alloc={"cpu": "3", "memory": "1Gi"}, **kw)
    obj["metadata"]["creationTimestamp"] = created
    return obj


def owner(name: str, of: str = "r1", node: str = "n1") -> Obj:
    allocated = json.dumps({"name": of, "uid": f"uid-{of}"})
    return {
        "metadata": {"namespace": "ns", "name": name, "uid": f"uid-{name}",
                     "annotations": {ANNOTATION_RESERVATION_ALLOCATED: allocated}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]},
    }  # fmt: skip


def test_an_owner_makes_an_allocate_once_reservation_succeeded_patched_once() -> None:
    c, w = controller()
    c.reservation_upsert(resv())
    assert c.sync("r1") is False and w.patched == []  # no owner, nothing changed
    c.pod_upsert(owner("p"))
    c.pod_upsert(owner("elsewhere", node="n2"))  # not on its node: not counted
    assert c.sync("r1") is True
    [r] = w.patched
    assert r.phase == "Succeeded"
    assert [dict(o) for o in r.current_owners] == [{"namespace": "ns", "name": "p", "uid": "uid-p"}]
    status = status_json(r)
    assert status["allocated"] == {"cpu": "2"} and status["allocatable"] == {"cpu": "3", "memory": "1Gi"}
    assert c.sync("r1") is False and len(w.patched) == 1  # the store holds the patched one


def test_an_owner_leaving_is_seen_and_allocate_many_stays_available() -> None:
    c, w = controller()
    c.reservation_upsert(resv(allocate_once=False))
    c.pod_upsert(owner("p"))
    assert c.sync("r1") and w.patched[-1].phase == "Available"
    c.pod_delete(owner("p"))
    assert c.sync("r1") and w.patched[-1].current_owners == ()


def test_expiry_by_ttl_and_by_a_missing_node() -> None:
    c, w = controller()
    c.reservation_upsert(resv(created="2026-01-01T11:00:00Z", spec={"ttl": "30m"}))
    assert c.sync("r1") and w.patched[-1].phase == "Failed"
    c2, w2 = controller(nodes=set())
    c2.reservation_upsert(resv())
    assert c2.sync("r1") and w2.patched[-1].phase == "Failed"
    c3, w3 = controller()
    c3.reservation_upsert(resv(node="", phase="Pending", created="2020-01-01T00:00:00Z"))
    assert not c3.sync("r1") and w3.patched == []  # quirk: never scheduled, never expired


def test_the_worker_syncs_queued_reservations_only_while_active() -> None:
    for active, expected in ((False, 0), (True, 1)):
        c, w = controller(active=active)
        stop = threading.Event()
        t = threading.Thread(target=c.run, args=(stop,))
        t.start()
        try:
            c.reservation_upsert(resv(created="2026-01-01T11:00:00Z", spec={"ttl": "30m"}))
            stop.wait(0.3)
        finally:
            stop.set()
            t.join(5)
        assert len(w.patched) == expected


def test_gc_deletes_long_expired_and_node_gone_reservations() -> None:
    c, w = controller()
    old = {
        "type": "Ready",
        "status": "False",
        "reason": "Expired",
        "lastTransitionTime": "2025-12-30T00:00:00Z",
    }
    recent = {**old, "lastTransitionTime": "2026-01-01T11:00:00Z"}
    for name, node, condition in (("old", "n1", old), ("recent", "n1", recent), ("gone", "n9", recent)):
        c.reservation_upsert(resv(name, phase="Failed", node=node))
        c.reservations[name] = dataclasses.replace(c.reservations[name], conditions=(condition,))
    c.reservation_upsert(resv("live"))
    assert sorted(c.gc()) == ["gone", "old"] and sorted(w.deleted) == ["gone", "old"]


class Router:
    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []  # (what, name[, node])

    def pod_add(self, pod: Obj) -> None:
        self.calls.append(("add", pod["metadata"]["name"], pod["spec"].get("nodeName") or ""))

    def pod_update(self, old: Obj, new: Obj) -> None:
        self.calls.append(("update", new["metadata"]["name"], new["spec"].get("nodeName") or ""))

    def pod_delete(self, pod: Obj) -> None:
        self.calls.append(("delete", pod["metadata"]["name"]))


def test_reservation_events_reach_plugins_controller_and_the_router_as_reserve_pods() -> None:
    c, _ = controller()
    plugin, router = ReservationPlugin(), Router()
    events = ReservationEvents([plugin], router, threading.RLock(), c)  # type: ignore[arg-type]
    pending = resv(node="", phase="Pending")
    events.reservation_add(pending)
    assert router.calls == [("add", "uid-r1", "")] and plugin.cache.get_by_name("r1") is not None
    assert "r1" in c.reservations
    probed = json.loads(json.dumps(pending))
    probed["status"]["conditions"] = [{"type": "Scheduled", "status": "False", "reason": "Unschedulable"}]
    events.reservation_update(pending, probed)
    assert len(router.calls) == 1  # the reserve pod did not change: a parked one stays parked
    available = resv()
    events.reservation_update(probed, available)
    assert router.calls[-1] == ("update", "uid-r1", "n1")
    done = resv(phase="Succeeded")
    events.reservation_update(available, done)
    assert router.calls[-1] == ("delete", "uid-r1")
    events.reservation_delete(done)
    assert len(router.calls) == 3  # a finished one has no reserve pod left
    events.reservation_add(available)
    events.reservation_delete(available)
    assert router.calls[-1] == ("delete", "uid-r1") and "r1" not in c.reservations
    assert plugin.cache.get_by_name("r1") is None


def test_unschedulable_reserve_pods_are_written_to_their_reservation() -> None:
    plugin = ReservationPlugin()
    wiring = ReservationWiring(object(), [plugin], lambda: True)
    writer = Writer()
    wiring.writer = writer  # type: ignore[assignment]
    plugin.on_reservation_add(resv(node="", phase="Pending"))

    class Inner:
        def __init__(self) -> None:
            self.reported: list[str] = []
            self.pool = self

        def submit(self, fn: Any, *args: Any) -> None:
            fn(*args)

        def __call__(self, pod: Obj, status: Status) -> None:
            self.reported.append(pod["metadata"]["name"])

    inner = Inner()
    report = wiring.reporter(inner)  # type: ignore[arg-type]
    report(new_reserve_pod(parse_reservation(resv(node="", phase="Pending"))), Status.unschedulable("x"))  # type: ignore[arg-type]
    assert [r.name for r in writer.patched] == ["r1"] and inner.reported == []
    report({"metadata": {"name": "p", "namespace": "ns"}, "spec": {}}, Status.unschedulable("x"))  # type: ignore[arg-type]
    assert inner.reported == ["p"]
