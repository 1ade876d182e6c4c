"""PreFilter's and PreScore's states, computed through the term index
(docs/rules/scheduler-interpodaffinity.md#performance), equal the brute force — the oracle's
(topologyKey, value) maps, built by visiting every pod of every node and testing every term
(tests/oracles/interpodaffinity.py) — pair by pair, on generated snapshots and after pods are added,
replaced and removed, and nodes added and removed in place; and the pod index's term indexes, kept group
by group, equal those of an index rebuilt from the same rows."""

from __future__ import annotations

import random
from typing import Any, cast

from hypothesis import event, given, settings
from hypothesis import strategies as st

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Pod
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.interpodaffinity.podindex import PodIndex
from scheduler.plugins.interpodaffinity.prefilter import compute_filter_state, pod_index
from scheduler.plugins.interpodaffinity.score import compute_score_state
from scheduler.plugins.interpodaffinity.termindex import TermIndex
from scheduler.plugins.interpodaffinity.terms import parse_pod_terms
from scheduler.plugins.interpodaffinity.topology import Index, TopologyCounts, column
from tests.oracles.interpodaffinity import InterPodAffinityOracle, OracleFilterState, snapshot_rows
from tests.unit.scheduler._rowchange import move, new_node
from tests.unit.scheduler.plugins._support import add_pods, make_node
from tests.unit.scheduler.plugins.test_interpodaffinity import pod
from tests.unit.scheduler.plugins.test_interpodaffinity_property import (
    BAD_SELECTOR,
    TOPOLOGY_KEYS,
    node_labels,
    pod_labels,
    pods,
    selector,
)

Obj = dict[str, Any]
Pairs = dict[tuple[str, str], int]


@st.composite
def terms(draw: st.DrawFn) -> Obj:
    """A term; its selector unparsable one time in 31 (the simplest draws give a parsable one)."""
    t: Obj = {"topologyKey": draw(st.sampled_from(TOPOLOGY_KEYS))}
    t["labelSelector"] = BAD_SELECTOR if draw(st.integers(0, 30)) == 30 else draw(selector)
    namespaces = draw(st.sampled_from([None, ["other"], ["ns", "other"]]))
    if namespaces is not None:
        t["namespaces"] = namespaces
    return t


weighted = st.fixed_dictionaries(
    {
        "weight": st.one_of(st.integers(1, 100), st.sampled_from([0, -7, 2**31 - 1])),
        "podAffinityTerm": terms(),
    }
)


@st.composite
def affinities(draw: st.DrawFn) -> Obj | None:
    """Terms in every category most of the time (the property tests' own strategy often has none)."""
    if draw(st.integers(0, 5)) == 5:
        return None
    out: Obj = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        out[kind] = {
            "requiredDuringSchedulingIgnoredDuringExecution": draw(st.lists(terms(), min_size=1, max_size=2)),
            "preferredDuringSchedulingIgnoredDuringExecution": draw(
                st.lists(weighted, min_size=1, max_size=2)
            ),
        }
    return out


def pairs(counts: TopologyCounts, snap: Snapshot, index: Index | None = None) -> Pairs:
    """The non-zero counts by (topology key, value), through ``index`` or the snapshot's columns."""
    out: Pairs = {}
    for key, arr in counts.items():
        codes = column(snap, key).index if index is None else index[key]
        by_code = {c: v for v, c in codes.items()}
        for code, n in enumerate(arr.tolist()):
            if n:
                out[(key, by_code[code])] = n
    return out


def nonzero(by_key: dict[str, dict[str, int]]) -> Pairs:
    return {(k, v): n for k, d in by_key.items() for v, n in d.items() if n}


def terms_of(index: TermIndex) -> dict[object, object]:
    return {b: dict(d) for b, d in index.buckets.items()} | {"groups": dict(index.groups)}


def compare(raw: Obj, snap: Snapshot, hard: int) -> None:
    incoming = cast(Pod, raw)
    terms = parse_pod_terms(incoming)
    if terms.error is not None:  # PreFilter rejects it: compare without its terms (the existing pods' part)
        event("parse error")
        incoming = cast(Pod, {**raw, "spec": {**raw["spec"], "affinity": None}})
        terms = parse_pod_terms(incoming)
    oracle = InterPodAffinityOracle(hard)
    ostate = CycleState(0.0)
    assert oracle.pre_filter(ostate, incoming, snap).is_success()
    want = ostate.get("oracleInterPodAffinity")
    assert isinstance(want, OracleFilterState)
    got = compute_filter_state(incoming, snap, terms)
    assert pairs(got.existing, snap, got.index) == want.existing
    assert pairs(got.affinity, snap, got.index) == want.affinity
    assert pairs(got.anti, snap, got.index) == want.anti
    assert oracle.pre_score(ostate, incoming, snap, snapshot_rows(snap)).is_success()
    scores = compute_score_state(incoming, terms, snap, hard)
    topo = ostate.get("oracleScoreInterPodAffinity")
    assert isinstance(topo, dict)
    assert pairs(scores.scores, snap) == nonzero(topo)
    event(f"existing anti pairs: {bool(want.existing)}; scored: {bool(scores.scores)}")
    fresh = PodIndex()
    fresh.rebuild(snap)
    kept = pod_index(snap)
    assert terms_of(kept.anti_terms) == terms_of(fresh.anti_terms)
    assert terms_of(kept.score_terms) == terms_of(fresh.score_terms)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_states_equal_brute_force_as_pods_change(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 5))
    names = [f"n{i}" for i in range(n)]
    snap = Snapshot.build([make_node(name, labels=data.draw(node_labels)) for name in names])
    shared = data.draw(st.lists(affinities(), min_size=1, max_size=4))
    existing = [data.draw(pods(f"e{k}", names, shared)) for k in range(data.draw(st.integers(2, 12)))]
    add_pods(snap, existing, 1)
    hard = data.draw(st.sampled_from([0, 1, 7]))
    if data.draw(st.booleans()):  # another replica of an existing pod's workload: its terms meet it
        model = data.draw(st.sampled_from(existing))
        incoming = pod("in", ns=model["metadata"]["namespace"], labels=model["metadata"]["labels"])
        incoming["spec"]["affinity"] = model["spec"].get("affinity")
    else:
        incoming = pod("in", ns=data.draw(st.sampled_from(["ns", "other"])), labels=data.draw(pod_labels))
        incoming["spec"]["affinity"] = data.draw(affinities())
    compare(incoming, snap, hard)
    for generation in range(2, 2 + data.draw(st.integers(1, 3))):
        if data.draw(st.booleans()):  # new pods, or new objects (new terms) for existing keys
            keys = data.draw(st.lists(st.integers(0, 14), min_size=1, max_size=3, unique=True))
            fresh = [data.draw(pods(f"e{k}", names, shared)) for k in keys]
            for p in fresh:  # a pod that moves leaves its old node first, as the cache does
                for info in snap.infos:
                    key = f"{p['metadata']['namespace']}/{p['metadata']['name']}"
                    if info.remove_pod(key, generation):
                        snap.refresh([info])
            add_pods(snap, fresh, generation)
        else:
            info = snap.infos[data.draw(st.integers(0, snap.n - 1))]
            for key in list(info.pods)[: data.draw(st.integers(1, 3))]:
                info.remove_pod(key, generation)
            snap.refresh([info])
        compare(incoming, snap, hard)


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_states_follow_nodes_moved_in_place(data: st.DataObject) -> None:
    """Rows removed and added in place (``PodIndex.resize``): removed rows' pods leave the term index,
    added rows' pods join it, and the states still equal the brute force."""
    n = data.draw(st.integers(1, 5))
    names = [f"n{i}" for i in range(n)]
    shared = data.draw(st.lists(affinities(), min_size=1, max_size=4))
    existing = [data.draw(pods(f"e{k}", names, shared)) for k in range(data.draw(st.integers(2, 10)))]
    snap = Snapshot.build([make_node(name, labels=data.draw(node_labels)) for name in names], existing)
    incoming = pod("in", ns="ns", labels=data.draw(pod_labels))
    incoming["spec"]["affinity"] = data.draw(affinities())
    compare(incoming, snap, 1)
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    for step in range(data.draw(st.integers(1, 3))):
        added = []
        for j in range(data.draw(st.integers(0, 2))):
            name = f"m{step}-{j}"
            node_pods = [
                data.draw(pods(f"{name}-p{k}", [name], shared)) for k in range(data.draw(st.integers(0, 3)))
            ]
            added.append(new_node(make_node(name, labels=data.draw(node_labels)), node_pods, step + 2))
        move(snap, added, rng, data.draw(st.integers(0, 2)))
        compare(incoming, snap, 1)
