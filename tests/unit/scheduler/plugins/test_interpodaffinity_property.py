"""InterPodAffinity against its oracle (tests/oracles/interpodaffinity.py) over generated snapshots:
every row's Filter status, raw Score and normalised Score, then again after pods are added, replaced
and removed and nodes relabelled, added or dropped — the pod index and label columns kept
incrementally must give what the oracle computes from scratch."""

from __future__ import annotations

from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot import NodeInfo, Snapshot
from scheduler.plugins.interpodaffinity import InterPodAffinity
from tests.oracles.interpodaffinity import InterPodAffinityOracle
from tests.unit.scheduler.plugins._support import add_pods, make_node, refresh_nodes
from tests.unit.scheduler.plugins.test_interpodaffinity import check_filter, check_scores, pod

Obj = dict[str, Any]
TOPOLOGY_KEYS = ["zone", "rack", "host", "missing"]
POD_KEYS, POD_VALUES = ["app", "tier"], ["x", "y"]

values = st.sampled_from(["a", "b", "c"])
labelled = st.fixed_dictionaries({"zone": values}, optional={"rack": values, "host": values})
node_labels = st.one_of(labelled, labelled, labelled, st.just({}))
pod_labels = st.dictionaries(st.sampled_from(POD_KEYS), st.sampled_from(POD_VALUES), min_size=1, max_size=2)
requirement = st.fixed_dictionaries(
    {
        "key": st.sampled_from(POD_KEYS),
        "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
    }
).flatmap(
    lambda r: (
        st.just(r)
        if r["operator"] in ("Exists", "DoesNotExist")
        else st.lists(st.sampled_from(POD_VALUES), min_size=1, max_size=2).map(lambda vs: {**r, "values": vs})
    )
)
one_label = pod_labels.map(lambda d: dict(list(d.items())[:1]))
selector = st.one_of(
    st.fixed_dictionaries({"matchLabels": one_label}),
    st.fixed_dictionaries({"matchExpressions": st.lists(requirement, min_size=1, max_size=2)}),
    st.fixed_dictionaries({"matchLabels": one_label, "matchExpressions": st.lists(requirement, max_size=2)}),
    st.none(),
    st.just({}),
)
BAD_SELECTOR = {"matchExpressions": [{"key": "app", "operator": "Bogus"}]}  # a parse error


@st.composite
def terms(draw: st.DrawFn) -> Obj:
    t: Obj = {"topologyKey": draw(st.sampled_from([*TOPOLOGY_KEYS[:3], *TOPOLOGY_KEYS]))}
    sel = BAD_SELECTOR if draw(st.integers(0, 30)) == 0 else draw(selector)
    if sel is not None or draw(st.booleans()):
        t["labelSelector"] = sel  # absent, or null
    namespaces = draw(st.sampled_from([None, None, [], ["other"], ["ns", "other"]]))
    if namespaces is not None:
        t["namespaces"] = namespaces
    return t


weighted = st.fixed_dictionaries(
    {
        "weight": st.one_of(st.integers(1, 100), st.sampled_from([0, -7, 2**31 - 1, -(2**31)])),
        "podAffinityTerm": terms(),
    }
)


@st.composite
def affinities(draw: st.DrawFn) -> Obj | None:
    """None a quarter of the time; else each half with some terms, or none, or an empty object."""
    if draw(st.integers(0, 3)) == 0:
        return None
    out: Obj = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        shape = draw(st.integers(0, 3))
        if shape == 0:
            continue
        half: Obj = {}
        if shape in (1, 3):
            half["requiredDuringSchedulingIgnoredDuringExecution"] = draw(
                st.lists(terms(), min_size=1, max_size=2)
            )
        if shape in (2, 3):
            half["preferredDuringSchedulingIgnoredDuringExecution"] = draw(
                st.lists(weighted, min_size=1, max_size=2)
            )
        out[kind] = half
    return out


@st.composite
def pods(draw: st.DrawFn, name: str, nodes: list[str], shared: list[Obj | None]) -> Obj:
    """A pod on one of ``nodes``; its affinity one of ``shared`` (pods of a workload share terms)."""
    return pod(
        name,
        node=draw(st.sampled_from(nodes)),
        ns=draw(st.sampled_from(["ns", "ns", "other"])),
        labels=draw(pod_labels),
        affinity=draw(st.sampled_from(shared)),
    )


def compare(incoming: Obj, snap: Snapshot, plugin: InterPodAffinity) -> None:
    st_ = plugin.pre_filter(CycleState(0.0), incoming, snap)
    ost = InterPodAffinityOracle(plugin.args.hard_pod_affinity_weight).pre_filter(
        CycleState(0.0), incoming, snap
    )
    assert st_ == ost
    if not st_.is_success():
        event("parse error")
        return
    statuses = check_filter(incoming, snap, plugin)
    event("filter: " + ", ".join(sorted({s.reasons[-1] for s in statuses if s.reasons})))
    raw, _ = check_scores(incoming, snap, plugin)
    event(f"scored: {any(raw)}")
    if snap.n > 1:
        check_scores(incoming, snap, plugin, rows=list(range(0, snap.n, 2)))


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_matches_oracle_and_follows_changes(data: st.DataObject) -> None:
    n = data.draw(st.integers(0, 6))  # 0: no rows at all
    nodes = [make_node(f"n{i}", labels=data.draw(node_labels)) for i in range(n)]
    shared = [None, *data.draw(st.lists(affinities(), min_size=1, max_size=3))]
    existing = [
        data.draw(pods(f"e{k}", [*(f"n{i}" for i in range(n)), "gone"], shared))
        for k in range(data.draw(st.integers(0, 10)) + 2 * n)
    ]
    snap = Snapshot.build(nodes, existing)
    plugin = InterPodAffinity.from_args({"hardPodAffinityWeight": data.draw(st.sampled_from([0, 1, 7, 100]))})
    if existing and data.draw(st.booleans()):  # another replica of an existing pod's workload
        model = data.draw(st.sampled_from(existing))
        incoming = pod("in", ns=model["metadata"]["namespace"], labels=model["metadata"]["labels"])
        incoming["spec"]["affinity"] = model["spec"].get("affinity")
    else:
        incoming = pod(
            "in", ns=data.draw(st.sampled_from(["ns", "ns", "other"])), labels=data.draw(pod_labels)
        )
        incoming["spec"]["affinity"] = data.draw(affinities())
    compare(incoming, snap, plugin)
    if n == 0:
        return
    generation = 1
    for _ in range(data.draw(st.integers(1, 4))):
        generation += 1
        change = data.draw(st.sampled_from(["add", "remove", "relabel", "add-node", "drop-node"]))
        if change == "add":  # new pods, or new objects for existing keys
            names = [
                f"e{k}" for k in data.draw(st.lists(st.integers(0, 14), min_size=1, max_size=3, unique=True))
            ]
            fresh = [data.draw(pods(name, snap.names, shared)) for name in names]
            for p in fresh:  # a pod that moves leaves its old node first, as the cache does
                for info in snap.infos:
                    if info.remove_pod(f"ns/{p['metadata']['name']}", generation) or info.remove_pod(
                        f"other/{p['metadata']['name']}", generation
                    ):
                        snap.refresh([info])
            add_pods(snap, fresh, generation)
        elif change == "remove":
            info = snap.infos[data.draw(st.integers(0, snap.n - 1))]
            for key in list(info.pods)[: data.draw(st.integers(0, 2))]:
                info.remove_pod(key, generation)
            snap.refresh([info])
        elif change == "relabel":
            i = data.draw(st.integers(0, snap.n - 1))
            refresh_nodes(snap, {i: make_node(snap.names[i], labels=data.draw(node_labels))}, generation)
        elif change == "add-node":
            snap.rebuild(
                [*snap.infos, NodeInfo.of(make_node(f"m{generation}", labels=data.draw(node_labels)))]
            )
        elif snap.n > 1:
            drop = data.draw(st.integers(0, snap.n - 1))
            snap.rebuild([info for i, info in enumerate(snap.infos) if i != drop])
        compare(incoming, snap, plugin)


anti_terms = st.lists(
    st.fixed_dictionaries(
        {
            "topologyKey": st.sampled_from(TOPOLOGY_KEYS),
            "labelSelector": st.fixed_dictionaries({"matchLabels": one_label}),
        }
    ),
    min_size=1,
    max_size=2,
)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_anti_affinity_both_ways_matches_oracle(data: st.DataObject) -> None:
    """Required anti-affinity only (the general test reaches it less often): the incoming pod's terms
    and the existing pods' terms, with the affinity check out of the way."""
    n = data.draw(st.integers(1, 6))
    nodes = [make_node(f"n{i}", labels=data.draw(node_labels)) for i in range(n)]
    existing = []
    for k in range(data.draw(st.integers(n, 3 * n))):
        anti = data.draw(st.one_of(st.none(), anti_terms))
        existing.append(
            pod(
                f"e{k}",
                node=f"n{data.draw(st.integers(0, n - 1))}",
                labels=data.draw(pod_labels),
                affinity=None
                if anti is None
                else {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": anti}},
            )
        )
    incoming = pod("in", labels=data.draw(pod_labels))
    anti = data.draw(st.one_of(st.none(), anti_terms))
    if anti is not None:
        incoming["spec"]["affinity"] = {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": anti}
        }
    snap = Snapshot.build(nodes, existing)
    statuses = check_filter(incoming, snap)
    event("filter: " + ", ".join(sorted({s.reasons[-1] for s in statuses if s.reasons})))
