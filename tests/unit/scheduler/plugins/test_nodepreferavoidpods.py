"""NodePreferAvoidPods: 0 on nodes whose preferAvoidPods annotation lists the pod's RC/RS controller,
100 elsewhere; the annotation decoded as Go decodes v1.AvoidPods; the view follows node changes; equal
to its oracle (tests/oracles/basic.py) over generated snapshots."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.nodepreferavoidpods import ANNOTATION, NodePreferAvoidPods, avoided_controllers

from ._oracle_checks import check_scores
from ._support import make_node, make_pod, refresh_nodes


def avoid(*controllers: tuple[str, str], **entry: Any) -> str:
    return json.dumps(
        {
            "preferAvoidPods": [
                {
                    "podSignature": {"podController": {"kind": k, "uid": u, "name": "x", "controller": True}},
                    **entry,
                }
                for k, u in controllers
            ]
        }
    )


def node(name: str, annotation: str | None = None) -> dict[str, Any]:
    n = make_node(name)
    if annotation is not None:
        n["metadata"]["annotations"] = {ANNOTATION: annotation}
    return n


def owned(kind: str, uid: str, controller: Any = True) -> dict[str, Any]:
    pod = make_pod()
    pod["metadata"]["ownerReferences"] = [
        {"kind": "Other", "uid": "o", "controller": False},
        {"kind": kind, "uid": uid, "controller": controller, "name": "c", "apiVersion": "apps/v1"},
    ]
    return pod


def scores(pod: dict[str, Any], *annotations: str | None) -> list[int]:
    snap = Snapshot.build([node(f"n{i}", a) for i, a in enumerate(annotations)])
    return check_scores(NodePreferAvoidPods(), pod, snap)


def test_node_avoiding_the_pods_controller_scores_zero() -> None:
    got = scores(owned("ReplicaSet", "u1"), avoid(("ReplicaSet", "u1")), avoid(("ReplicaSet", "u2")), None)
    assert got == [0, 100, 100]
    rc = owned("ReplicationController", "u1")
    assert scores(rc, avoid(("ReplicaSet", "u1"), ("ReplicationController", "u1"))) == [0]


@pytest.mark.parametrize(
    "pod",
    [
        make_pod(),  # no owner
        owned("StatefulSet", "u1"),  # only RC and RS count
        owned("ReplicaSet", "u1", controller=False),  # not the controller
        owned("ReplicaSet", "u1", controller=None),
    ],
)
def test_pods_without_an_rc_or_rs_controller_score_100(pod: dict[str, Any]) -> None:
    assert scores(pod, avoid(("ReplicaSet", "u1"), ("StatefulSet", "u1"))) == [100]


@pytest.mark.parametrize(
    ("annotation", "avoided"),
    [
        ("", frozenset()),
        ("null", frozenset()),
        ('{"preferAvoidPods": null}', frozenset()),
        ("not json", frozenset()),
        ("[1]", frozenset()),  # not an object
        ('{"preferAvoidPods": "x"}', frozenset()),  # wrong type anywhere: the annotation is ignored
        (
            '{"preferAvoidPods": [{"podSignature": {"podController": {"kind": "ReplicaSet", "uid": 7}}}]}',
            frozenset(),
        ),
        (avoid(("ReplicaSet", "u1"), evictionTime="yesterday"), frozenset()),  # not RFC 3339
        ('{"preferAvoidPods": [NaN]}', frozenset()),
        (
            avoid(("ReplicaSet", "u1"), evictionTime="2021-01-02T03:04:05Z", reason="r"),
            {("ReplicaSet", "u1")},
        ),
        # keys match case-insensitively, unknown keys are ignored, a null entry matches nothing
        (
            '{"PreferAvoidPods": [{"PODSIGNATURE": {"podController": {"Kind": "ReplicaSet", "UID": "u1"}}, '
            '"x": 1}, null]}',
            {("ReplicaSet", "u1")},
        ),
        ('{"preferAvoidPods": [{"podSignature": {}}]}', frozenset()),  # no podController
    ],
)
def test_annotation_decoding(annotation: str, avoided: frozenset[tuple[str, str]]) -> None:
    assert avoided_controllers(node("n", annotation)) == avoided
    assert scores(owned("ReplicaSet", "u1"), annotation) == [0 if avoided else 100]


def test_scores_follow_node_changes() -> None:
    plugin, pod = NodePreferAvoidPods(), owned("ReplicaSet", "u1")
    snap = Snapshot.build([node("a"), node("b", avoid(("ReplicaSet", "u1")))])
    assert check_scores(plugin, pod, snap) == [100, 0]
    refresh_nodes(snap, {0: node("a", avoid(("ReplicaSet", "u1"))), 1: node("b")}, 2)
    assert check_scores(plugin, pod, snap) == [0, 100]


controllers = st.tuples(
    st.sampled_from(["ReplicaSet", "ReplicationController", "Job"]), st.sampled_from(["u1", "u2"])
)
annotations = st.one_of(
    st.none(),
    st.lists(controllers, max_size=3).map(lambda cs: avoid(*cs)),
    st.sampled_from(["", "{}", "x", '{"preferAvoidPods": 1}']),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(annotations, max_size=6), controllers, st.sampled_from([True, False, None]), st.data())
def test_plugin_equals_oracle(
    anns: list[str | None], ctrl: tuple[str, str], is_controller: Any, data: st.DataObject
) -> None:
    snap = Snapshot.build([node(f"n{i}", a) for i, a in enumerate(anns)])
    pod = owned(*ctrl, controller=is_controller)
    check_scores(NodePreferAvoidPods(), pod, snap)
    if anns:
        refresh_nodes(snap, {0: node("n0", data.draw(annotations))}, 3)
        check_scores(NodePreferAvoidPods(), pod, snap)
