"""The Reservation plugin's wiring hooks in a Framework with NodeResourcesFit
(docs/rules/scheduler-reservation.md#wiring): the node transformer takes a matched reservation's reserve
pod off its node for the owner's cycle only (the snapshot is the cache's again afterwards), PostFilter
stops preemption for reserve pods, PreBind writes the owner's annotation on a new dict, Bind hands a
reserve pod to the status writer and skips other pods."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from apis.reservation import Reservation as ReservationObject
from apis.reservation import parse_reservation
from apis.reservation_pod import new_reserve_pod
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.plugins.noderesources import NodeResourcesFit
from scheduler.plugins.reservation.plugin import Reservation
from tests.unit.scheduler.plugins.reservation._support import ALLOCATED, node, pod, reservation

CPU4 = {"cpu": "4", "memory": "8Gi", "pods": "110"}


def setup(*extra_pods: dict[str, Any]) -> tuple[Reservation, Framework, Snapshot, dict[str, Any]]:
    """One node of 4 cpu holding an Available reservation of 3 cpu (its reserve pod bound there)."""
    r = reservation("r1", alloc={"cpu": "3", "memory": "1Gi"})
    plugin = Reservation()
    plugin.on_reservation_add(r)
    reserve = new_reserve_pod(parse_reservation(r))
    snap = Snapshot.build([node("n1", CPU4)], [reserve, *extra_pods])
    fw = Framework([plugin, NodeResourcesFit()])
    return plugin, fw, snap, reserve


def test_the_owner_sees_the_reserved_room_for_its_cycle_only() -> None:
    _, fw, snap, _ = setup()
    requested = snap.requested.copy()
    st = CycleState(0.0)
    owner = pod("owner", {"cpu": "2", "memory": "64Mi"})
    assert fw.schedule(st, owner, snap).node == "n1"
    # after the cycle the snapshot holds the reserve pod again, as the cache does
    assert np.array_equal(snap.requested, requested)
    assert "default/uid-r1" in snap.infos[0].pods and int(snap.pod_count[0]) == 1
    stranger = pod("other", {"cpu": "2", "memory": "64Mi"}, labels={"app": "b"})
    result = fw.schedule(CycleState(0.0), stranger, snap)
    assert result.node is None
    assert result.status.message() == "0/1 nodes are available: 1 Insufficient cpu."


def test_the_transformer_keeps_the_pod_count_for_fits_node() -> None:
    plugin, _, snap, _ = setup()
    st = CycleState(0.0)
    changed = plugin.transform_node_infos(st, pod("owner", {"cpu": "1"}), snap)
    assert [i.name for i in changed] == ["n1"] and "default/uid-r1" not in changed[0].pods
    assert "default/uid-r1" in snap.infos[0].pods  # a copy: the snapshot's own is untouched
    assert plugin.pre_filter(st, pod("owner", {"cpu": "1"}), snap).is_success()
    # nothing to take off for a stranger (no matched reservation)
    assert plugin.transform_node_infos(CycleState(0.0), pod("x", labels={"app": "b"}), snap) == []


def test_prebind_writes_the_allocated_annotation_on_a_new_dict() -> None:
    plugin, fw, snap, _ = setup()
    st = CycleState(0.0)
    shared = {"keep": "me"}
    owner = pod("owner", {"cpu": "2"}, annotations=shared)
    assert fw.schedule(st, owner, snap).node == "n1"
    assert fw.reserve(st, owner, "n1").is_success()
    assert fw.pre_bind(st, owner, "n1").is_success()
    assert json.loads(owner["metadata"]["annotations"][ALLOCATED]) == {"name": "r1", "uid": "uid-r1"}
    assert owner["metadata"]["annotations"]["keep"] == "me" and ALLOCATED not in shared
    # a pod Reserve assumed nothing for gets nothing
    stranger = pod("s", {"cpu": "1"}, labels={"app": "b"})
    st2 = CycleState(0.0)
    fw.schedule(st2, stranger, snap)
    assert plugin.pre_bind(st2, stranger, "n1").is_success()
    assert ALLOCATED not in (stranger["metadata"].get("annotations") or {})


def test_bind_hands_reserve_pods_to_the_status_writer_and_skips_others() -> None:
    plugin, _, _, _ = setup()
    pending = reservation("r2", node="", phase="Pending", alloc={"cpu": "1"})
    plugin.on_reservation_add(pending)
    reserve = new_reserve_pod(parse_reservation(pending))
    assert plugin.bind(CycleState(0.0), reserve, "n1").code == Code.ERROR  # no writer yet
    calls: list[tuple[str, str]] = []

    def writer(r: ReservationObject, node_name: str) -> Status:
        calls.append((r.name, node_name))
        return Status.success()

    plugin.status_writer = writer
    assert plugin.bind(CycleState(0.0), reserve, "n1").is_success()
    assert calls == [("r2", "n1")]
    assert plugin.bind(CycleState(0.0), pod("p"), "n1").is_skip()


def test_postfilter_stops_preemption_for_reserve_pods_only() -> None:
    plugin, _, snap, _ = setup()
    pending = reservation("r2", node="", phase="Pending", alloc={"cpu": "16"})
    plugin.on_reservation_add(pending)
    reserve = new_reserve_pod(parse_reservation(pending))

    class Preempting:
        name = "Preempting"
        calls = 0

        def post_filter(
            self, state: CycleState, pod: Any, snapshot: Snapshot, statuses: dict[str, Status]
        ) -> Status:
            Preempting.calls += 1
            return Status.unschedulable("no victims")

    fw = Framework([plugin, NodeResourcesFit(), Preempting()])
    result = fw.schedule(CycleState(0.0), reserve, snap)
    assert result.node is None and "Insufficient cpu" in result.status.message()
    assert Preempting.calls == 0  # the reserve pod's Error ended PostFilter
    fw.schedule(CycleState(0.0), pod("big", {"cpu": "16"}, labels={"app": "b"}), snap)
    assert Preempting.calls == 1
