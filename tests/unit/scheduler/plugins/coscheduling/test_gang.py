"""Gang initialisation from pods and PodGroups (docs/rules/scheduler-coscheduling.md#initialising-a-gang),
the gang-name lookup and Go's ParseInt as the annotations are parsed."""

from __future__ import annotations

import datetime as dt

import pytest

from apis.podgroup import ZERO_TIME, gang_id, gang_name, go_parse_int32, parse_gang_groups, parse_pod_group
from scheduler.plugins.coscheduling.args import CoschedulingArgs
from scheduler.plugins.coscheduling.gang import Gang

from ._support import gang_pod

ARGS = CoschedulingArgs(default_timeout=7 * 10**9, default_match_policy="only-waiting")
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _gang(**annotations: str) -> Gang:
    gang = Gang("default/g", NOW)
    min_available = annotations.pop("min", "2")
    assert gang.try_init_from_pod(gang_pod("p", min_available=min_available, annotations={
        f"gang.scheduling.koordinator.sh/{k.replace('_', '-')}": v for k, v in annotations.items()
    }), ARGS)  # fmt: skip
    return gang


def test_gang_name_lookup_order() -> None:
    pod = gang_pod("p", gang="annotated")
    assert gang_name(pod) == "annotated" and gang_id(pod) == "default/annotated"
    pod["metadata"]["labels"] = {"pod-group.scheduling.sigs.k8s.io/name": "light"}
    assert gang_name(pod) == "light"
    pod["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io"] = "crd"
    assert gang_name(pod) == "crd"
    pod["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io"] = ""  # empty: the next one
    assert gang_name(pod) == "light"
    assert gang_name({"metadata": {"name": "x"}}) == ""


@pytest.mark.parametrize(
    ("text", "value"), [("3", 3), ("+4", 4), ("-1", -1), ("0", 0), ("2147483647", 2**31 - 1)]
)
def test_parse_int32(text: str, value: int) -> None:
    assert go_parse_int32(text) == value


@pytest.mark.parametrize("text", ["", " 3", "3.0", "0x10", "1_000", "2147483648", "two"])
def test_parse_int32_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        go_parse_int32(text)


def test_init_from_pod_reads_every_annotation() -> None:
    gang = _gang(
        min="2",
        total_number="5",
        mode="NonStrict",
        waiting_time="90s",
        match_policy="waiting-and-running",
        groups='["default/z","default/g"]',
    )
    assert (gang.min_required, gang.total_children, gang.mode) == (2, 5, "NonStrict")
    assert (gang.wait_time, gang.match_policy, gang.gang_from) == (
        90 * 10**9,
        "waiting-and-running",
        "GangFromPodAnnotation",
    )
    assert gang.gang_group == ["default/g", "default/z"] and gang.gang_group_id == "default/g,default/z"
    assert gang.has_init


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({"total_number": "x"}, ("total_children", 2)),
        ({"total_number": "1"}, ("total_children", 2)),
        ({"total_number": "0"}, ("total_children", 2)),
        ({"mode": "nonstrict"}, ("mode", "Strict")),
        ({"match_policy": "bogus"}, ("match_policy", "only-waiting")),
        ({"waiting_time": "0"}, ("wait_time", 7 * 10**9)),
        ({"waiting_time": "-3s"}, ("wait_time", 7 * 10**9)),
        ({"waiting_time": "3"}, ("wait_time", 7 * 10**9)),
        ({"groups": "a,b"}, ("gang_group", ["default/g"])),
        ({"groups": "[a,b]"}, ("gang_group", ["default/g"])),
        ({"groups": "[]"}, ("gang_group", ["default/g"])),
        ({"groups": '["x", 1]'}, ("gang_group", ["", "x"])),
    ],
)
def test_invalid_values_fall_back(annotations: dict[str, str], expected: tuple[str, object]) -> None:
    gang = _gang(**annotations)
    assert getattr(gang, expected[0]) == expected[1]


def test_alias_match_policy_read_only_when_the_key_is_empty() -> None:
    gang = Gang("default/g", NOW)
    alias = "pod-group.scheduling.sigs.k8s.io/match-policy"
    both = {alias: "only-waiting", "gang.scheduling.koordinator.sh/match-policy": "waiting-and-running"}
    gang.try_init_from_pod(gang_pod("p", annotations=both), ARGS)
    assert gang.match_policy == "waiting-and-running"
    gang = Gang("default/g", NOW)
    gang.try_init_from_pod(gang_pod("p", annotations={alias: "waiting-and-running"}), ARGS)
    assert gang.match_policy == "waiting-and-running"


def test_init_needs_a_valid_min_and_happens_once() -> None:
    gang = Gang("default/g", NOW)
    assert not gang.try_init_from_pod(gang_pod("a", min_available=None), ARGS)
    assert not gang.try_init_from_pod(gang_pod("b", min_available="x"), ARGS)
    assert not gang.has_init and gang.wait_time == 0 and gang.gang_group == ["default/g"]
    assert gang.try_init_from_pod(gang_pod("c", min_available="0"), ARGS)
    assert not gang.try_init_from_pod(gang_pod("d", min_available="9"), ARGS)
    assert gang.min_required == 0


def test_lightweight_min_label_wins() -> None:
    gang = Gang("default/g", NOW)
    pod = gang_pod("p", min_available="1")
    pod["metadata"]["labels"] = {"pod-group.scheduling.sigs.k8s.io/min-available": "4"}
    assert gang.try_init_from_pod(pod, ARGS) and gang.min_required == 4


def test_init_from_pod_group() -> None:
    meta = {
        "namespace": "ns",
        "name": "pg",
        "creationTimestamp": "2026-01-02T00:00:00Z",
        "annotations": {"gang.scheduling.koordinator.sh/mode": "NonStrict"},
    }
    pg = parse_pod_group({"metadata": meta, "spec": {"minMember": 3, "scheduleTimeoutSeconds": 20}})
    gang = Gang("ns/pg", NOW)
    gang.init_from_pod_group(pg, ARGS)
    assert (gang.min_required, gang.total_children, gang.mode, gang.wait_time) == (
        3,
        3,
        "NonStrict",
        20 * 10**9,
    )
    assert gang.gang_from == "GangFromPodGroupCrd" and gang.has_init
    assert gang.create_time == dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
    for timeout in (0, -5, None):
        spec = {"minMember": 1} if timeout is None else {"minMember": 1, "scheduleTimeoutSeconds": timeout}
        gang.init_from_pod_group(parse_pod_group({"metadata": {"name": "pg"}, "spec": spec}), ARGS)
        assert gang.wait_time == 7 * 10**9 and gang.create_time == ZERO_TIME


def test_parse_gang_groups() -> None:
    assert parse_gang_groups("") == []
    assert parse_gang_groups('"a"') == []
    assert parse_gang_groups("[NaN]") == []
    assert parse_gang_groups('["b","a"]') == ["b", "a"]
