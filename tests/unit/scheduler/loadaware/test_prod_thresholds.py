"""When prodUsageThresholds count (docs/rules/scheduler.md, LoadAwareScheduling Filter): only when the
effective vector (the node annotation's section when it has a key, else the args) has a value other than
0 over the plugin's resource vector. An all-zero vector behaves exactly like no prod thresholds at all,
in every form of Filter; Score's prod mode depends on scoreAccordingProdUsage alone."""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apis.nodemetric import NodeMetric
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.loadaware import LoadAwareScheduling
from scheduler.plugins.loadaware.args import LoadAwareSchedulingArgs
from scheduler.plugins.loadaware.profile import node_profile

from .test_property import NOW, check_equal, world_st

ANNOTATION = "scheduling.koordinator.sh/usage-thresholds"
values = st.one_of(st.just(0), st.integers(-3, 100))
args_maps = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(["cpu", "memory", "example.com/foo"]), values.filter(lambda v: v >= 0)),
)
annotation_maps = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "example.com/bar"]), values),
)


def _node(annotation: dict[str, Any] | None) -> dict[str, Any]:
    md: dict[str, Any] = {"name": "n"}
    if annotation is not None:
        md["annotations"] = {ANNOTATION: json.dumps(annotation)}
    return {"metadata": md, "status": {"allocatable": {"cpu": "16", "memory": "64Gi"}}}


@settings(max_examples=300)
@given(args_maps, annotation_maps, st.booleans(), st.booleans())
def test_prod_set_is_a_non_zero_value_in_the_effective_vector(
    args_prod: dict[str, int] | None, ann_prod: dict[str, int] | None, gpu: bool, usage_section: bool
) -> None:
    raw: dict[str, Any] = {"supportedResources": ["nvidia.com/gpu"]} if gpu else {}
    if args_prod is not None:
        raw["prodUsageThresholds"] = args_prod
    args = LoadAwareSchedulingArgs.from_dict(raw)
    resources = args.resources
    annotation: dict[str, Any] | None = None
    if ann_prod is not None or usage_section:
        annotation = {"usageThresholds": {"cpu": 40}} if usage_section else {}
        if ann_prod is not None:
            annotation["prodUsageThresholds"] = ann_prod
    effective = ann_prod if ann_prod else (args_prod or {})
    profile = node_profile(args, resources, _node(annotation))
    assert profile.prod == tuple(effective.get(r, 0) for r in resources)
    assert profile.prod_set == any(v != 0 for k, v in effective.items() if k in resources)


def test_examples_of_the_rule() -> None:
    def prod_set(raw: dict[str, Any], annotation: dict[str, Any] | None = None) -> bool:
        args = LoadAwareSchedulingArgs.from_dict(raw)
        return node_profile(args, args.resources, _node(annotation)).prod_set

    assert not prod_set({})
    assert not prod_set({"prodUsageThresholds": {"cpu": 0}})
    assert not prod_set({"prodUsageThresholds": {"cpu": 0, "memory": 0}})
    assert prod_set({"prodUsageThresholds": {"cpu": 0, "memory": 80}})
    assert not prod_set({"prodUsageThresholds": {"cpu": 50}}, {"prodUsageThresholds": {"cpu": 0}})
    assert not prod_set({"prodUsageThresholds": {"cpu": 50}}, {"prodUsageThresholds": {"nvidia.com/gpu": 9}})
    assert prod_set({"prodUsageThresholds": {"cpu": 0}}, {"prodUsageThresholds": {"memory": 20}})
    assert prod_set({}, {"prodUsageThresholds": {"cpu": -1}})
    assert prod_set({"prodUsageThresholds": {"cpu": 50}}, {"prodUsageThresholds": {}})  # empty section: args


ZERO_ARGS = st.sampled_from([None, {"cpu": 0}, {"cpu": 0, "memory": 0}])
ZERO_SECTIONS = st.sampled_from([None, {"cpu": 0}, {"cpu": 0, "memory": 0}, {"example.com/bar": 40}])
OTHER_SECTIONS: st.SearchStrategy[dict[str, Any]] = st.sampled_from(
    [
        {},
        {"usageThresholds": {"cpu": 30}},
        {"aggregatedUsage": {"usageThresholds": {"cpu": 50}, "usageAggregationType": "p95"}},
    ]
)


def _plugin(args: dict[str, Any], world: dict[str, Any]) -> LoadAwareScheduling:
    plugin = LoadAwareScheduling(args, clock=lambda: NOW)
    for name, nm in world["metrics"].items():
        plugin.on_node_metric(name, NodeMetric.from_dict(nm))
    for pod in world["pods"]:
        plugin.on_pod_add(pod)
    return plugin


def _with_annotation(node: dict[str, Any], annotation: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(node)
    out["metadata"]["annotations"] = {ANNOTATION: json.dumps(annotation)}
    return out


def _results(plugin: LoadAwareScheduling, snapshot: Snapshot, pod: dict[str, Any]) -> list[Any]:
    state = CycleState(NOW)
    plugin.pre_filter(state, pod, snapshot)
    result = plugin.filter_all(state, pod, snapshot)
    scores = plugin.score_all(state, pod, snapshot, np.arange(snapshot.n, dtype=np.int64))
    return [
        (result.status_of(i).code, result.status_of(i).reasons, int(scores[i])) for i in range(snapshot.n)
    ]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world_st(), st.data())
def test_an_all_zero_prod_vector_is_no_prod_vector(world: dict[str, Any], data: st.DataObject) -> None:
    """Twin clusters: one with all-zero prod vectors in args and annotations, one without any; every
    pod (also a koord-prod one) gets the same Filter and Score on every node, in every form."""
    twin_args = {k: v for k, v in world["args"].items() if k != "prodUsageThresholds"}
    args = dict(twin_args)
    zero = data.draw(ZERO_ARGS)
    if zero is not None:
        args["prodUsageThresholds"] = zero
    nodes, twin_nodes = [], []
    for node in world["nodes"]:
        other, section = data.draw(OTHER_SECTIONS), data.draw(ZERO_SECTIONS)
        with_prod = other if section is None else {**other, "prodUsageThresholds": section}
        nodes.append(_with_annotation(node, with_prod))
        twin_nodes.append(_with_annotation(node, other))
    plugin, twin = _plugin(args, world), _plugin(twin_args, world)
    snapshot, twin_snapshot = Snapshot.build(nodes), Snapshot.build(twin_nodes)
    incoming = world["incoming"]
    prod = copy.deepcopy(incoming)
    prod["metadata"]["labels"] = {"koordinator.sh/priority-class": "koord-prod"}
    for pod in (incoming, prod):
        assert _results(plugin, snapshot, pod) == _results(twin, twin_snapshot, pod)
        check_equal(plugin, snapshot, pod)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world_st(), st.sampled_from([{"cpu": 0}, {"cpu": 50}, {"cpu": 0, "memory": 10}]))
def test_score_ignores_prod_thresholds(world: dict[str, Any], prod_thresholds: dict[str, int]) -> None:
    """Score's prod mode is scoreAccordingProdUsage and a koord-prod pod, whatever prodUsageThresholds say."""
    base = {k: v for k, v in world["args"].items() if k != "prodUsageThresholds"}
    with_prod = {**base, "prodUsageThresholds": prod_thresholds}
    snapshot = Snapshot.build(world["nodes"])
    prod = copy.deepcopy(world["incoming"])
    prod["metadata"]["labels"] = {"koordinator.sh/priority-class": "koord-prod"}
    for pod in (world["incoming"], prod):
        a = [s for *_, s in _results(_plugin(base, world), snapshot, pod)]
        b = [s for *_, s in _results(_plugin(with_prod, world), snapshot, pod)]
        assert a == b
