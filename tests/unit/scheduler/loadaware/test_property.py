"""Property: for random nodes, NodeMetrics, assigned pods, incoming pod and args, the plugin's
`filter_all`/`score_all` equal the per-node oracle (tests/oracles/loadaware.py) on every node (reasons
included), before and after a sequence of Reserve/Unreserve and pod/NodeMetric events and node-object
replacements (the snapshot re-derives those rows); the incremental sums equal a from-scratch rebuild."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apis.nodemetric import NodeMetric
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.loadaware import LoadAwareScheduling
from tests.oracles.loadaware import LoadAwareOracle

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
NOW = T0.timestamp()


def ts(off: int) -> str:
    return (T0 + dt.timedelta(seconds=off)).strftime("%Y-%m-%dT%H:%M:%SZ")


pct = st.integers(0, 100)
CLASSES = [None, "koord-prod", "koord-batch", "koord-mid", "koord-free"]
#: args prodUsageThresholds: set ones, all-zero ones (empty: Prod pods take the aggregated / usage
#: thresholds) including one over a resource only this map adds to the vector, and partly-zero ones (set).
PROD_ARGS = st.one_of(
    st.fixed_dictionaries({"cpu": pct}),
    st.sampled_from([{"cpu": 0}, {"cpu": 0, "memory": 0}, {"example.com/foo": 0}]),
    st.fixed_dictionaries({"cpu": st.just(0), "memory": pct}),
)
#: node annotations: sections that replace the args profile, among them all-zero and partly-zero prod
#: vectors, a prod vector naming only a resource outside the vector (empty) and a negative one (set).
_AGG_ANNOTATION = '"aggregatedUsage": {"usageThresholds": {"cpu": 50}, "usageAggregationType": "p95"}'
ANNOTATIONS = [
    None,
    '{"usageThresholds": {"cpu": 50}}',
    '{"prodUsageThresholds": {"memory": 40}}',
    "{bad",
    "{}",
    '{"prodUsageThresholds": {"cpu": 0}}',
    '{"prodUsageThresholds": {"cpu": 0, "memory": 0}}',
    '{"prodUsageThresholds": {"cpu": 0, "memory": 40}}',
    '{"prodUsageThresholds": {"nvidia.com/gpu": 30}}',
    '{"prodUsageThresholds": {"cpu": -1}}',
    '{"prodUsageThresholds": {"memory": 0}, "usageThresholds": {"cpu": 30}}',
    '{"prodUsageThresholds": {"cpu": 0}, ' + _AGG_ANNOTATION + "}",
    '{"prodUsageThresholds": {"cpu": 0, "memory": 20}, ' + _AGG_ANNOTATION + "}",
]


@st.composite
def args_st(draw: st.DrawFn) -> dict[str, Any]:
    a: dict[str, Any] = {
        "usageThresholds": {"cpu": draw(pct), "memory": draw(pct)},
        "filterExpiredNodeMetrics": draw(st.booleans()),
        "enableScheduleWhenNodeMetricsExpired": draw(st.booleans()),
        "prodUsageIncludeSys": draw(st.booleans()),
        "scoreAccordingProdUsage": draw(st.booleans()),
        "dominantResourceWeight": draw(st.integers(0, 2)),
        "resourceWeights": draw(st.sampled_from([{}, {"cpu": 1, "memory": 1}, {"cpu": 3, "memory": 1}])),
    }
    if draw(st.booleans()):
        a["prodUsageThresholds"] = draw(PROD_ARGS)
    if draw(st.booleans()):
        a["aggregated"] = {
            "usageThresholds": {"cpu": draw(pct)},
            "usageAggregationType": draw(st.sampled_from(["p95", "avg"])),
            "usageAggregatedDuration": draw(st.sampled_from(["0s", "5m", "15m"])),
            "scoreAggregationType": draw(st.sampled_from(["", "p95"])),
            "scoreAggregatedDuration": draw(st.sampled_from(["0s", "5m", "15m"])),
        }
    if draw(st.booleans()):
        a["supportedResources"] = ["nvidia.com/gpu"]
    if draw(st.booleans()):
        a["estimatedSecondsAfterPodScheduled"] = draw(st.integers(0, 300))
    a["allowCustomizeEstimation"] = draw(st.booleans())
    return a


@st.composite
def node_st(draw: st.DrawFn, name: str) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name}
    ann = draw(st.sampled_from(ANNOTATIONS))
    if ann is not None:
        md["annotations"] = {"scheduling.koordinator.sh/usage-thresholds": ann}
    alloc = {"cpu": f"{draw(st.integers(0, 32))}", "memory": f"{draw(st.integers(0, 64))}Gi"}
    if draw(st.integers(0, 9)) == 0:  # outside int64's exact range: the Python-int path
        alloc[draw(st.sampled_from(["cpu", "memory"]))] = draw(st.sampled_from(BIG))
    return {"metadata": md, "status": {"allocatable": alloc}}


#: quantities beyond 2**53 (in milli-cpu or bytes), near int64's limit, and negative
BIG = ["9007199254740993", "90071992547409930", "9223372036854775807", "-3", "20000000000000"]


def usage(draw: st.DrawFn) -> dict[str, str]:
    if draw(st.integers(0, 19)) == 0:
        return {"cpu": f"{draw(st.integers(0, 20000))}m", "memory": draw(st.sampled_from(BIG))}
    return {"cpu": f"{draw(st.integers(0, 20000))}m", "memory": f"{draw(st.integers(0, 70))}Gi"}


@st.composite
def metric_st(draw: st.DrawFn, name: str, pod_names: list[str]) -> dict[str, Any]:
    status: dict[str, Any] = {}
    off = draw(st.one_of(st.none(), st.integers(-250, 0)))
    if off is not None:
        status["updateTime"] = ts(off)
    if draw(st.integers(0, 5)) > 0:
        nmi: dict[str, Any] = {
            "nodeUsage": {"resources": usage(draw)},
            "systemUsage": {"resources": usage(draw)},
        }
        if draw(st.booleans()):
            nmi["aggregatedNodeUsages"] = [
                {"duration": d, "usage": {"p95": {"resources": usage(draw)} if draw(st.booleans()) else {}}}
                for d in ("5m0s", "30m0s")
            ]
        status["nodeMetric"] = nmi
    pods = []
    for p in pod_names:
        if draw(st.booleans()):
            prio = draw(st.sampled_from(["koord-prod", "koord-batch"]))
            pods.append(
                {"namespace": "ns", "name": p, "priority": prio, "podUsage": {"resources": usage(draw)}}
            )
    if pods:
        status["podsMetric"] = pods
    nm: dict[str, Any] = {"metadata": {"name": name}, "status": status}
    if draw(st.booleans()):
        nm["spec"] = {"metricCollectPolicy": {"reportIntervalSeconds": draw(st.integers(30, 200))}}
    return nm


@st.composite
def pod_st(draw: st.DrawFn, name: str, node: str | None) -> dict[str, Any]:
    req = {"cpu": f"{draw(st.integers(0, 8000))}m", "memory": f"{draw(st.integers(0, 16))}Gi"}
    res: dict[str, Any] = {"requests": req}
    if draw(st.booleans()):
        res["limits"] = {"cpu": f"{draw(st.integers(0, 8000))}m"}
    md: dict[str, Any] = {"namespace": "ns", "name": name}
    cls = draw(st.sampled_from(CLASSES))
    if cls:
        md["labels"] = {"koordinator.sh/priority-class": cls}
        if cls == "koord-batch" and draw(st.booleans()):
            req["kubernetes.io/batch-cpu"] = str(draw(st.integers(0, 8000)))
    if draw(st.booleans()):
        md["annotations"] = {"scheduling.koordinator.sh/load-estimated-scaling-factors": '{"cpu": 100}'}
    pod: dict[str, Any] = {"metadata": md, "spec": {"containers": [{"name": "c", "resources": res}]}}
    if node:
        pod["spec"]["nodeName"] = node
        off = draw(st.one_of(st.none(), st.integers(-300, 0)))
        if off is not None:
            pod["status"] = {
                "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": ts(off)}]
            }
    return pod


@st.composite
def world_st(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 5))
    names = [f"n{i}" for i in range(n)]
    pod_names = [f"p{i}" for i in range(draw(st.integers(0, 6)))]
    pods = [draw(pod_st(p, draw(st.sampled_from(names)))) for p in pod_names]
    metrics = {nm: draw(metric_st(nm, pod_names)) for nm in names if draw(st.integers(0, 4)) > 0}
    events: list[tuple[str, str, dict[str, Any] | None]] = []
    for k in range(draw(st.integers(0, 6))):
        kinds = ["reserve", "unreserve", "delete", "metric", "move", "metric-delete", "node"]
        kind = draw(st.sampled_from(kinds))
        node = draw(st.sampled_from(names))
        if kind == "reserve":
            events.append((kind, node, draw(pod_st(f"r{k}", None))))
        elif kind == "node":
            events.append((kind, node, draw(node_st(node))))
        elif kind == "metric":
            events.append((kind, node, draw(metric_st(node, pod_names))))
        elif kind in ("delete", "move") and pods:
            events.append((kind, node, draw(st.sampled_from(pods))))
        else:
            events.append((kind, node, None))
    return {
        "args": draw(args_st()),
        "nodes": [draw(node_st(x)) for x in names],
        "metrics": metrics,
        "pods": pods,
        "incoming": draw(pod_st("incoming", None)),
        "events": events,
    }


def check_equal(
    plugin: LoadAwareScheduling, snapshot: Snapshot, pod: dict[str, Any], now: float = NOW
) -> None:
    state = CycleState(now)
    plugin.pre_filter(state, pod, snapshot)
    result = plugin.filter_all(state, pod, snapshot)
    scores = plugin.score_all(state, pod, snapshot, np.arange(snapshot.n, dtype=np.int64))
    oracle = LoadAwareOracle(plugin)
    for i in range(snapshot.n):
        single = oracle.filter(state, pod, snapshot, i)
        vec = result.status_of(i)
        assert (vec.code, vec.reasons) == (single.code, single.reasons), snapshot.names[i]
        assert int(scores[i]) == oracle.score(state, pod, snapshot, i)[0], snapshot.names[i]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world_st())
def test_vectorised_equals_per_node_and_rebuild(world: dict[str, Any]) -> None:
    plugin = LoadAwareScheduling(world["args"], clock=lambda: NOW)
    snapshot = Snapshot.build(world["nodes"])
    metrics: dict[str, dict[str, Any]] = dict(world["metrics"])
    for name, nm in metrics.items():
        plugin.on_node_metric(name, NodeMetric.from_dict(nm))
    bound: dict[str, dict[str, Any]] = {}
    reserved: dict[str, tuple[dict[str, Any], str]] = {}
    for pod in world["pods"]:
        plugin.on_pod_add(pod)
        bound[pod["metadata"]["name"]] = pod
    check_equal(plugin, snapshot, world["incoming"])
    state = CycleState(NOW)
    generation = 0
    for kind, node, obj in world["events"]:
        if kind == "reserve":
            plugin.reserve(state, obj, node)
            reserved[obj["metadata"]["name"]] = (obj, node)
        elif kind == "unreserve" and reserved:
            name = sorted(reserved)[0]
            pod, at = reserved.pop(name)
            plugin.unreserve(state, pod, at)
        elif kind == "delete" and obj is not None and obj["metadata"]["name"] in bound:
            plugin.on_pod_delete(bound.pop(obj["metadata"]["name"]))
        elif kind == "move" and obj is not None and obj["metadata"]["name"] in bound:
            old = bound[obj["metadata"]["name"]]
            new = {**old, "spec": {**old["spec"], "nodeName": node}}
            plugin.on_pod_update(old, new)
            bound[obj["metadata"]["name"]] = new
        elif kind == "metric":
            metrics[node] = obj
            plugin.on_node_metric(node, NodeMetric.from_dict(obj))
        elif kind == "metric-delete":
            metrics.pop(node, None)
            plugin.on_node_metric(node, None)
        elif kind == "node" and obj is not None:  # the cache replaces the node dict: the row re-derives
            generation += 1
            info = snapshot.infos[snapshot.index[node]]
            info.set_node(obj, generation)
            snapshot.refresh([info])
        check_equal(plugin, snapshot, world["incoming"])
    # from-scratch rebuild with the final objects (metrics without updateTime would keep an older
    # updateTime incrementally, so compare only when every metric has one)
    fresh = LoadAwareScheduling(world["args"], clock=lambda: NOW)
    for name, nm in metrics.items():
        fresh.on_node_metric(name, NodeMetric.from_dict(nm))
    for pod in bound.values():
        fresh.on_pod_add(pod)
    for pod, at in reserved.values():
        fresh.reserve(state, pod, at)
    if all("updateTime" in nm["status"] for nm in metrics.values()):
        for name in snapshot.names:
            assert fresh.assign.sums_of(name) == plugin.assign.sums_of(name), name
        check_equal(fresh, snapshot, world["incoming"])
        s1, s2 = CycleState(NOW), CycleState(NOW)
        fresh.pre_filter(s1, world["incoming"], snapshot)
        plugin.pre_filter(s2, world["incoming"], snapshot)
        a = fresh.filter_all(s1, world["incoming"], snapshot)
        b = plugin.filter_all(s2, world["incoming"], snapshot)
        assert [a.status_of(i) for i in range(snapshot.n)] == [b.status_of(i) for i in range(snapshot.n)]
