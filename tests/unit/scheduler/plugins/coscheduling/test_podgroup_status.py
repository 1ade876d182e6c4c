"""The PodGroup status controller's pure rules (docs/rules/scheduler-coscheduling.md#podgroup-status)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from apis.podgroup import PodGroup, PodGroupStatus, parse_pod_group
from scheduler.plugins.coscheduling.args import CoschedulingArgs
from scheduler.plugins.coscheduling.cache import GangCache
from scheduler.plugins.coscheduling.podgroup_status import (
    next_status,
    occupied_by,
    settle,
    should_enqueue,
    sync,
)

from ._support import gang_pod

NOW = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
CREATED = dt.datetime(2026, 2, 1, tzinfo=dt.UTC)


def _pg(phase: str = "", min_member: int = 2, **status: Any) -> PodGroup:
    return PodGroup("default", "pg", {}, CREATED, min_member, None, PodGroupStatus(phase=phase, **status))


def _child(name: str, phase: str = "", owners: list[str] | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = dict(gang_pod(name, pg="pg", phase=phase or None))
    if owners:
        pod["metadata"]["ownerReferences"] = [{"name": o} for o in owners]
    return pod


def test_should_enqueue() -> None:
    assert should_enqueue(_pg("Running"))
    assert not should_enqueue(_pg("Finished")) and not should_enqueue(_pg("Failed"))
    late = CREATED + dt.timedelta(hours=48, seconds=1)
    assert not should_enqueue(_pg("Scheduled", scheduled=2, running=0, schedule_start_time=late))
    assert should_enqueue(_pg("Scheduled", scheduled=2, running=1, schedule_start_time=late))
    assert should_enqueue(_pg("Scheduled", scheduled=1, running=0, schedule_start_time=late))
    exactly = CREATED + dt.timedelta(hours=48)
    assert should_enqueue(_pg("Scheduled", scheduled=2, running=0, schedule_start_time=exactly))
    assert should_enqueue(_pg("Scheduled", scheduled=2))  # no start time: Go's zero time is long before


def test_empty_phase_becomes_pending() -> None:
    assert next_status(_pg(""), [], 0, NOW).phase == "Pending"


def test_pending_to_pre_scheduling_with_occupied_by() -> None:
    children = [_child("a", owners=["job-b", "job-a"]), _child("b")]
    st = next_status(_pg("Pending", occupied_by="old"), children, 0, NOW)
    assert (st.phase, st.occupied_by) == ("PreScheduling", "default/job-a,default/job-b")
    st = next_status(_pg("Pending", occupied_by="old"), [_child("b"), children[0]], 0, NOW)
    assert (st.phase, st.occupied_by) == ("PreScheduling", "old")  # the first child has no owners
    assert next_status(_pg("Pending"), children[:1], 0, NOW).phase == "Pending"
    assert next_status(_pg("Pending", min_member=0), children, 0, NOW).phase == "Pending"
    assert occupied_by({"metadata": {"ownerReferences": []}}) is None


def test_counts_and_phase_rules() -> None:
    pg = _pg("PreScheduling")
    st = next_status(pg, [_child("a", "Running"), _child("b", "Pending")], 1, NOW)
    assert (st.phase, st.running, st.scheduled, st.schedule_start_time) == ("Scheduling", 1, 1, NOW)
    kept = next_status(
        dataclasses.replace(pg, status=st), [_child("a", "Running")], 1, NOW + dt.timedelta(hours=1)
    )
    assert kept.schedule_start_time == NOW  # set once
    assert next_status(pg, [_child("a", "Pending"), _child("b")], 2, NOW).phase == "Scheduled"
    assert next_status(pg, [_child("a", "Running"), _child("b", "Succeeded")], 2, NOW).phase == "Running"
    assert next_status(pg, [_child("a", "Running"), _child("b", "Failed")], 2, NOW).phase == "Failed"
    assert next_status(pg, [_child("a", "Failed")], 2, NOW).phase == "Scheduled"  # 1 < min 2: not Failed
    assert (
        next_status(
            pg, [_child("a", "Succeeded"), _child("b", "Succeeded"), _child("c", "Failed")], 0, NOW
        ).phase
        == "Finished"
    )
    assert next_status(_pg("Running"), [], 3, NOW).phase == "Pending"


def test_sync_and_settle_read_the_gang_cache() -> None:
    cache = GangCache(CoschedulingArgs())
    pg = parse_pod_group({"metadata": {"namespace": "default", "name": "pg"}, "spec": {"minMember": 2}})
    cache.on_pod_group_add(pg)
    assert sync(cache, pg, NOW).phase == "Pending"
    cache.on_pod_add(_child("a", "Running") | {"spec": {"nodeName": "n1"}})
    cache.on_pod_add(_child("b", "Running") | {"spec": {"nodeName": "n1"}})
    settled = settle(cache, pg, NOW)
    assert (settled.status.phase, settled.status.scheduled, settled.status.running) == ("Running", 2, 2)
    assert settle(GangCache(CoschedulingArgs()), pg, NOW).status.phase == "Pending"  # no gang: no children
