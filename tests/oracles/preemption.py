"""Oracle for DefaultPreemption (docs/rules/scheduler-preemption.md): kube-scheduler v1.20.2's
preemption written out plainly over a small cluster of plain records, with a resource-only Filter
(cpu, memory and pod count, as NodeResourcesFit rejects: ``allocatable < request + requested``, one
more pod than allowed). Victims are chosen greedily as kube does (remove every lower-priority pod, then
reprieve most important first, PDB-violating ones before the others); the node by one lexicographic key
instead of kube's successive narrowing. `check_victims` states by brute force what any victim set kube
returns satisfies: the pod fits without them, and no victim could have stayed given the pods kept.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

PRIORITY_OFFSET = 2**31


@dataclass(frozen=True)
class OPod:
    name: str
    priority: int
    cpu: int  # milli-cores
    memory: int  # bytes
    start: float | None = None  # epoch seconds; None: not started (counts as now)
    labels: Mapping[str, str] = field(default_factory=dict)
    namespace: str = "default"


@dataclass(frozen=True)
class ONode:
    name: str
    cpu: int
    memory: int
    pods: int  # allowed pod count


@dataclass(frozen=True)
class OPDB:
    namespace: str
    match_labels: Mapping[str, str]  # empty: the budget matches no pod (kube skips it)
    allowed: int
    disrupted: frozenset[str] = frozenset()


@dataclass(frozen=True)
class OCandidate:
    node: str
    victims: tuple[OPod, ...]
    violations: int


def fits(pod: OPod, node: ONode, pods: Sequence[OPod]) -> bool:
    if len(pods) + 1 > node.pods:
        return False
    if pod.cpu > node.cpu - sum(p.cpu for p in pods):
        return False
    return not pod.memory > node.memory - sum(p.memory for p in pods)


def fits_with_nominated(pod: OPod, node: ONode, pods: Sequence[OPod], nominated: Sequence[OPod]) -> bool:
    """Both of kube's passes; for a resource-only filter the pass with nominated pods decides."""
    extra = [p for p in nominated if p.priority >= pod.priority and p.name != pod.name]
    return fits(pod, node, [*pods, *extra]) and fits(pod, node, pods)


def start(p: OPod, now: float) -> float:
    return now if p.start is None else p.start


def pdb_split(pods: Sequence[OPod], pdbs: Sequence[OPDB]) -> tuple[list[OPod], list[OPod]]:
    left = [b.allowed for b in pdbs]
    bad: list[OPod] = []
    good: list[OPod] = []
    for p in pods:
        violated = False
        for i, b in enumerate(pdbs):
            if not p.labels or b.namespace != p.namespace or not b.match_labels:
                continue
            if any(p.labels.get(k) != v for k, v in b.match_labels.items()) or p.name in b.disrupted:
                continue
            left[i] -= 1
            violated = violated or left[i] < 0
        (bad if violated else good).append(p)
    return bad, good


def victims_on_node(
    pod: OPod, node: ONode, pods: Sequence[OPod], pdbs: Sequence[OPDB], nominated: Sequence[OPod], now: float
) -> tuple[tuple[OPod, ...], int] | None:
    lower = [p for p in pods if p.priority < pod.priority]
    kept = [p for p in pods if p.priority >= pod.priority]
    if not lower or not fits_with_nominated(pod, node, kept, nominated):
        return None
    ordered = sorted(lower, key=lambda p: (-p.priority, start(p, now)))
    bad, good = pdb_split(ordered, pdbs)
    victims: list[OPod] = []
    violations = 0
    for group, counts in ((bad, True), (good, False)):
        for p in group:
            if fits_with_nominated(pod, node, [*kept, p], nominated):
                kept.append(p)
            else:
                victims.append(p)
                violations += counts
    return tuple(victims), violations


def candidates(
    pod: OPod,
    nodes: Sequence[ONode],
    pods_on: Mapping[str, Sequence[OPod]],
    pdbs: Sequence[OPDB],
    nominated_on: Mapping[str, Sequence[OPod]],
    rng: random.Random,
    percentage: int,
    absolute: int,
    now: float,
) -> list[OCandidate]:
    """The dry run over `nodes` (those where preemption might help, in name order)."""
    if not nodes:
        return []
    offset = rng.randrange(len(nodes))
    want = min(max(len(nodes) * percentage // 100, absolute), len(nodes))
    clean: list[OCandidate] = []
    dirty: list[OCandidate] = []
    for k in range(len(nodes)):
        n = nodes[(offset + k) % len(nodes)]
        found = victims_on_node(pod, n, pods_on.get(n.name, ()), pdbs, nominated_on.get(n.name, ()), now)
        if found is None:
            continue
        lst = dirty if found[1] else clean
        if len(lst) < want:
            lst.append(OCandidate(n.name, *found))
        if clean and len(clean) + len(dirty) >= want:
            break
    return clean + dirty


def pick(cands: Sequence[OCandidate], now: float) -> OCandidate | None:
    if not cands:
        return None
    if len(cands) == 1:
        return cands[0]
    fewest = min(c.violations for c in cands)
    pool = [c for c in cands if c.violations == fewest]
    if len(pool) > 1:
        for c in pool:
            if not c.victims:
                return c

    def key(c: OCandidate) -> tuple[int, ...] | tuple[float, ...]:
        top = max(p.priority for p in c.victims)
        earliest = min(start(p, now) for p in c.victims if p.priority == top)
        return (
            c.violations,
            c.victims[0].priority,
            sum(p.priority + PRIORITY_OFFSET for p in c.victims),
            len(c.victims),
            -earliest,
        )

    if len(pool) == 1:
        return pool[0]
    return min(pool, key=key)  # min keeps the first of equal keys


def check_victims(
    pod: OPod, node: ONode, pods: Sequence[OPod], victims: Sequence[OPod], nominated: Sequence[OPod]
) -> None:
    """Brute force over the node: victims are lower-priority pods of the node; the pod fits without
    them; and adding any single victim back to what is kept makes it not fit (the resource filter is
    monotone, so each victim's rejection holds against the final kept set)."""
    names = {v.name for v in victims}
    assert all(v.priority < pod.priority for v in victims)
    assert names <= {p.name for p in pods}
    kept = [p for p in pods if p.name not in names]
    assert fits_with_nominated(pod, node, kept, nominated)
    for v in victims:
        assert not fits_with_nominated(pod, node, [*kept, v], nominated)
