"""NodeAffinity: nodeSelector and required node affinity (terms ORed, requirements ANDed, every
operator, invalid requirements, matchFields); the plugin equals its oracle (tests/oracles/plugins.py),
also after rows change or are added."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.plugins.nodeaffinity import LabelColumn, NodeAffinity, parse_int64

from ._support import (
    LABEL_KEYS,
    LABEL_VALUES,
    add_nodes,
    add_pods,
    assert_matches_oracle,
    draw_rows,
    filter_one,
    label_sets,
    make_node,
    make_pod,
    node_lists,
    refresh_nodes,
)

OK = Status.success()
REJECT = Status(
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
    ("node(s) didn't match Pod's node affinity",),
    "NodeAffinity",
)


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }


def term(*exprs: dict[str, Any], fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    t: dict[str, Any] = {}
    if exprs:
        t["matchExpressions"] = list(exprs)
    if fields is not None:
        t["matchFields"] = fields
    return t


LABELS = {"zone": "z1", "tier": "web", "cores": "16", "neg": "-5", "word": "abc"}


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ({}, OK),
        ({"nodeSelector": {"zone": "z1"}}, OK),
        ({"nodeSelector": {"zone": "z1", "tier": "web"}}, OK),
        ({"nodeSelector": {"zone": "z2"}}, REJECT),
        ({"nodeSelector": {"missing": ""}}, REJECT),  # the key must be present
        ({"nodeSelector": {}}, OK),
        ({"affinity": affinity(term(expr("zone", "In", "z0", "z1")))}, OK),
        ({"affinity": affinity(term(expr("zone", "In", "z0")))}, REJECT),
        ({"affinity": affinity(term(expr("missing", "In", "")))}, REJECT),
        ({"affinity": affinity(term(expr("zone", "NotIn", "z0")))}, OK),
        ({"affinity": affinity(term(expr("zone", "NotIn", "z1")))}, REJECT),
        ({"affinity": affinity(term(expr("missing", "NotIn", "x")))}, OK),  # absent key satisfies NotIn
        ({"affinity": affinity(term(expr("zone", "Exists")))}, OK),
        ({"affinity": affinity(term(expr("missing", "Exists")))}, REJECT),
        ({"affinity": affinity(term(expr("missing", "DoesNotExist")))}, OK),
        ({"affinity": affinity(term(expr("zone", "DoesNotExist")))}, REJECT),
        ({"affinity": affinity(term(expr("cores", "Gt", "8")))}, OK),
        ({"affinity": affinity(term(expr("cores", "Gt", "16")))}, REJECT),
        ({"affinity": affinity(term(expr("cores", "Lt", "17")))}, OK),
        ({"affinity": affinity(term(expr("cores", "Lt", "16")))}, REJECT),
        ({"affinity": affinity(term(expr("neg", "Lt", "0")))}, OK),  # the node's label may be negative
        ({"affinity": affinity(term(expr("word", "Gt", "1")))}, REJECT),  # label not an integer
        ({"affinity": affinity(term(expr("missing", "Lt", "100")))}, REJECT),
        # invalid requirements: the whole term matches nothing
        ({"affinity": affinity(term(expr("cores", "Gt", "x")))}, REJECT),
        ({"affinity": affinity(term(expr("cores", "Gt", "1", "2")))}, REJECT),
        ({"affinity": affinity(term(expr("cores", "Gt")))}, REJECT),
        ({"affinity": affinity(term(expr("cores", "Lt", "-20")))}, REJECT),  # "-20" is no label value
        ({"affinity": affinity(term(expr("zone", "In")))}, REJECT),
        ({"affinity": affinity(term(expr("missing", "NotIn")))}, REJECT),
        ({"affinity": affinity(term(expr("zone", "Exists", "z1")))}, REJECT),
        ({"affinity": affinity(term(expr("missing", "DoesNotExist", "x")))}, REJECT),
        ({"affinity": affinity(term(expr("zone", "in", "z1")))}, REJECT),  # operators are case-sensitive
        ({"affinity": affinity(term(expr("bad key", "DoesNotExist")))}, REJECT),
        ({"affinity": affinity(term(expr("zone", "NotIn", "not a value!")))}, REJECT),
        # requirements ANDed, terms ORed
        ({"affinity": affinity(term(expr("zone", "In", "z1"), expr("tier", "In", "db")))}, REJECT),
        ({"affinity": affinity(term(expr("zone", "In", "z1"), expr("tier", "In", "web")))}, OK),
        ({"affinity": affinity(term(expr("zone", "In", "z9")), term(expr("tier", "In", "web")))}, OK),
        ({"affinity": affinity(term(expr("zone", "Gt", "x")), term(expr("tier", "Exists")))}, OK),
        # empty terms and term lists match nothing; a null requirement is no requirement
        ({"affinity": affinity(term())}, REJECT),
        ({"affinity": affinity(term(), term(expr("zone", "Exists")))}, OK),
        ({"affinity": affinity()}, REJECT),
        ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}}, REJECT),
        ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": None}}}, OK),
        ({"affinity": {"nodeAffinity": {}}}, OK),
        ({"affinity": {"podAffinity": {}}}, OK),
        # matchFields: metadata.name In/NotIn with exactly one value
        ({"affinity": affinity(term(fields=[expr("metadata.name", "In", "n")]))}, OK),
        ({"affinity": affinity(term(fields=[expr("metadata.name", "In", "m")]))}, REJECT),
        ({"affinity": affinity(term(fields=[expr("metadata.name", "NotIn", "m")]))}, OK),
        ({"affinity": affinity(term(fields=[expr("metadata.name", "NotIn", "n")]))}, REJECT),
        ({"affinity": affinity(term(fields=[expr("metadata.name", "In", "n", "m")]))}, REJECT),
        ({"affinity": affinity(term(fields=[expr("metadata.name", "Exists")]))}, REJECT),
        ({"affinity": affinity(term(fields=[expr("spec.other", "In", "")]))}, OK),  # unknown field reads ""
        ({"affinity": affinity(term(fields=[expr("spec.other", "In", "x")]))}, REJECT),
        (
            {"affinity": affinity(term(expr("zone", "In", "z1"), fields=[expr("metadata.name", "In", "n")]))},
            OK,
        ),
        (
            {"affinity": affinity(term(expr("zone", "In", "z2"), fields=[expr("metadata.name", "In", "n")]))},
            REJECT,
        ),
        (
            {"affinity": affinity(term(expr("zone", "In", "z1"), fields=[expr("metadata.name", "In", "m")]))},
            REJECT,
        ),
        # nodeSelector AND affinity
        ({"nodeSelector": {"zone": "z2"}, "affinity": affinity(term(expr("zone", "Exists")))}, REJECT),
        ({"nodeSelector": {"zone": "z1"}, "affinity": affinity(term(expr("tier", "NotIn", "web")))}, REJECT),
        ({"nodeSelector": {"zone": "z1"}, "affinity": affinity(term(expr("tier", "In", "web")))}, OK),
    ],
)
def test_filter(spec: dict[str, Any], want: Status) -> None:
    assert filter_one(NodeAffinity(), make_pod(**spec), make_node("n", labels=LABELS)) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("0", 0),
        ("+7", 7),
        ("-12", -12),
        ("9223372036854775807", 2**63 - 1),
        ("9223372036854775808", None),
        ("1_0", None),
        (" 1", None),
        ("", None),
        ("0x10", None),
        ("1.5", None),
        ("٣", None),
    ],
)
def test_parse_int64_is_go_parse_int(text: str, want: int | None) -> None:
    assert parse_int64(text) == want


def test_many_nodes_each_matches_its_rule() -> None:
    nodes = [make_node(f"n{i}", labels={"idx": str(i), "even": str(i % 2 == 0).lower()}) for i in range(20)]
    snap = Snapshot.build(nodes)
    pod = make_pod(affinity=affinity(term(expr("idx", "Gt", "14")), term(expr("even", "In", "true"))))
    got = assert_matches_oracle(NodeAffinity(), pod, snap)
    passed = {snap.names[i] for i, s in enumerate(got) if s.is_success()}
    assert passed == {f"n{i}" for i in range(20) if i > 14 or i % 2 == 0}


def test_cache_follows_label_changes_and_pod_only_changes() -> None:
    plugin = NodeAffinity()
    snap = Snapshot.build([make_node("a", labels={"zone": "z1"}), make_node("b", labels={"zone": "z2"})])
    pod = make_pod(nodeSelector={"zone": "z1"})
    assert assert_matches_oracle(plugin, pod, snap) == [OK, REJECT]
    refresh_nodes(
        snap, {0: make_node("a", labels={"zone": "z3"}), 1: make_node("b", labels={"zone": "z1"})}, 4
    )
    assert assert_matches_oracle(plugin, pod, snap) == [REJECT, OK]
    add_pods(snap, [make_pod("q", node="a")], 5)  # generation moves, labels do not
    assert assert_matches_oracle(plugin, pod, snap) == [REJECT, OK]
    assert assert_matches_oracle(plugin, make_pod(nodeSelector={"zone": "z3"}), snap) == [OK, REJECT]


def test_pre_filter_state_is_used() -> None:
    plugin = NodeAffinity()
    snap = Snapshot.build([make_node("a", labels={"zone": "z1"})])
    state = CycleState(0)
    assert plugin.pre_filter(state, make_pod(nodeSelector={"zone": "z1"}), snap).is_success()
    # the cycle's precomputed terms win over the pod passed in later
    assert plugin.filter_all(state, make_pod(nodeSelector={"zone": "nope"}), snap).passed.all()


def test_label_values_no_row_carries_are_dropped() -> None:
    plugin = NodeAffinity()
    snap = Snapshot.build([make_node("a"), make_node("b", labels={"v": "1"})])
    pod = make_pod(affinity=affinity(term(expr("v", "Gt", "40"))))
    for k in range(80):  # 80 values come and go on row a
        refresh_nodes(snap, {0: make_node("a", labels={"v": str(k)})}, k + 1)
        assert assert_matches_oracle(plugin, pod, snap) == [OK if k > 40 else REJECT, REJECT]
    column = snap.view(("NodeAffinity", "label", "v"), lambda: LabelColumn("v"))
    assert len(column.values) <= 2 * snap.n + 64


# --- property -------------------------------------------------------------------------------------

OPS = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bogus"]
exprs = st.builds(
    lambda k, op, vals: expr(k, op, *vals),
    st.sampled_from(LABEL_KEYS),
    st.sampled_from(OPS),
    st.lists(st.sampled_from(LABEL_VALUES), max_size=2),
)
field_exprs = st.builds(
    lambda k, op, vals: expr(k, op, *vals),
    st.sampled_from(["metadata.name", "spec.x"]),
    st.sampled_from(["In", "NotIn", "Exists"]),
    st.lists(st.sampled_from(["n0", "n1", "n3", ""]), max_size=2),
)
terms = st.builds(
    lambda es, fs: term(*es, fields=fs),
    st.lists(exprs, max_size=3),
    st.one_of(st.none(), st.lists(field_exprs, max_size=2)),
)
pod_specs = st.fixed_dictionaries(
    {},
    optional={
        "nodeSelector": st.dictionaries(
            st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES), max_size=2
        ),
        "affinity": st.builds(lambda ts: affinity(*ts), st.lists(terms, max_size=3)),
    },
)


@settings(max_examples=300, deadline=None)
@given(node_lists(), pod_specs, st.data())
def test_plugin_equals_oracle(nodes: list[dict[str, Any]], spec: Any, data: st.DataObject) -> None:
    plugin = NodeAffinity()
    snap = Snapshot.build(nodes)
    pod = make_pod(**spec)
    assert_matches_oracle(plugin, pod, snap)
    if nodes:
        rows = draw_rows(data, len(nodes))
        refresh_nodes(snap, {i: make_node(snap.names[i], labels=data.draw(label_sets)) for i in rows}, 11)
        assert_matches_oracle(plugin, pod, snap)
        other: dict[str, Any] = data.draw(pod_specs)
        assert_matches_oracle(plugin, make_pod(**other), snap)
    add_nodes(snap, [make_node("m", labels=data.draw(label_sets))], 12)
    assert_matches_oracle(plugin, pod, snap)


def test_an_operator_of_the_wrong_type_makes_its_term_match_nothing() -> None:
    """A scenario or a hand-written object may carry a list where the operator string goes: the term
    does not parse (kube: not a valid operator), never a TypeError."""
    from scheduler.plugins.nodeaffinity_terms import label_req

    assert label_req({"key": "a", "operator": ["In"], "values": ["x"]}) == (
        "['In'] is not a valid node selector operator"
    )
    assert label_req({"key": "a", "operator": {"In": 1}}) == "{'In': 1} is not a valid node selector operator"
