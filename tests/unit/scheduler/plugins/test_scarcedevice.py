"""ScarceDevice (docs/rules/scheduler-nodepool.md#scarcedevice): args and their errors, which nodes are
scarce (listed models, or every value), the ways a pod asks for a model (its own labels do not), GPU
requests without a model, the Hard filter's status and the Soft score, each checked against the oracle
(tests/oracles/nodepool.py)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.framework.interfaces import FilterAllPlugin, ScoreAllPlugin
from scheduler.framework.snapshot import NodeInfo, Snapshot
from scheduler.framework.status import Code, Status
from scheduler.plugins.scarcedevice import (
    DEFAULT_LABEL,
    ERR_REASON,
    ScarceDevice,
    ScarceDeviceArgs,
    ScarceDeviceScore,
    pod_models,
)

from ._nodepool_support import filter_statuses, in_term, pod_with, scores
from ._support import make_node, refresh_nodes

GPU = DEFAULT_LABEL
OK = Status.success()
REJECT = Status(
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
    ("node(s) have a scarce device model the pod did not ask for",),
    "ScarceDevice",
)


def cluster() -> Snapshot:
    """Rows in name order: a (A100), b (H100), c (T4), d (no GPU label)."""
    return Snapshot.build([
        make_node("a", labels={GPU: "A100"}, allocatable={"cpu": "8", "nvidia.com/gpu": "8"}),
        make_node("b", labels={GPU: "H100"}, allocatable={"cpu": "8", "nvidia.com/gpu": "8"}),
        make_node("c", labels={GPU: "T4"}, allocatable={"cpu": "8", "nvidia.com/gpu": "4"}),
        make_node("d"),
    ])  # fmt: skip


def hard(args: dict[str, Any] | None = None) -> ScarceDevice:
    plugin = ScarceDevice.from_args(args or {})
    assert isinstance(plugin, ScarceDevice)
    return plugin


def soft(args: dict[str, Any] | None = None) -> ScarceDeviceScore:
    plugin = ScarceDevice.from_args({**(args or {}), "mode": "Soft"})
    assert isinstance(plugin, ScarceDeviceScore)
    return plugin


SCARCE = {"models": ["A100", "H100"]}


def test_reason() -> None:
    assert ERR_REASON == "node(s) have a scarce device model the pod did not ask for"


# --- args ---------------------------------------------------------------------------------------------
def test_args_defaults() -> None:
    assert ScarceDeviceArgs.from_args(None) == ScarceDeviceArgs(
        "node.koordinator.sh/gpu-model", frozenset(), "Hard"
    )
    assert ScarceDeviceArgs.from_args({"label": None, "models": None, "mode": None}) == ScarceDeviceArgs()
    got = ScarceDeviceArgs.from_args({"label": "example.com/gpu", "models": ["A100", "A100"], "mode": "Soft"})
    assert got == ScarceDeviceArgs("example.com/gpu", frozenset({"A100"}), "Soft")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"mode": "Sometimes"}, "mode='Sometimes': must be Hard or Soft"),
        ({"mode": None, "models": "A100"}, "models='A100': must be a list of strings"),
        ({"models": ["A100", 7]}, "models[1]=7: must be a string"),
        ({"models": ["A100 80G"]}, "models[0]='A100 80G': must be a valid label value"),
        ({"models": ["x" * 64]}, f"models[0]={'x' * 64!r}: must be a valid label value"),
        ({"label": "a b"}, "label='a b': must be a valid label key ([prefix/]name)"),
        ({"model": ["A100"]}, "model=['A100']: unknown field"),
    ],
)
def test_args_errors_name_field_and_value(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as e:
        ScarceDevice.from_args(args)
    assert str(e.value) == message


def test_modes_are_a_filter_or_a_score_never_both() -> None:
    h, s = hard(), soft()
    assert isinstance(h, FilterAllPlugin) and not isinstance(h, ScoreAllPlugin)
    assert isinstance(s, ScoreAllPlugin) and not isinstance(s, FilterAllPlugin)
    assert h.name == s.name == "ScarceDevice"


# --- what a pod asks for --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pod", "models"),
    [
        (pod_with(), set()),
        (pod_with(selector={GPU: "A100"}), {"A100"}),
        (pod_with(terms=[in_term(GPU, "A100", "H100")]), {"A100", "H100"}),
        (pod_with(terms=[in_term("zone", "z"), in_term(GPU, "H100")]), {"H100"}),
        (pod_with(labels={GPU: "A100"}), set()),  # its own label names no hardware it needs
        (pod_with(requests={"nvidia.com/gpu": "1"}), set()),  # a GPU, any model
        (
            pod_with(terms=[{"matchExpressions": [{"key": GPU, "operator": "NotIn", "values": ["T4"]}]}]),
            set(),
        ),
    ],
)
def test_models_a_pod_asks_for(pod: dict[str, Any], models: set[str]) -> None:
    assert pod_models(pod, GPU) == models


# --- Hard -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pod", "want"),
    [
        (pod_with(), [REJECT, REJECT, OK, OK]),  # no GPU: off the scarce cards
        (pod_with(requests={"nvidia.com/gpu": "1"}), [REJECT, REJECT, OK, OK]),  # any card: the common one
        (pod_with(requests={"koordinator.sh/gpu-core": "100"}), [REJECT, REJECT, OK, OK]),
        (pod_with(selector={GPU: "A100"}), [OK, REJECT, OK, OK]),
        (pod_with(terms=[in_term(GPU, "A100", "H100")]), [OK, OK, OK, OK]),
        (
            pod_with(selector={GPU: "T4"}),
            [REJECT, REJECT, OK, OK],
        ),  # T4 is not scarce: asks for nothing guarded
        (pod_with(labels={GPU: "A100"}), [REJECT, REJECT, OK, OK]),
    ],
)
def test_hard_filter_listed_models(pod: dict[str, Any], want: list[Status]) -> None:
    assert filter_statuses(hard(SCARCE), pod, cluster()) == want


def test_hard_every_value_scarce_when_models_is_empty() -> None:
    snap, plugin = cluster(), hard()
    assert filter_statuses(plugin, pod_with(), snap) == [REJECT, REJECT, REJECT, OK]
    assert filter_statuses(plugin, pod_with(selector={GPU: "T4"}), snap) == [REJECT, REJECT, OK, OK]


def test_hard_unlabelled_cluster_accepts_everyone() -> None:
    snap = Snapshot.build([make_node("a"), make_node("b", labels={"zone": "z"})])
    for pod in (pod_with(), pod_with(selector={GPU: "A100"}), pod_with(requests={"nvidia.com/gpu": "1"})):
        assert filter_statuses(hard(), pod, snap) == [OK, OK]


def test_hard_follows_label_changes_and_nodes_joining() -> None:
    snap, plugin, plain = cluster(), hard(SCARCE), pod_with()
    refresh_nodes(snap, {2: make_node("c", labels={GPU: "H100"}), 0: make_node("a", labels={GPU: "V100"})}, 1)
    assert filter_statuses(plugin, plain, snap) == [OK, REJECT, REJECT, OK]
    snap.apply_nodes([NodeInfo.of(make_node("e", labels={GPU: "A100"}))], ["d"])
    got = dict(zip(snap.names, filter_statuses(plugin, plain, snap), strict=True))
    assert got == {"a": OK, "b": REJECT, "c": REJECT, "e": REJECT}


# --- Soft -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pod", "want"),
    [
        (pod_with(), [0, 0, 100, 100]),
        (pod_with(requests={"nvidia.com/gpu": "1"}), [0, 0, 100, 100]),
        (pod_with(selector={GPU: "H100"}), [0, 100, 100, 100]),
        (pod_with(terms=[in_term(GPU, "A100", "H100")]), [100, 100, 100, 100]),
    ],
)
def test_soft_scores(pod: dict[str, Any], want: list[int]) -> None:
    snap = cluster()
    assert scores(soft(SCARCE), pod, snap) == want
    assert scores(soft(SCARCE), pod, snap, [0, 3]) == [want[0], want[3]]
