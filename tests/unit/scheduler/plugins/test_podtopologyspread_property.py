"""Property tests: PodTopologySpread and SelectorSpread equal their oracles (tests/oracles/topologyspread.py)
over generated clusters — nodes with hostname/zone/region labels (some missing, some empty), pods in
two namespaces (some terminating), Services/RCs/RSs/StatefulSets, pods with and without constraints
and node affinity — on every row, for Filter, raw Score and NormalizeScore, also after pods are added
and removed in place and after a node is added (the pod index follows the snapshot)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.listers import ClusterObjects
from scheduler.framework.snapshot import NodeInfo, PodInfo, Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.podtopologyspread import PodTopologySpread, SpreadArgs
from scheduler.plugins.podtopologyspread.constraints import DefaultConstraint
from scheduler.plugins.selectorspread import SelectorSpread
from tests.oracles.topologyspread import PodTopologySpreadOracle, SelectorSpreadOracle

Obj = dict[str, Any]
KEYS = ["kubernetes.io/hostname", "topology.kubernetes.io/zone", "topology.kubernetes.io/region", "rack"]
ZONE_KEYS = ["failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region"]
VALUES = ["a", "b", "c", ""]
APP = ["web", "db", "cache"]

node_labels = st.dictionaries(st.sampled_from(KEYS + ZONE_KEYS), st.sampled_from(VALUES), max_size=5)
pod_labels = st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(APP), max_size=2)
selectors = st.one_of(
    st.none(),
    st.just({}),
    st.fixed_dictionaries({"matchLabels": st.dictionaries(st.just("app"), st.sampled_from(APP), max_size=1)}),
    st.fixed_dictionaries(
        {
            "matchExpressions": st.lists(
                st.sampled_from(
                    [
                        {"key": "app", "operator": "In", "values": ["web", "db"]},
                        {"key": "tier", "operator": "Exists"},
                        {"key": "tier", "operator": "DoesNotExist"},
                        {"key": "app", "operator": "NotIn", "values": ["cache"]},
                    ]
                ),
                max_size=2,
            )
        }
    ),
)


@st.composite
def constraint_lists(draw: st.DrawFn) -> list[Obj]:
    out, seen = [], set()
    for _ in range(draw(st.integers(0, 3))):
        key = draw(st.sampled_from(KEYS))
        action = draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]))
        if (key, action) in seen and not draw(st.booleans()):
            continue  # repeats are rare (the API server refuses them) but kube counts them a shared way
        seen.add((key, action))
        c: Obj = {"maxSkew": draw(st.integers(1, 3)), "topologyKey": key, "whenUnsatisfiable": action}
        sel = draw(selectors)
        if sel is not None:
            c["labelSelector"] = sel
        out.append(c)
    return out


def pod(name: str, ns: str, lbls: Obj, node: str | None = None, **spec: Any) -> Obj:
    s: Obj = {"containers": [], **spec}
    if node is not None:
        s["nodeName"] = node
    return {"metadata": {"name": name, "namespace": ns, "labels": lbls}, "spec": s}


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Obj], list[Obj], ClusterObjects]:
    nodes = [
        {"metadata": {"name": f"n{i}", "labels": draw(node_labels)}, "status": {"allocatable": {"cpu": "4"}}}
        for i in range(draw(st.integers(1, 7)))
    ]
    pods = []
    for j in range(draw(st.integers(0, 25))):
        p = pod(
            f"p{j}",
            draw(st.sampled_from(["ns", "other"])),
            draw(pod_labels),
            f"n{draw(st.integers(0, len(nodes) - 1))}",
        )
        if draw(st.integers(0, 9)) == 0:
            p["metadata"]["deletionTimestamp"] = "2020-01-01T00:00:00Z"
        pods.append(p)
    objects = ClusterObjects()
    for k in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["Service", "ReplicationController", "ReplicaSet", "StatefulSet"]))
        ns = draw(st.sampled_from(["ns", "other"]))
        if kind in ("Service", "ReplicationController"):
            spec: Obj = {"selector": draw(st.one_of(st.none(), pod_labels))}
        else:
            spec = {"selector": draw(selectors)}
        objects.on_add(kind, {"metadata": {"name": f"o{k}", "namespace": ns}, "spec": spec})
    return nodes, pods, objects


incoming = st.builds(
    lambda lbls, cs, sel: pod("new", "ns", lbls, **({"topologySpreadConstraints": cs} if cs else {}), **sel),
    pod_labels,
    constraint_lists(),
    st.sampled_from(
        [{}, {"nodeSelector": {"rack": "a"}}, {"nodeSelector": {"topology.kubernetes.io/zone": "b"}}]
    ),
)
args = st.sampled_from(
    [
        SpreadArgs(),
        SpreadArgs(
            "List",
            (DefaultConstraint(1, "rack", "DoNotSchedule"), DefaultConstraint(2, "rack", "ScheduleAnyway")),
        ),
        SpreadArgs("List", ()),
    ]
)


def check(
    snap: Snapshot, p: Obj, plugin: PodTopologySpread, selector: SelectorSpread, feasible: list[int]
) -> None:
    oracle, sel_oracle = PodTopologySpreadOracle(plugin), SelectorSpreadOracle(selector)
    state, ostate = CycleState(0.0), CycleState(0.0)
    assert plugin.pre_filter(state, p, snap).is_success()
    assert oracle.pre_filter(ostate, p, snap).is_success()
    res = plugin.filter_all(state, p, snap)
    want = [oracle.filter(ostate, p, snap, i) for i in range(snap.n)]
    assert [res.status_of(i) for i in range(snap.n)] == want
    rows = np.asarray(feasible, np.int64)
    if len(rows) == 0:
        return
    for prod, orc in ((plugin, oracle), (selector, sel_oracle)):
        assert prod.pre_score(state, p, snap, rows).is_success()
        assert orc.pre_score(ostate, p, snap, rows).is_success()
        got = np.asarray(prod.score_all(state, p, snap, rows))
        got = got if len(got) == len(rows) else got.take(rows)
        raw = [orc.score(ostate, p, snap, i)[0] for i in feasible]
        assert got.tolist() == raw, prod.name
        norm, onorm = got.copy(), np.asarray(raw, np.int64)
        assert prod.normalize_scores(state, p, norm) == Status.success()
        assert orc.normalize_scores(ostate, p, onorm) == Status.success()
        assert norm.tolist() == onorm.tolist(), prod.name
        assert all(0 <= s <= 100 for s in norm.tolist())


@settings(max_examples=400, deadline=None)
@given(clusters(), incoming, args, st.data())
def test_spread_plugins_match_oracles(cluster: Any, p: Obj, a: SpreadArgs, data: st.DataObject) -> None:
    nodes, pods, objects = cluster
    snap = Snapshot.build(nodes, pods)
    plugin, selector = PodTopologySpread(objects, a), SelectorSpread(objects)
    feasible = sorted(data.draw(st.sets(st.integers(0, len(nodes) - 1), min_size=1)))
    check(snap, p, plugin, selector, feasible)
    # pods added and removed in place: the index follows the rows the snapshot re-copies
    changed = []
    for j in range(data.draw(st.integers(0, 4))):
        info = snap.infos[data.draw(st.integers(0, snap.n - 1))]
        if info.pods and data.draw(st.booleans()):
            info.remove_pod(next(iter(info.pods)), 1)
        else:
            added = pod(f"q{j}", "ns", data.draw(pod_labels), info.name)
            info.add_pod(PodInfo.of(added), 1)  # type: ignore[arg-type]
        changed.append(info)
    snap.refresh(changed)
    check(snap, p, plugin, selector, feasible)
    # a node added: new rows, the pod index keeps its slots and moves them to their new rows
    extra = {
        "metadata": {"name": "m0", "labels": data.draw(node_labels)},
        "status": {"allocatable": {"cpu": "4"}},
    }
    infos = [NodeInfo.of(extra, 2), *snap.infos]  # type: ignore[arg-type]
    infos[0].add_pod(PodInfo.of(pod("m", "ns", data.draw(pod_labels), "m0")), 2)  # type: ignore[arg-type]
    snap.rebuild(infos, snap.resources)
    check(snap, p, plugin, selector, [snap.index[f"n{i}"] for i in feasible])
    check(
        Snapshot.build(nodes, [pi.pod for info in snap.infos for pi in info.pods.values()]),
        p,
        plugin,
        selector,
        feasible,
    )
