"""The Reservation controller's sync and the garbage collector's test
(docs/rules/scheduler-reservation.md#controller, docs/rules/scheduler-reservation.md#garbage-collection)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from apis.reservation import PHASE_AVAILABLE, PHASE_FAILED, PHASE_SUCCEEDED, is_expired, parse_reservation
from scheduler.plugins.reservation.controller import gc_due, need_expiration, requeue_after_ns, sync
from tests.unit.scheduler.plugins.reservation._support import pod, reservation

NOW = dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC)
S = 10**9


def r_at(created: str = "2026-01-01T11:00:00Z", **kw: Any) -> Any:
    obj = reservation(**kw)
    obj["metadata"]["creationTimestamp"] = created
    return parse_reservation(obj)


def test_need_expiration() -> None:
    assert not need_expiration(r_at(spec={"ttl": "1h"}), NOW)  # exactly 1 h old: not more than ttl
    assert need_expiration(r_at("2026-01-01T10:59:59Z", spec={"ttl": "1h"}), NOW)
    assert not need_expiration(r_at("2020-01-01T00:00:00Z", spec={"ttl": "0s"}), NOW)
    assert need_expiration(r_at(spec={"expires": "2026-01-01T11:59:59Z", "ttl": "48h"}), NOW)
    assert not need_expiration(r_at("2020-01-01T00:00:00Z", phase="Failed"), NOW)


def test_requeue_after() -> None:
    assert requeue_after_ns(r_at(spec={"expires": "2026-01-01T12:00:07Z"}), NOW) == 7 * S
    assert requeue_after_ns(r_at(spec={"expires": "2026-01-01T12:00:00Z"}), NOW) == 0  # exactly 0: none
    assert requeue_after_ns(r_at(spec={"expires": "2025-01-01T00:00:00Z"}), NOW) == 3 * S
    assert requeue_after_ns(r_at(), NOW) == 15 * S
    assert requeue_after_ns(r_at(spec={"ttl": None}), NOW) == 0
    assert requeue_after_ns(r_at(phase="Succeeded"), NOW) == 0


def test_sync_expires_and_records_owners() -> None:
    r, requeue = sync(r_at(), ["n2"], [], NOW)
    assert (r.phase, is_expired(r), requeue) == (PHASE_FAILED, True, 0)
    owner = pod("p1", {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}, owner_of="r1", node_name="n1")
    stranger = pod("p2", owner_of="other", node_name="n1")
    r, requeue = sync(r_at(allocate_once=False), ["n1"], [owner, stranger], NOW)
    assert r.phase == PHASE_AVAILABLE and requeue == 15 * S
    assert [dict(o) for o in r.current_owners] == [{"namespace": "default", "name": "p1", "uid": "uid-p1"}]
    assert {k: str(v) for k, v in r.allocated.items()} == {"cpu": "1", "memory": "1Gi"}
    again, _ = sync(r, ["n1"], [owner], NOW)
    assert again is r  # unchanged: nothing written
    done, requeue = sync(r_at(), ["n1"], [owner], NOW)
    assert (done.phase, requeue) == (PHASE_SUCCEEDED, 0)
    assert done.conditions[-1]["reason"] == "Succeeded" and done.conditions[-1]["status"] == "False"


def test_sync_leaves_unscheduled_and_finished_alone() -> None:
    pending = r_at("2000-01-01T00:00:00Z", node="", phase="Pending")
    assert sync(pending, [], [], NOW) == (pending, 3 * S)
    failed = r_at(phase="Failed")
    assert sync(failed, [], [], NOW) == (failed, 0)


def test_gc_due() -> None:
    expired = parse_reservation(
        {
            **reservation(phase="Failed"),
            "status": {
                "phase": "Failed",
                "nodeName": "n1",
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "Expired",
                        "lastTransitionTime": "2025-12-31T11:00:00Z",
                    }
                ],
            },
        }
    )
    assert gc_due(expired, True, NOW)
    assert not gc_due(expired, True, dt.datetime(2026, 1, 1, 10, tzinfo=dt.UTC))
    assert gc_due(expired, False, dt.datetime(2026, 1, 1, 10, tzinfo=dt.UTC))  # node gone
    assert not gc_due(r_at(), False, NOW)  # neither expired nor succeeded
