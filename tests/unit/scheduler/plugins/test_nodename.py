"""NodeName: a pod with spec.nodeName fits only that node (kube 1.20.2's reason and code), equal to its
oracle (tests/oracles/basic.py) over generated snapshots."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.plugins.nodename import NodeName

from ._oracle_checks import check_filter
from ._support import add_nodes, make_node, make_pod

REJECT = Status(
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("node(s) didn't match the requested hostname",), "NodeName"
)
OK = Status.success()


def snap() -> Snapshot:
    return Snapshot.build([make_node("a"), make_node("b"), make_node("c")])


def test_pod_naming_a_node_fits_only_that_node() -> None:
    assert check_filter(NodeName(), make_pod(node="b"), snap()) == [REJECT, OK, REJECT]


def test_pod_without_node_name_fits_everywhere() -> None:
    assert check_filter(NodeName(), make_pod(), snap()) == [OK, OK, OK]
    assert check_filter(NodeName(), make_pod(nodeName=""), snap()) == [OK, OK, OK]
    assert check_filter(NodeName(), make_pod(nodeName=7), snap()) == [OK, OK, OK]  # not a string: unset


def test_pod_naming_an_unknown_node_fits_nowhere() -> None:
    assert check_filter(NodeName(), make_pod(node="zz"), snap()) == [REJECT] * 3


def test_a_node_added_later_is_the_named_one() -> None:
    s = snap()
    add_nodes(s, [make_node("d")], 2)
    assert check_filter(NodeName(), make_pod(node="d"), s) == [REJECT, REJECT, REJECT, OK]


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 6), st.sampled_from(["", "n0", "n3", "x", "N0"]))
def test_plugin_equals_oracle(n: int, wanted: str) -> None:
    nodes: list[dict[str, Any]] = [make_node(f"n{i}") for i in range(n)]
    check_filter(NodeName(), make_pod(nodeName=wanted), Snapshot.build(nodes))
