"""The Reservation plugin in a Framework over a snapshot (docs/rules/scheduler-reservation.md#the-plugin):
PreFilter's affinity failure, Filter and Score on the nodes holding reservations only, the reserve pod's
filter, Reserve/Unreserve making an allocate-once reservation unmatchable and back, and the cache following
reservation and owner events."""

from __future__ import annotations

from typing import Any

from apis.reservation import parse_reservation
from apis.reservation_pod import new_reserve_pod
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.reservation.filtering import ERR_AFFINITY, ERR_NODE_NOT_MATCH, ERR_POLICY_CONFLICT
from scheduler.plugins.reservation.plugin import Reservation
from tests.unit.scheduler.plugins.reservation._support import affinity, node, pod, reservation


def setup(
    *reservations: dict[str, Any], pods: list[dict[str, Any]] | None = None
) -> tuple[Reservation, Snapshot]:
    plugin = Reservation()
    for r in reservations:
        plugin.on_reservation_add(r)
    snap = Snapshot.build([node("n1"), node("n2")], pods or [])
    return plugin, snap


def test_owner_lands_on_its_reservation_and_others_are_untouched() -> None:
    plugin, snap = setup(
        reservation("r1", alloc={"cpu": "4", "memory": "8Gi"}), pods=[pod("x", {"cpu": "3"}, node_name="n1")]
    )
    fw = Framework([plugin])
    st = CycleState(0.0)
    result = fw.schedule(st, pod("p", {"cpu": "4"}), snap)
    assert result.node == "n1"  # n1: (100 + 0) / 2 = 50 normalised to 100; n2: 0
    assert plugin.nominated_reservation(st, "n1") is not None
    stranger = fw.schedule(CycleState(0.0), pod("q", {"cpu": "4"}, labels={"app": "b"}), snap)
    assert stranger.node == "n1"  # no state anywhere: every node passes, ties in name order


def test_affinity_without_any_matching_reservation_fails_in_prefilter() -> None:
    plugin, snap = setup(reservation("r1"))
    fw = Framework([plugin])
    result = fw.schedule(CycleState(0.0), pod("p", labels={"app": "b"}, annotations=affinity()), snap)
    assert result.node is None
    assert ERR_AFFINITY in result.status.message()
    only_r1 = fw.schedule(CycleState(0.0), pod("p", annotations=affinity()), snap)
    assert only_r1.node == "n1"
    assert only_r1.rejections is not None and ERR_AFFINITY in only_r1.rejections.as_dict()["n2"].message()


def test_reserve_makes_allocate_once_unmatchable_until_unreserve() -> None:
    plugin, snap = setup(reservation("r1"))
    fw = Framework([plugin])
    first = pod("p1", annotations=affinity())
    st = CycleState(0.0)
    assert fw.schedule(st, first, snap).node == "n1"
    assert plugin.reserve(st, first, "n1").is_success()
    second = fw.schedule(CycleState(0.0), pod("p2", annotations=affinity()), snap)
    assert second.node is None and ERR_AFFINITY in second.status.message()
    plugin.unreserve(st, first, "n1")
    assert fw.schedule(CycleState(0.0), pod("p2", annotations=affinity()), snap).node == "n1"


def test_restricted_reservation_rejects_with_reasons() -> None:
    plugin, snap = setup(reservation("r1", policy="Restricted", alloc={"cpu": "2"}))
    result = Framework([plugin]).schedule(
        CycleState(0.0), pod("p", {"cpu": "3"}, annotations=affinity(name="r1")), snap
    )
    assert result.node is None
    assert result.rejections is not None
    assert result.rejections.as_dict()["n1"].reasons == (
        "Reservation(s) Insufficient cpu, requested: 3000, used: 0, capacity: 2000",
    )


def test_owner_events_fill_allocated() -> None:
    plugin, snap = setup(reservation("r1", allocate_once=False, policy="Restricted", alloc={"cpu": "4"}))
    plugin.on_pod_add(pod("o1", {"cpu": "3"}, owner_of="r1", node_name="n1"))
    info = plugin.cache.get("uid-r1")
    assert info is not None and str(info.allocated["cpu"]) == "3"
    result = Framework([plugin]).schedule(
        CycleState(0.0), pod("p", {"cpu": "2"}, annotations=affinity()), snap
    )
    assert result.node is None
    plugin.on_pod_delete(pod("o1", {"cpu": "3"}, owner_of="r1", node_name="n1"))
    assert (
        Framework([plugin])
        .schedule(CycleState(0.0), pod("p", {"cpu": "2"}, annotations=affinity()), snap)
        .node
        == "n1"
    )
    plugin.on_reservation_delete(reservation("r1"))
    assert plugin.cache.nodes() == []


def test_reserve_pod_filter_in_the_framework() -> None:
    plugin, snap = setup(reservation("r1"), reservation("r2", node="", phase="Pending", policy="Aligned"))
    pending = reservation("r2", node="", phase="Pending", policy="Aligned")
    pending["spec"]["template"]["spec"]["nodeName"] = "n1"
    plugin.on_reservation_update(pending, pending)
    reserve_pod = new_reserve_pod(parse_reservation(pending))
    result = Framework([plugin]).schedule(CycleState(0.0), reserve_pod, snap)
    assert result.node is None
    assert result.rejections is not None
    statuses = result.rejections.as_dict()
    assert statuses["n1"].reasons == (ERR_POLICY_CONFLICT,)
    assert statuses["n2"].reasons == (ERR_NODE_NOT_MATCH,)
