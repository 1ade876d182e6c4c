"""PreFilterExtensions of InterPodAffinity and PodTopologySpread on one node apart from the snapshot
(docs/rules/scheduler-preemption.md#filters-on-one-node): for generated small clusters, a pod removed
from (or added to) a copied node through `remove_pod`/`add_pod` on a cloned PreFilter state, then the
Filter on the one-row snapshot of that node, must give what the oracle (tests/oracles/) gives on the
cluster rebuilt without (or with) that pod; and the original state must be unchanged afterwards (its
Filter over the whole cluster still the oracle's on the original cluster)."""

from __future__ import annotations

from typing import Any, cast

from hypothesis import event, given, settings
from hypothesis import strategies as st

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Plugin, Pod
from scheduler.framework.nominated import (
    add_pod,
    filters_on_node,
    pre_filter_state,
    remove_pod,
)
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import PodInfo, Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.interpodaffinity import InterPodAffinity
from scheduler.plugins.podtopologyspread import PodTopologySpread, SpreadArgs
from tests.oracles.interpodaffinity import InterPodAffinityOracle
from tests.oracles.topologyspread import PodTopologySpreadOracle
from tests.unit.scheduler.plugins._preemption_support import HIGH, LOW, MID, SMALL, cycle, node, profile
from tests.unit.scheduler.plugins._preemption_support import pod as kpod
from tests.unit.scheduler.plugins._support import make_node
from tests.unit.scheduler.plugins.test_interpodaffinity import pod as affinity_pod
from tests.unit.scheduler.plugins.test_interpodaffinity_property import affinities, anti_terms, pod_labels
from tests.unit.scheduler.plugins.test_interpodaffinity_property import node_labels as affinity_labels
from tests.unit.scheduler.plugins.test_podtopologyspread_property import constraint_lists
from tests.unit.scheduler.plugins.test_podtopologyspread_property import pod as spread_pod

Obj = dict[str, Any]


def oracle_status(oracle: Any, incoming: Pod, nodes: list[Obj], pods: list[Obj], node: str) -> Status:
    """The oracle's Filter status of `node` on the cluster of `nodes` and `pods`, from scratch."""
    snap = Snapshot.build(nodes, pods)
    state = CycleState(0.0)
    st_ = oracle.pre_filter(state, incoming, snap)
    assert st_.is_success()
    return oracle.filter(state, incoming, snap, snap.index[node])  # type: ignore[no-any-return]


def whole_cluster(framework: Framework, state: CycleState, incoming: Pod, snap: Snapshot) -> list[Status]:
    _, rejections = framework.filter_all(state.clone(), incoming, snap)
    out = [Status.success()] * snap.n
    for name, st_ in rejections.as_dict().items():
        out[snap.index[name]] = st_
    return out


def check_one_node(
    plugin: Plugin,
    oracle: Any,
    incoming_obj: Obj,
    nodes: list[Obj],
    pods: list[Obj],
    data: st.DataObject,
    new_pod: Any,
    counted_on: Any = None,
) -> None:
    """remove_pod and add_pod on clones of one PreFilter state, each against the oracle on the
    changed cluster; then the state itself against the oracle on the unchanged cluster.
    `counted_on(node)` False: a change on that node leaves the state as it is (the oracle is asked
    about the unchanged cluster)."""
    incoming = cast(Pod, incoming_obj)
    framework = Framework([plugin])
    snap = Snapshot.build(nodes, pods)
    base = pre_filter_state(framework, incoming, snap, 0.0)
    assert isinstance(base, CycleState)
    before = whole_cluster(framework, base, incoming, snap)
    on_nodes = [p for p in pods if p["spec"].get("nodeName") in snap.index]
    candidates = [p for p in on_nodes if p["metadata"].get("deletionTimestamp") is None]
    if candidates:  # (kube's updateWithPod also uncounts a terminating pod, which PreFilter never counted)
        victim = data.draw(st.sampled_from(candidates))
        node = victim["spec"]["nodeName"]
        i = snap.index[node]
        state, info = base.clone(), snap.infos[i].copy()
        remove_pod(framework, state, incoming, PodInfo.of(cast(Pod, victim)), info)
        got = filters_on_node(framework, state, incoming, info, snap.resources)
        rest = [p for p in pods if p is not victim]
        if counted_on is not None and not counted_on(node):
            rest = pods
        assert got == oracle_status(oracle, incoming, nodes, rest, node)
        event(f"remove: {got.reasons[-1] if got.reasons else 'fits'}")
    node = data.draw(st.sampled_from(snap.names))
    added = data.draw(new_pod(node))
    state, info = base.clone(), snap.infos[snap.index[node]].copy()
    add_pod(framework, state, incoming, PodInfo.of(cast(Pod, added)), info)
    got = filters_on_node(framework, state, incoming, info, snap.resources)
    more = pods if counted_on is not None and not counted_on(node) else [*pods, added]
    assert got == oracle_status(oracle, incoming, nodes, more, node)
    event(f"add: {got.reasons[-1] if got.reasons else 'fits'}")
    # the original state is untouched, and the one-row Filter of an unchanged node is the snapshot's
    assert whole_cluster(framework, base, incoming, snap) == before
    assert before == [oracle_status(oracle, incoming, nodes, pods, name) for name in snap.names]
    i = data.draw(st.integers(0, snap.n - 1))
    assert filters_on_node(framework, base, incoming, snap.infos[i].copy(), snap.resources) == before[i]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_interpodaffinity_remove_and_add_on_one_node(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 5))
    nodes = [make_node(f"n{i}", labels=data.draw(affinity_labels)) for i in range(n)]
    shared = [None, *data.draw(st.lists(affinities(), min_size=1, max_size=3))]

    def new_pod(node: str, name: str = "added") -> Any:
        return st.builds(
            lambda ns, labels, affinity: affinity_pod(
                name, node=node, ns=ns, labels=labels, affinity=affinity
            ),
            st.sampled_from(["ns", "ns", "other"]),
            pod_labels,
            st.sampled_from(shared),
        )

    pods = [
        data.draw(new_pod(f"n{data.draw(st.integers(0, n - 1))}", f"e{k}"))
        for k in range(data.draw(st.integers(0, 8)))
    ]
    incoming = affinity_pod(
        "in", ns=data.draw(st.sampled_from(["ns", "other"])), labels=data.draw(pod_labels)
    )
    incoming["spec"]["affinity"] = data.draw(
        st.sampled_from([*shared[1:], *data.draw(st.lists(affinities(), max_size=1))])
    )
    plugin = InterPodAffinity()
    if not plugin.pre_filter(CycleState(0.0), cast(Pod, incoming), Snapshot.build(nodes, pods)).is_success():
        event("parse error")
        return
    check_one_node(plugin, InterPodAffinityOracle(), incoming, nodes, pods, data, new_pod)


def anti(terms: list[Obj] | None) -> Obj | None:
    return (
        None
        if terms is None
        else {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}}
    )


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_interpodaffinity_anti_affinity_both_ways_on_one_node(data: st.DataObject) -> None:
    """Required anti-affinity only, of the incoming pod and of existing (and added) pods: the
    general test reaches it rarely."""
    n = data.draw(st.integers(1, 5))
    nodes = [make_node(f"n{i}", labels=data.draw(affinity_labels)) for i in range(n)]

    def new_pod(node: str, name: str = "added") -> Any:
        return st.builds(
            lambda labels, terms: affinity_pod(name, node=node, labels=labels, affinity=anti(terms)),
            pod_labels,
            st.one_of(st.none(), anti_terms),
        )

    pods = [
        data.draw(new_pod(f"n{data.draw(st.integers(0, n - 1))}", f"e{k}"))
        for k in range(data.draw(st.integers(n, 3 * n)))
    ]
    incoming = affinity_pod(
        "in", labels=data.draw(pod_labels), affinity=anti(data.draw(st.one_of(st.none(), anti_terms)))
    )
    check_one_node(InterPodAffinity(), InterPodAffinityOracle(), incoming, nodes, pods, data, new_pod)


SPREAD_KEYS = ["kubernetes.io/hostname", "topology.kubernetes.io/zone", "rack"]
# No empty values: v1.20.2's PreFilter counts a node lacking a key in the domain "" when one exists,
# which its updateWithPod (node must carry every key) does not mirror.
spread_labels = st.dictionaries(st.sampled_from(SPREAD_KEYS), st.sampled_from(["a", "b", "c"]), max_size=3)
spread_pod_labels = st.dictionaries(
    st.sampled_from(["app", "tier"]), st.sampled_from(["web", "db"]), max_size=2
)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_podtopologyspread_remove_and_add_on_one_node(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 6))
    nodes: list[Obj] = [
        {
            "metadata": {"name": f"n{i}", "labels": data.draw(spread_labels)},
            "status": {"allocatable": {"cpu": "4"}},
        }
        for i in range(n)
    ]

    def new_pod(node: str, name: str = "added") -> Any:
        return st.builds(
            lambda ns, labels: spread_pod(name, ns, labels, node),
            st.sampled_from(["ns", "ns", "other"]),
            spread_pod_labels,
        )

    pods = []
    for k in range(data.draw(st.integers(0, 14))):
        p = data.draw(new_pod(f"n{data.draw(st.integers(0, n - 1))}", f"e{k}"))
        if data.draw(st.integers(0, 9)) == 0:
            p["metadata"]["deletionTimestamp"] = "2020-01-01T00:00:00Z"
        pods.append(p)
    constraints = [
        c
        for c in data.draw(constraint_lists())
        if c["whenUnsatisfiable"] == "DoNotSchedule" or data.draw(st.booleans())
    ]
    spec: Obj = {"topologySpreadConstraints": constraints} if constraints else {}
    spec |= data.draw(st.sampled_from([{}, {"nodeSelector": {"rack": "a"}}]))
    incoming = spread_pod("new", "ns", data.draw(spread_pod_labels), **spec)
    plugin = PodTopologySpread(None, SpreadArgs())
    event(f"constraints: {len(constraints)}")
    keys = [c["topologyKey"] for c in constraints if c["whenUnsatisfiable"] == "DoNotSchedule"]
    labels = {nd["metadata"]["name"]: nd["metadata"]["labels"] for nd in nodes}

    def counted_on(node: str) -> bool:
        """v1.20.2's updateWithPod ignores a pod on a node lacking some constraint's key, though its
        PreFilter counts that node's pods in the domains it has."""
        return all(k in labels[node] for k in keys)

    check_one_node(plugin, PodTopologySpreadOracle(plugin), incoming, nodes, pods, data, new_pod, counted_on)


def _kube_dry_run(node_names: list[str], pods: list[Obj], preemptor: Obj, plugin: Plugin) -> list[Any]:
    """kube's TestDryRunPreemption set-up: nodes named ``host/zone`` labelled ``hostname``/``zone``,
    every candidate (node, sorted victims)."""
    fw, dp = profile(extra=[plugin])
    nodes = []
    for spec in node_names:
        parts = spec.split("/")
        n = node(parts[0], labels=dict(zip(["hostname", "zone", "region"], parts, strict=False)))
        nodes.append(n)
    snap = Snapshot.build(nodes, pods)
    state = cycle(fw, preemptor, snap)
    found = dp.find_candidates(fw, state, cast(Pod, preemptor), snap, {})
    assert found is not None
    return sorted((c.name, sorted(p["metadata"]["name"] for p in c.victims.pods)) for c in found)


def test_kube_pod_with_anti_affinity_is_preempted() -> None:
    """default_preemption_test.go "pod with anti-affinity is preempted": removing p1.1 removes its
    anti-affinity to the preemptor (InterPodAffinity's remove_pod)."""
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]},
                    "topologyKey": "hostname",
                }
            ]
        }
    }
    pods = [
        kpod("p1.1", node="node1", labels={"foo": ""}, priority=LOW, req=SMALL, affinity=anti),
        kpod("p1.2", node="node1", priority=MID, req=SMALL),
        kpod("p1.3", node="node1", priority=HIGH, req=SMALL),
        kpod("p2", node="node2", priority=HIGH, req=SMALL),
    ]
    preemptor = kpod("p", labels={"foo": ""}, priority=HIGH, req=SMALL)
    got = _kube_dry_run(["node1", "node2"], pods, preemptor, InterPodAffinity())
    assert got == [("node1", ["p1.1"])]


def test_kube_preemption_resolves_pod_topology_spread() -> None:
    """default_preemption_test.go "preemption to resolve pod topology spread filter failure"
    (PodTopologySpread's remove_pod, and add_pod for the reprieved pods)."""
    foo = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
    preemptor = kpod(
        "p",
        labels={"foo": ""},
        priority=HIGH,
        topologySpreadConstraints=[
            {"maxSkew": 1, "topologyKey": k, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": foo}
            for k in ("zone", "hostname")
        ],
    )
    pods = [
        kpod("pod-a1", node="node-a", labels={"foo": ""}, priority=MID),
        kpod("pod-a2", node="node-a", labels={"foo": ""}, priority=LOW),
        kpod("pod-b1", node="node-b", labels={"foo": ""}, priority=LOW),
        kpod("pod-x1", node="node-x", labels={"foo": ""}, priority=HIGH),
        kpod("pod-x2", node="node-x", labels={"foo": ""}, priority=HIGH),
    ]
    got = _kube_dry_run(
        ["node-a/zone1", "node-b/zone1", "node-x/zone2"], pods, preemptor, PodTopologySpread()
    )
    assert got == [("node-a", ["pod-a2"]), ("node-b", ["pod-b1"])]
