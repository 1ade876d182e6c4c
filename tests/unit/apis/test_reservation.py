"""apis.reservation and apis.reservation_pod: parsing with named errors, the CRD defaults, status
predicates and condition writers, requests, the reserve pod, owner matching and the affinity facts
(docs/rules/scheduler-reservation.md#the-crd, docs/rules/scheduler-reservation.md#status,
docs/rules/scheduler-reservation.md#reserve-pod, docs/rules/scheduler-reservation.md#owner-matching)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apis.reservation import (
    DEFAULT_TTL_NS,
    inner_reserved,
    is_active,
    is_available,
    is_expired,
    parse_reservation,
    reservation_requests,
    set_available,
    set_expired,
    set_succeeded,
    set_unschedulable,
)
from apis.reservation_pod import (
    new_reserve_pod,
    parse_affinity,
    reservation_matches_owner,
    restricted_resources,
)

BASE: dict[str, Any] = {"metadata": {"name": "r", "uid": "u"}, "spec": {"owners": [{}]}}


def with_(**parts: Any) -> dict[str, Any]:
    return {**BASE, **parts}


def test_defaults() -> None:
    r = parse_reservation(BASE)
    assert r.ttl_ns == DEFAULT_TTL_NS and r.phase == "Pending" and r.is_allocate_once
    assert parse_reservation(with_(spec={"ttl": "0s", "allocateOnce": False})).ttl_ns == 0
    assert not parse_reservation(with_(spec={"allocateOnce": False})).is_allocate_once


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (5, "reservation: expected an object, got 5"),
        (with_(metadata={"name": 3}), "reservation.metadata.name: expected a string, got 3"),
        (with_(spec={"owners": {}}), "reservation.spec.owners: expected a list"),
        (
            with_(spec={"owners": [{"controller": {"controller": "yes"}}]}),
            r"spec.owners\[0\].controller.controller",
        ),
        (with_(spec={"ttl": "1 hour"}), 'reservation.spec.ttl="1 hour"'),
        (with_(spec={"expires": "tomorrow"}), "reservation.spec.expires"),
        (
            with_(spec={"template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "x"}}}]}}}),
            "requests.cpu",
        ),
        (with_(spec={"template": {"metadata": {"labels": []}}}), "reservation.spec.template.metadata.labels"),
        (with_(status={"conditions": [3]}), r"reservation.status.conditions\[0\]"),
        (with_(status={"allocated": {"cpu": []}}), "reservation.status.allocated"),
    ],
)
def test_errors_name_the_field(obj: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_reservation(obj)


def test_status_predicates() -> None:
    assert not is_active(None) and not is_available(None) and not is_expired(None)
    waiting = parse_reservation(with_(status={"phase": "Waiting", "nodeName": "n"}))
    assert is_active(waiting) and not is_available(waiting)
    only_template = parse_reservation(
        with_(spec={"template": {"spec": {"nodeName": "n"}}}, status={"phase": "Available"})
    )
    assert not is_active(only_template)


def test_condition_writers() -> None:
    conditions = [
        {"type": "Scheduled", "status": "True", "reason": "Scheduled"},
        {"type": "Ready", "status": "True", "reason": "Available"},
    ]
    r = parse_reservation(with_(status={"phase": "Available", "nodeName": "n", "conditions": conditions}))
    expired = set_expired(r, "t")
    assert expired.phase == "Failed" and is_expired(expired)
    assert dict(expired.conditions[1]) == {
        "type": "Ready", "status": "False", "reason": "Expired", "message": "",
        "lastProbeTime": "t", "lastTransitionTime": "t",
    }  # fmt: skip
    again = set_expired(
        parse_reservation(
            with_(
                status={"conditions": [{"type": "Ready", "status": "False", "reason": "X", "message": "m"}]}
            )
        ),
        "t",
    )
    assert (again.conditions[0]["reason"], again.conditions[0]["message"]) == ("Expired", "m")
    succeeded = set_succeeded(parse_reservation(BASE), "t")
    assert succeeded.phase == "Succeeded" and [c["reason"] for c in succeeded.conditions] == ["Succeeded"]
    unsched = set_unschedulable(r, "msg", "t2")
    assert unsched.phase == "Available" and unsched.conditions[0]["reason"] == "Scheduled"
    assert unsched.conditions[0]["lastProbeTime"] == "t2"


def test_set_available_applies_the_resize_annotation() -> None:
    resize = {
        "scheduling.koordinator.sh/reservation-resize-allocatable": json.dumps({"resources": {"cpu": "6"}})
    }
    tmpl = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}]}}
    r = parse_reservation(
        with_(
            metadata={"name": "r", "uid": "u", "annotations": resize}, spec={"owners": [{}], "template": tmpl}
        )
    )
    done = set_available(r, "n1", "t")
    assert {k: str(v) for k, v in done.allocatable.items()} == {"cpu": "6", "memory": "1Gi"}
    assert done.node_name == "n1" and [c["reason"] for c in done.conditions] == ["Scheduled", "Available"]
    assert {k: str(v) for k, v in reservation_requests(done).items()} == {"cpu": "6", "memory": "1Gi"}
    pod = new_reserve_pod(done)
    assert pod["spec"]["containers"][-1]["resources"]["requests"] == {"cpu": "6", "memory": "1Gi"}
    assert pod["spec"]["containers"][0]["resources"] == {}


def test_inner_reserved_and_restricted() -> None:
    assert inner_reserved({}) is None
    assert inner_reserved({"node.koordinator.sh/reservation": "{"}) is None
    cpus = inner_reserved(
        {"node.koordinator.sh/reservation": json.dumps({"resources": {"cpu": "8"}, "reservedCPUs": "0-1,4"})}
    )
    assert cpus is not None and str(cpus["cpu"]) == "3"
    assert restricted_resources(["a", "b"], []) == ["a", "b"]
    assert restricted_resources(["a", "b", "c"], ["c", "a"]) == ["a", "c"]


def test_owner_matching_and_affinity() -> None:
    p = {"apiVersion": "v1", "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "a"}}}
    r = parse_reservation(with_(spec={"owners": [{"object": {"apiVersion": "v1", "namespace": "ns"}}]}))
    assert reservation_matches_owner(p, r)
    assert not reservation_matches_owner({**p, "apiVersion": "v2"}, r)
    key = "scheduling.koordinator.sh/reservation-affinity"
    aff = parse_affinity(
        {
            "metadata": {
                "annotations": {key: json.dumps({"name": "x", "tolerations": [{"operator": "Exists"}]})}
            }
        }
    )
    assert aff.present and aff.name == "x" and aff.tolerate_unschedulable
    with pytest.raises(ValueError, match=r"reservation-affinity\.name"):
        parse_affinity({"metadata": {"annotations": {key: json.dumps({"name": 3})}}})
