"""Shard membership from Leases (docs/shards.md#membership): live by the reader's clock since a record
last changed, never by another host's renewTime; released or deleted Leases leave at once."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.shards.membership import (
    ARBITER_ANNOTATION,
    GROUP_LABEL,
    arbiter_address,
    lease_body,
    lease_name,
    members,
    observe,
)


def lease(identity: str, renew: str, duration: int = 15, address: str = "") -> dict[str, Any]:
    body = lease_body(identity, "koord-scheduler", "ns", now=renew, duration=duration, address=address)
    return body


def test_lease_name_and_body() -> None:
    assert lease_name("koord-manager-7d9f-abc") == "koord-scheduler-shard-koord-manager-7d9f-abc"
    assert lease_name("Host_1") == "koord-scheduler-shard-host-1"
    with pytest.raises(ValueError, match="identity"):
        lease_name("__")
    b = lease_body("a", "grp", "ns", now="2026-01-01T00:00:00.000000Z", duration=15, address="1.2.3.4:5")
    assert b["metadata"]["labels"] == {GROUP_LABEL: "grp"}
    assert b["metadata"]["annotations"] == {ARBITER_ANNOTATION: "1.2.3.4:5"}
    assert b["spec"] == {
        "holderIdentity": "a",
        "leaseDurationSeconds": 15,
        "renewTime": "2026-01-01T00:00:00.000000Z",
    }
    # Withdrawn: a merge patch's null removes the annotation.
    assert lease_body("a", "g", "ns", now="t", duration=1)["metadata"]["annotations"] == {
        ARBITER_ANNOTATION: None
    }


def test_members_live_by_the_readers_clock() -> None:
    # renewTimes from a host whose clock is a year off: irrelevant, only changes count.
    obs = observe({}, [lease("b", "1999-01-01T00:00:00Z"), lease("a", "2999-01-01T00:00:00Z")], now=100.0)
    assert members(obs, 100.0) == ["a", "b"]
    assert members(obs, 114.9) == ["a", "b"]
    # a renews (its record changes), b does not: b expires 15 s after it was first seen.
    obs = observe(obs, [lease("b", "1999-01-01T00:00:00Z"), lease("a", "2999-01-01T00:00:02Z")], now=110.0)
    assert members(obs, 115.0) == ["a"]
    assert members(obs, 125.0) == []


def test_released_or_deleted_leases_leave_at_once() -> None:
    obs = observe({}, [lease("a", "t1"), lease("b", "t1")], now=0.0)
    released = lease("b", "t2")
    released["spec"]["holderIdentity"] = ""
    assert members(observe(obs, [lease("a", "t1"), released], now=1.0), 1.0) == ["a"]
    assert members(observe(obs, [lease("a", "t1")], now=1.0), 1.0) == ["a"]


def test_duration_comes_from_each_lease() -> None:
    obs = observe({}, [lease("a", "t", duration=5), lease("b", "t", duration=60)], now=0.0)
    assert members(obs, 10.0) == ["b"]


def test_arbiter_address_is_the_live_leaders() -> None:
    obs = observe({}, [lease("a", "t", address="10.0.0.1:9"), lease("b", "t", address="10.0.0.2:9")], now=0.0)
    assert arbiter_address(obs, "b", 1.0) == "10.0.0.2:9"
    assert arbiter_address(obs, "", 1.0) == ""
    assert arbiter_address(obs, "c", 1.0) == ""
    assert arbiter_address(obs, "a", 20.0) == ""  # its Lease lapsed: not to be trusted
