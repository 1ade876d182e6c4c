"""NodePool (docs/rules/scheduler-nodepool.md#nodepool): args and their errors, each way a pod asks for
a pool, the Hard filter's status and the Soft score, each checked against the oracle
(tests/oracles/nodepool.py), also after nodes change labels, join and leave."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.config import ConfigError, parse_config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterAllPlugin, ScoreAllPlugin
from scheduler.framework.snapshot import NodeInfo, Snapshot
from scheduler.framework.status import Code, Status
from scheduler.plugins.nodepool import (
    DEFAULT_LABEL,
    ERR_REASON,
    NodePool,
    NodePoolArgs,
    NodePoolScore,
    pod_pools,
)
from scheduler.registry import KNOWN, build_framework

from ._nodepool_support import filter_statuses, in_term, pod_with, scores
from ._support import make_node, refresh_nodes

POOL = DEFAULT_LABEL
OK = Status.success()
REJECT = Status(
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
    ("node(s) belong to a private pool the pod did not ask for",),
    "NodePool",
)


def cluster() -> Snapshot:
    """Rows in name order: a (pool team-a), b (pool team-b), c (no pool), d (pool "")."""
    return Snapshot.build([
        make_node("a", labels={POOL: "team-a"}),
        make_node("b", labels={POOL: "team-b"}),
        make_node("c", labels={"zone": "z1"}),
        make_node("d", labels={POOL: ""}),
    ])  # fmt: skip


def hard(args: dict[str, Any] | None = None) -> NodePool:
    plugin = NodePool.from_args(args or {})
    assert isinstance(plugin, NodePool)
    return plugin


def soft(args: dict[str, Any] | None = None) -> NodePoolScore:
    plugin = NodePool.from_args({**(args or {}), "mode": "Soft"})
    assert isinstance(plugin, NodePoolScore)
    return plugin


def test_reason() -> None:
    assert ERR_REASON == "node(s) belong to a private pool the pod did not ask for"


# --- args ---------------------------------------------------------------------------------------------
def test_args_defaults() -> None:
    assert NodePoolArgs.from_args(None) == NodePoolArgs("node.koordinator.sh/pool", "Hard")
    assert NodePoolArgs.from_args({"label": None, "mode": None}) == NodePoolArgs()
    assert NodePoolArgs.from_args({"label": "example.com/team", "mode": "Soft"}) == NodePoolArgs(
        "example.com/team", "Soft"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"mode": "Sometimes"}, "mode='Sometimes': must be Hard or Soft"),
        ({"mode": "hard"}, "mode='hard': must be Hard or Soft"),
        ({"mode": 1}, "mode=1: must be Hard or Soft"),
        ({"label": "bad key"}, "label='bad key': must be a valid label key ([prefix/]name)"),
        ({"label": ""}, "label='': must be a valid label key ([prefix/]name)"),
        ({"label": "-x.io/pool"}, "label='-x.io/pool': must be a valid label key ([prefix/]name)"),
        ({"label": 7}, "label=7: must be a valid label key ([prefix/]name)"),
        ({"labels": "x"}, "labels='x': unknown field"),
        ({"models": []}, "models=[]: unknown field"),
    ],
)
def test_args_errors_name_field_and_value(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as e:
        NodePool.from_args(args)
    assert str(e.value) == message


def test_args_must_be_an_object() -> None:
    with pytest.raises(ValueError, match=r"args=\[1\]: must be an object"):
        NodePool.from_args([1])  # type: ignore[arg-type]


def test_modes_are_a_filter_or_a_score_never_both() -> None:
    h, s = hard(), soft()
    assert isinstance(h, FilterAllPlugin) and not isinstance(h, ScoreAllPlugin)
    assert isinstance(s, ScoreAllPlugin) and not isinstance(s, FilterAllPlugin)
    assert h.name == s.name == "NodePool"
    assert not hasattr(s, "normalize_scores")  # scores are already 0 or 100


# --- what a pod asks for --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pod", "pools"),
    [
        (pod_with(), set()),
        (pod_with(selector={POOL: "team-a"}), {"team-a"}),
        (pod_with(selector={POOL: None}), {""}),  # a JSON null reads as "", as NodeAffinity reads it
        (pod_with(selector={"zone": "team-a"}), set()),
        (pod_with(terms=[in_term(POOL, "team-a", "team-b")]), {"team-a", "team-b"}),
        (pod_with(terms=[in_term(POOL, "team-a"), in_term(POOL, "team-c")]), {"team-a", "team-c"}),
        (
            pod_with(
                terms=[in_term(POOL, "team-a", also={"key": "zone", "operator": "In", "values": ["z"]})]
            ),
            {"team-a"},
        ),
        (
            pod_with(terms=[{"matchExpressions": [{"key": POOL, "operator": "NotIn", "values": ["x"]}]}]),
            set(),
        ),
        (pod_with(terms=[{"matchExpressions": [{"key": POOL, "operator": "Exists"}]}]), set()),
        (pod_with(labels={POOL: "team-b"}), {"team-b"}),
        (pod_with(labels={"app": "team-b"}), set()),
        (pod_with(selector={POOL: "x"}, terms=[in_term(POOL, "y")], labels={POOL: "z"}), {"x", "y", "z"}),
    ],
)
def test_pools_a_pod_asks_for(pod: dict[str, Any], pools: set[str]) -> None:
    assert pod_pools(pod, POOL) == pools


def test_preferred_terms_do_not_ask() -> None:
    pod = pod_with()
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 5, "preference": in_term(POOL, "team-a")}
            ]
        }
    }
    assert pod_pools(pod, POOL) == frozenset()
    assert filter_statuses(hard(), pod, cluster()) == [REJECT, REJECT, OK, REJECT]


# --- Hard -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pod", "want"),
    [
        (pod_with(), [REJECT, REJECT, OK, REJECT]),  # an outsider: only the node in no pool
        (pod_with(selector={POOL: "team-a"}), [OK, REJECT, OK, REJECT]),
        (pod_with(terms=[in_term(POOL, "team-a", "team-b")]), [OK, OK, OK, REJECT]),
        (pod_with(labels={POOL: "team-b"}), [REJECT, OK, OK, REJECT]),
        (pod_with(selector={POOL: ""}), [REJECT, REJECT, OK, OK]),  # the pool named ""
        (pod_with(selector={POOL: "team-z"}), [REJECT, REJECT, OK, REJECT]),
    ],
)
def test_hard_filter(pod: dict[str, Any], want: list[Status]) -> None:
    assert filter_statuses(hard(), pod, cluster()) == want


def test_hard_unlabelled_cluster_accepts_everyone() -> None:
    snap = Snapshot.build([make_node("a"), make_node("b", labels={"zone": "z"})])
    plugin = hard()
    for pod in (pod_with(), pod_with(selector={POOL: "team-a"})):
        assert filter_statuses(plugin, pod, snap) == [OK, OK]
        assert (
            plugin.filter_all(CycleState(0.0), pod, snap).statuses == ()
        )  # nothing rejected, nothing allocated


def test_custom_label_key() -> None:
    snap = cluster()
    plugin = hard({"label": "zone"})
    assert filter_statuses(plugin, pod_with(), snap) == [OK, OK, REJECT, OK]
    assert filter_statuses(plugin, pod_with(labels={"zone": "z1"}), snap) == [OK, OK, OK, OK]


def test_hard_follows_label_changes_and_nodes_joining_and_leaving() -> None:
    snap, plugin, outsider = cluster(), hard(), pod_with()
    assert filter_statuses(plugin, outsider, snap) == [REJECT, REJECT, OK, REJECT]
    refresh_nodes(snap, {0: make_node("a"), 2: make_node("c", labels={POOL: "team-c"})}, 1)
    assert filter_statuses(plugin, outsider, snap) == [OK, REJECT, REJECT, REJECT]
    snap.apply_nodes(
        [NodeInfo.of(make_node("e")), NodeInfo.of(make_node("f", labels={POOL: "team-a"}))], ["b"]
    )
    got = dict(zip(snap.names, filter_statuses(plugin, outsider, snap), strict=True))
    assert got == {"a": OK, "c": REJECT, "d": REJECT, "e": OK, "f": REJECT}
    got = dict(
        zip(snap.names, filter_statuses(plugin, pod_with(selector={POOL: "team-a"}), snap), strict=True)
    )
    assert got == {"a": OK, "c": REJECT, "d": REJECT, "e": OK, "f": OK}


# --- Soft -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pod", "want"),
    [
        (pod_with(), [0, 0, 100, 0]),
        (pod_with(selector={POOL: "team-a"}), [100, 0, 100, 0]),
        (pod_with(terms=[in_term(POOL, "team-b", "")]), [0, 100, 100, 100]),
        (pod_with(labels={POOL: "team-a"}), [100, 0, 100, 0]),
    ],
)
def test_soft_scores(pod: dict[str, Any], want: list[int]) -> None:
    snap = cluster()
    assert scores(soft(), pod, snap) == want
    assert scores(soft(), pod, snap, [1, 2]) == want[1:3]


def test_soft_unlabelled_cluster_scores_every_node_100() -> None:
    snap = Snapshot.build([make_node("a"), make_node("b")])
    assert scores(soft(), pod_with(), snap) == [100, 100]


# --- in a profile -------------------------------------------------------------------------------------
def _profile(plugins: dict[str, Any], args: dict[str, Any]) -> Any:
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "koord-scheduler",
                "plugins": plugins,
                "pluginConfig": [{"name": "NodePool", "args": args}],
            }
        ],
    }
    return parse_config(doc, KNOWN).profiles[0]


@pytest.mark.parametrize(("mode", "filters"), [("Hard", True), ("Soft", False)])
def test_multipoint_puts_each_mode_where_it_acts(mode: str, filters: bool) -> None:
    fw = build_framework(_profile({"multiPoint": {"enabled": [{"name": "NodePool"}]}}, {"mode": mode}))
    assert ("NodePool" in [p.name for p in fw.filters]) == filters
    assert ("NodePool" in [p.name for p in fw.scores]) != filters


def test_a_soft_plugin_at_filter_and_bad_args_are_configuration_errors() -> None:
    with pytest.raises(ConfigError, match="plugin 'NodePool' does not extend the filter extension point"):
        build_framework(_profile({"filter": {"enabled": [{"name": "NodePool"}]}}, {"mode": "Soft"}))
    with pytest.raises(
        ConfigError, match=r"pluginConfig NodePool.args: mode='Sometimes': must be Hard or Soft"
    ):
        build_framework(_profile({"filter": {"enabled": [{"name": "NodePool"}]}}, {"mode": "Sometimes"}))
