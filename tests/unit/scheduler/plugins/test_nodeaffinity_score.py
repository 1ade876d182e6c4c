"""NodeAffinity Score and args (kube-scheduler v1.20.2): preferred terms' weights summed per node (weight 0
and empty preferences skipped, a preference that does not parse fails PreScore),
``DefaultNormalizeScore``'s exact integer arithmetic, ``NodeAffinityArgs.addedAffinity`` (required ANDed
with its own reason, preferred added) and its validation; the plugin equals its oracle
(tests/oracles/plugins.py) on generated snapshots, args included."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.plugins.nodeaffinity import NodeAffinity
from scheduler.plugins.normalizescore import default_normalize_score
from tests.oracles.plugins import default_normalize

from ._support import (
    assert_matches_oracle,
    assert_scores_match_oracle,
    draw_rows,
    label_sets,
    make_node,
    make_pod,
    node_lists,
    normalized_scores,
    refresh_nodes,
)
from .test_nodeaffinity import affinity, expr, term, terms

ENFORCED = Status(
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
    ("node(s) didn't match scheduler-enforced node affinity",),
    "NodeAffinity",
)
POD = Status(
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
    ("node(s) didn't match Pod's node affinity",),
    "NodeAffinity",
)
OK = Status.success()


def preferred(*weighted: tuple[int, dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"weight": w, "preference": t} for w, t in weighted]


def pref_pod(*weighted: tuple[int, dict[str, Any]], **spec: Any) -> dict[str, Any]:
    na = {"preferredDuringSchedulingIgnoredDuringExecution": preferred(*weighted)}
    return make_pod(affinity={"nodeAffinity": na}, **spec)


NODES = [
    make_node("a", labels={"zone": "z1", "disk": "ssd", "cores": "8"}),
    make_node("b", labels={"zone": "z2", "disk": "ssd", "cores": "32"}),
    make_node("c", labels={"zone": "z3"}),
]


@pytest.mark.parametrize(
    ("pod", "raw", "norm"),
    [
        (make_pod(), [0, 0, 0], [0, 0, 0]),  # no preferences: all 0, left as is
        (pref_pod((5, term(expr("zone", "In", "z1")))), [5, 0, 0], [100, 0, 0]),
        # weights of matched terms add up; 100*score/max truncates: 100*3/7 = 42, 100*4/7 = 57
        (
            pref_pod((3, term(expr("disk", "In", "ssd"))), (4, term(expr("cores", "Gt", "16")))),
            [3, 7, 0],
            [42, 100, 0],
        ),
        (
            pref_pod((1, term(expr("zone", "In", "z1"))), (2, term(expr("zone", "In", "z2")))),
            [1, 2, 0],
            [50, 100, 0],
        ),
        # 100*1/3 = 33 (not 33.3 rounded), 100*2/3 = 66 (not 67)
        (
            pref_pod(
                (1, term(expr("zone", "Exists"))),
                (1, term(expr("disk", "Exists"))),
                (1, term(expr("cores", "Gt", "10"))),
            ),
            [2, 3, 1],
            [66, 100, 33],
        ),
        # the same term twice counts twice; weight 0 and empty preferences are skipped
        (
            pref_pod((2, term(expr("zone", "In", "z3"))), (2, term(expr("zone", "In", "z3")))),
            [0, 0, 4],
            [0, 0, 100],
        ),
        (pref_pod((0, term(expr("zone", "Exists"))), (9, term())), [0, 0, 0], [0, 0, 0]),
        # matchFields on the node's name; a term needs all its requirements
        (pref_pod((6, term(fields=[expr("metadata.name", "In", "c")]))), [0, 0, 6], [0, 0, 100]),
        (
            pref_pod((6, term(expr("disk", "In", "ssd"), fields=[expr("metadata.name", "NotIn", "a")]))),
            [0, 6, 0],
            [0, 100, 0],
        ),
        # required affinity and nodeSelector do not score
        (
            make_pod(nodeSelector={"zone": "z1"}, affinity=affinity(term(expr("zone", "Exists")))),
            [0, 0, 0],
            [0, 0, 0],
        ),
    ],
)
def test_score(pod: dict[str, Any], raw: list[int], norm: list[int]) -> None:
    snap = Snapshot.build(NODES)
    plugin = NodeAffinity()
    assert assert_scores_match_oracle(plugin, pod, snap, [0, 1, 2]) == raw
    assert normalized_scores(plugin, pod, snap) == norm


@pytest.mark.parametrize(
    ("scores", "reverse", "want"),
    [
        ([0, 0], False, [0, 0]),
        ([0, 0], True, [100, 100]),
        ([1, 2, 3], False, [33, 66, 100]),
        ([0, 1, 3], True, [100, 67, 0]),  # 100 - 100*1/3 = 100 - 33
        ([2, 7, 5], True, [72, 0, 29]),  # 100*2/7 = 28, 100*5/7 = 71
        ([-5, 0], False, [-5, 0]),  # max 0: left as they are
        ([-5, 0], True, [100, 100]),
        ([-5, 3], False, [-166, 100]),  # Go truncates toward zero: -500/3 = -166, not -167
        ([2**31 - 1, 1], False, [100, 0]),
    ],
)
def test_default_normalize_score(scores: list[int], reverse: bool, want: list[int]) -> None:
    got = np.asarray(scores, np.int64)
    default_normalize_score(got, reverse)
    assert got.tolist() == want
    plain = np.asarray(scores, np.int64)
    default_normalize(plain, reverse)
    assert plain.tolist() == want


def test_invalid_preference_fails_pre_score_and_the_cycle() -> None:
    bad = pref_pod((5, term(expr("zone", "In", "z1"))), (3, term(expr("cores", "Gt", "many"))))
    plugin = NodeAffinity()
    snap = Snapshot.build(NODES)
    st_ = plugin.pre_score(CycleState(0.0), bad, snap, np.arange(3, dtype=np.int64))
    assert st_.code == Code.ERROR and st_.plugin == "NodeAffinity"
    assert "[1].preference.matchExpressions[0]" in st_.message() and "'many'" in st_.message()
    result = Framework([plugin]).schedule(CycleState(0.0), bad, snap)
    assert result.node is None and result.status.code == Code.ERROR
    # with one feasible node there is no scoring, so no error (as kube-scheduler)
    one = Snapshot.build(NODES[:1])
    assert Framework([plugin]).schedule(CycleState(0.0), bad, one).node == "a"
    # Score without PreScore: the list that does not parse counts nothing
    assert assert_scores_match_oracle(plugin, bad, snap, [0, 1, 2]) == [0, 0, 0]


def test_preferred_affinity_decides_the_node() -> None:
    pod = pref_pod((10, term(expr("zone", "In", "z2"))), (20, term(expr("zone", "In", "z3"))))
    snap = Snapshot.build(NODES)
    assert Framework([NodeAffinity()]).schedule(CycleState(0.0), pod, snap).node == "c"


# --- args -------------------------------------------------------------------------------------------

ADDED_REQUIRED = {"nodeSelectorTerms": [term(expr("disk", "In", "ssd"))]}


def test_added_affinity_filter_is_anded_with_its_own_reason() -> None:
    plugin = NodeAffinity.from_args(
        {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ADDED_REQUIRED}}
    )
    snap = Snapshot.build(NODES)
    assert assert_matches_oracle(plugin, make_pod(), snap) == [OK, OK, ENFORCED]
    # the enforced reason comes first where both fail
    pod = make_pod(nodeSelector={"zone": "z1"})
    assert assert_matches_oracle(plugin, pod, snap) == [OK, POD, ENFORCED]


def test_added_required_without_terms_matches_no_node() -> None:
    empty = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term()]}}
    plugin = NodeAffinity.from_args({"addedAffinity": empty})
    assert assert_matches_oracle(plugin, make_pod(), Snapshot.build(NODES)) == [ENFORCED] * 3
    none = NodeAffinity.from_args({"addedAffinity": {}})
    assert assert_matches_oracle(none, make_pod(), Snapshot.build(NODES)) == [OK] * 3


def test_added_preferred_terms_add_to_the_pods() -> None:
    added = {
        "preferredDuringSchedulingIgnoredDuringExecution": preferred((3, term(expr("zone", "In", "z3"))))
    }
    plugin = NodeAffinity.from_args({"addedAffinity": added})
    snap = Snapshot.build(NODES)
    assert assert_scores_match_oracle(plugin, make_pod(), snap, [0, 1, 2]) == [0, 0, 3]
    pod = pref_pod((1, term(expr("disk", "Exists"))))
    assert assert_scores_match_oracle(plugin, pod, snap, [0, 1, 2]) == [1, 1, 3]
    assert normalized_scores(plugin, pod, snap) == [33, 33, 100]


def test_from_args_defaults() -> None:
    for args in (None, {}, {"addedAffinity": None}, {"apiVersion": "x", "kind": "NodeAffinityArgs"}):
        plugin = NodeAffinity.from_args(args)
        assert plugin.args.required is None and plugin.args.preferred == ()


REQ = "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution"
PREF = "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution"


@pytest.mark.parametrize(
    ("added", "message"),
    [
        ([], "addedAffinity=[]: must be an object"),
        (
            {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [term(expr("zone", "Bogus"))]
                }
            },
            f"{REQ}.nodeSelectorTerms[0].matchExpressions[0]: 'Bogus' is not a valid node selector operator",
        ),
        (
            {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": "x"}},
            f"{REQ}.nodeSelectorTerms='x': must be a list",
        ),
        (
            {
                "preferredDuringSchedulingIgnoredDuringExecution": preferred(
                    (1, term(expr("zone", "Exists"))),
                    (2, term(fields=[expr("metadata.name", "In", "a", "b")])),
                )
            },
            f"{PREF}[1].preference.matchFields[0]: "
            "unexpected number of value (2) for node field selector operator 'In'",
        ),
        (
            {"preferredDuringSchedulingIgnoredDuringExecution": preferred((1, term(expr("k", "In"))))},
            f"{PREF}[0].preference.matchExpressions[0]: "
            "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            {
                "preferredDuringSchedulingIgnoredDuringExecution": preferred(
                    (2**31, term(expr("k", "Exists")))
                )
            },
            f"{PREF}[0].weight=2147483648: must be an int32",
        ),
        (
            {"preferredDuringSchedulingIgnoredDuringExecution": {"weight": 1}},
            f"{PREF}={{'weight': 1}}: must be a list",
        ),
    ],
)
def test_from_args_rejects(added: Any, message: str) -> None:
    with pytest.raises(ValueError) as e:
        NodeAffinity.from_args({"addedAffinity": added})
    assert str(e.value) == message


def test_from_args_keeps_what_kube_accepts() -> None:
    # weight 0 and empty preferences are skipped before parsing (no error); negative weights count
    added = {
        "preferredDuringSchedulingIgnoredDuringExecution": preferred(
            (0, term(expr("zone", "Bogus"))), (4, term()), (-2, term(expr("zone", "Exists")))
        ),
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [term(), term(expr("zone", "Exists"))]
        },
    }
    plugin = NodeAffinity.from_args({"addedAffinity": added})
    assert len(plugin.args.preferred) == 1 and plugin.args.preferred[0][1] == -2
    assert plugin.args.required is not None and len(plugin.args.required) == 1
    snap = Snapshot.build(NODES)
    assert assert_scores_match_oracle(plugin, make_pod(), snap, [0, 1, 2]) == [-2, -2, -2]
    # max 0: DefaultNormalizeScore leaves them
    assert normalized_scores(plugin, make_pod(), snap) == [-2, -2, -2]


# --- property ---------------------------------------------------------------------------------------

weighted_terms = st.lists(st.tuples(st.integers(-3, 100), terms), max_size=3)
added_args = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {},
        optional={
            "requiredDuringSchedulingIgnoredDuringExecution": st.builds(
                lambda ts: {"nodeSelectorTerms": ts}, st.lists(terms, max_size=2)
            ),
            "preferredDuringSchedulingIgnoredDuringExecution": st.builds(
                lambda ws: preferred(*ws), weighted_terms
            ),
        },
    ),
)


@settings(max_examples=300, deadline=None)
@given(node_lists(), weighted_terms, added_args, st.data())
def test_plugin_equals_oracle(
    nodes: list[dict[str, Any]], weighted: Any, added: Any, data: st.DataObject
) -> None:
    try:
        plugin = NodeAffinity.from_args({"addedAffinity": added})
    except ValueError:
        plugin = NodeAffinity()
    snap = Snapshot.build(nodes)
    pod = pref_pod(*weighted)
    assert_matches_oracle(plugin, pod, snap)
    assert_scores_match_oracle(plugin, pod, snap, draw_rows(data, len(nodes)))
    normalized_scores(plugin, pod, snap)
    if nodes:
        changed = draw_rows(data, len(nodes))
        refresh_nodes(snap, {i: make_node(snap.names[i], labels=data.draw(label_sets)) for i in changed}, 13)
        normalized_scores(plugin, pod, snap)
