"""DefaultPreemption against its oracle (tests/oracles/preemption.py) on small random clusters: the dry
run's candidates (nodes, victims in order, PDB violations) and the chosen node, with sampling args,
PodDisruptionBudgets, nominated pods and nodes marked unresolvable; every production victim set is
also checked by brute force (the pod fits without the victims, none of them could have stayed)."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from scheduler.framework.nominated import NominatedPods
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.defaultpreemption.candidates import pick_one
from tests.oracles.preemption import OPDB, ONode, OPod, candidates, check_victims, pick
from tests.unit.scheduler.plugins._preemption_support import NOW, cycle, epoch, profile

Obj = dict[str, Any]

prios = st.sampled_from([-(2**31), -3, 0, 1, 2, 3, 5, 2**31 - 1])
labels = st.one_of(st.just({}), st.fixed_dictionaries({"app": st.sampled_from(["a", "b"])}))
starts = st.one_of(st.none(), st.integers(0, 4))


@st.composite
def clusters(
    draw: st.DrawFn,
) -> tuple[list[ONode], list[tuple[OPod, str]], list[OPDB], list[tuple[OPod, str]]]:
    n = draw(st.integers(1, 5) | st.just(5))
    nodes = [
        ONode(
            f"n{i}",
            draw(st.sampled_from([1000, 2000, 3000])),
            draw(st.sampled_from([1000, 3000])),
            draw(st.integers(1, 6)),
        )
        for i in range(n)
    ]
    names = [x.name for x in nodes]
    bound = [
        (
            OPod(f"b{i}", draw(prios), draw(st.sampled_from([100, 500, 900])),
                 draw(st.sampled_from([100, 700])), draw(starts), draw(labels),
                 draw(st.sampled_from(["default", "other"]))),
            draw(st.sampled_from(names)),
        )
        for i in range(draw(st.integers(2, 14)))
    ]  # fmt: skip
    pdbs = [
        OPDB(
            draw(st.sampled_from(["default", "other"])),
            draw(st.one_of(st.just({}), st.fixed_dictionaries({"app": st.sampled_from(["a", "b"])}))),
            draw(st.integers(0, 2)),
            frozenset(draw(st.lists(st.sampled_from([p.name for p, _ in bound] or ["none"]), max_size=2))),
        )
        for _ in range(draw(st.integers(0, 2)))
    ]
    nominated = [
        (OPod(f"m{i}", draw(prios), draw(st.sampled_from([100, 500])), 100), draw(st.sampled_from(names)))
        for i in range(draw(st.integers(0, 2)))
    ]
    return nodes, bound, pdbs, nominated


def _node(n: ONode) -> Obj:
    alloc = {"cpu": f"{n.cpu}m", "memory": str(n.memory), "pods": str(n.pods)}
    return {"metadata": {"name": n.name}, "spec": {}, "status": {"allocatable": alloc}}


def _pod(p: OPod, node: str | None = None, nominated: str | None = None) -> Obj:
    spec: Obj = {
        "priority": p.priority,
        "containers": [
            {"name": "c", "resources": {"requests": {"cpu": f"{p.cpu}m", "memory": str(p.memory)}}}
        ],
    }
    if node:
        spec["nodeName"] = node
    status: Obj = {}
    if p.start is not None:
        status["startTime"] = epoch(int(p.start))
    if nominated:
        status["nominatedNodeName"] = nominated
    meta: Obj = {"name": p.name, "namespace": p.namespace, "uid": p.name, "labels": dict(p.labels)}
    return {"metadata": meta, "spec": spec, "status": status}


def _pdb(b: OPDB) -> Obj:
    return {
        "metadata": {"name": "b", "namespace": b.namespace},
        "spec": {"selector": {"matchLabels": dict(b.match_labels)}},
        "status": {
            "disruptionsAllowed": b.allowed,
            "disruptedPods": {k: "2020-01-01T00:00:00Z" for k in b.disrupted},
        },
    }


@settings(max_examples=300, deadline=None)
@given(
    clusters(),
    st.integers(0, 4),
    st.sampled_from([0, 3, 5, 5, 2**31 - 1]),
    st.integers(0, 2**32),
    st.sampled_from([(10, 100), (40, 1), (0, 1), (100, 0), (30, 2)]),
    st.lists(st.sampled_from([False, False, False, True]), min_size=5, max_size=5),
)
def test_candidates_and_choice_match_the_oracle(
    cluster: tuple[list[ONode], list[tuple[OPod, str]], list[OPDB], list[tuple[OPod, str]]],
    cpu_step: int,
    prio: int,
    seed: int,
    args: tuple[int, int],
    unresolvable: list[bool],
) -> None:
    nodes, bound, pdbs, nominated_pods = cluster
    preemptor = OPod("p", prio, 100 + 400 * cpu_step, 300, start=None, labels={})
    nominated = NominatedPods()
    for m, where in nominated_pods:
        nominated.add(_pod(m, nominated=where))
    fw, dp = profile(
        {"minCandidateNodesPercentage": args[0], "minCandidateNodesAbsolute": args[1]},
        rng=random.Random(seed),
        pdbs=[_pdb(b) for b in pdbs],
        nominated=nominated,
    )
    snap = Snapshot.build([_node(n) for n in nodes], [_pod(p, node) for p, node in bound])
    statuses = {n.name: Status.unresolvable("x") for n, u in zip(nodes, unresolvable, strict=False) if u}
    p = _pod(preemptor)
    state = cycle(fw, p, snap)
    got = dp.find_candidates(fw, state, p, snap, statuses) or []

    potential = [n for n in nodes if n.name not in statuses]
    pods_on: dict[str, list[OPod]] = {}
    for o, where in bound:
        pods_on.setdefault(where, []).append(o)
    nominated_on: dict[str, list[OPod]] = {}
    for m, where in nominated_pods:
        nominated_on.setdefault(where, []).append(m)
    want = candidates(
        preemptor, potential, pods_on, pdbs, nominated_on, random.Random(seed), args[0], args[1], NOW
    )
    assert [
        (c.name, [v["metadata"]["name"] for v in c.victims.pods], c.victims.num_pdb_violations) for c in got
    ] == [(c.node, [v.name for v in c.victims], c.violations) for c in want]
    for c in want:
        node = next(n for n in nodes if n.name == c.node)
        check_victims(preemptor, node, pods_on.get(c.node, []), c.victims, nominated_on.get(c.node, []))
    best, oracle_best = pick_one(got, NOW), pick(want, NOW)
    assert (best.name if best else None) == (oracle_best.node if oracle_best else None)
    event(f"candidates: {len(want)}")
