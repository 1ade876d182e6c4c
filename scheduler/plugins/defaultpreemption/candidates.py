"""Which pods may preempt, where, and which candidate node wins (docs/rules/scheduler-preemption.md).

- `eligible` (docs/rules/scheduler-preemption.md#eligibility, ``PodEligibleToPreemptOthers``): not
  with ``preemptionPolicy: Never``; a pod already nominated to a node waits while a lower-priority pod
  there is terminating (has a ``deletionTimestamp``), unless that node is now
  UNSCHEDULABLE_AND_UNRESOLVABLE for it.
- `potential_array` (docs/rules/scheduler-preemption.md#candidate-nodes): the nodes whose filter status
  is not UNSCHEDULABLE_AND_UNRESOLVABLE (a node without a status counts too).
- `dry_run` (docs/rules/scheduler-preemption.md#sampling): the potential nodes from a random offset,
  wrapping round, until some candidate violates no budget and the candidates number
  ``num_candidates`` at least.
- `pick_one` (docs/rules/scheduler-preemption.md#choosing-the-node, ``pickOneNodeForPreemption``):
  fewest PDB violations, then the lowest priority of the first victim, the smallest sum of
  ``priority + 2^31`` over the victims, the fewest victims, the latest earliest-start-time among each
  node's highest-priority victims, else the first candidate.
Imports: standard library, numpy, apis (pod), scheduler.framework, scheduler.plugins.defaultpreemption.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import compress

import numpy as np

from apis.pod import metadata, spec
from scheduler.framework.interfaces import IntArray, Pod
from scheduler.framework.nominated import nominated_node_name, priority
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.plugins.defaultpreemption.victims import Candidate, Victims, start_time

PREEMPT_NEVER = "Never"
PRIORITY_OFFSET = 2**31  # kube's int64(math.MaxInt32+1): every term of the sum is positive


def eligible(pod: Pod, snapshot: Snapshot, statuses: Mapping[str, Status]) -> bool:
    if spec(pod).get("preemptionPolicy") == PREEMPT_NEVER:
        return False
    node = nominated_node_name(pod)
    if not node:
        return True
    st = statuses.get(node)
    if st is not None and st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
        return True
    i = snapshot.index.get(node)
    if i is None:
        return True
    prio = priority(pod)
    return not any(
        metadata(pi.pod).get("deletionTimestamp") is not None and priority(pi.pod) < prio
        for pi in snapshot.infos[i].pods.values()
    )


def potential_array(snapshot: Snapshot, statuses: Mapping[str, Status]) -> IntArray:
    """The rows of the nodes where preemption might help (see the module docstring). A cycle's
    statuses are a few distinct objects shared by many nodes, so their codes are read once per object,
    and the names are only looked up when some node is unresolvable."""
    values = statuses.values()
    distinct = dict(zip(map(id, values), values, strict=True))
    bad = {k for k, st in distinct.items() if st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE}
    keep = np.ones(snapshot.n, np.bool_)
    if bad:
        index = snapshot.index
        names = compress(statuses.keys(), map(bad.__contains__, map(id, values)))
        keep[[i for i in map(index.get, names) if i is not None]] = False
    return np.flatnonzero(keep)


def dry_run(
    rows: Sequence[int],
    offset: int,
    num_candidates: int,
    victims_of: Callable[[int], Victims | None],
    names: Sequence[str],
) -> list[Candidate]:
    """kube's ``dryRunPreemption``, in order from `offset` (kube checks 16 nodes at a time, so which
    nodes it has checked when it stops varies; koord checks them one by one): each list keeps at most
    `num_candidates`; the non-violating candidates come first."""
    clean: list[Candidate] = []
    violating: list[Candidate] = []
    n = len(rows)
    for k in range(n):
        i = rows[(offset + k) % n]
        victims = victims_of(i)
        if victims is None:
            continue
        into = clean if victims.num_pdb_violations == 0 else violating
        if len(into) < num_candidates:
            into.append(Candidate(names[i], victims))
        if clean and len(clean) + len(violating) >= num_candidates:
            break
    return clean + violating


def earliest_start_of_highest(victims: Victims, now: float) -> float:
    """``GetEarliestPodStartTime``: the earliest start among the victims of the highest priority."""
    top = max(priority(p) for p in victims.pods)
    return min(start_time(p, now) for p in victims.pods if priority(p) == top)


def _keep_min(cands: list[Candidate], key: Callable[[Candidate], int]) -> list[Candidate]:
    best = min(key(c) for c in cands)
    return [c for c in cands if key(c) == best]


def pick_one(candidates: Sequence[Candidate], now: float) -> Candidate | None:
    """The candidate kube's ``SelectCandidate`` picks, ties in `candidates`' order. kube's map order
    is random where koord's is the dry run's. A candidate without victims (its pods all reprieved)
    would make kube's step 2 index an empty list; koord picks it at once, as kube ≤ 1.18 did."""
    if not candidates:
        return None
    if len(candidates) == 1:
        return candidates[0]
    cands = _keep_min(list(candidates), lambda c: c.victims.num_pdb_violations)
    if len(cands) == 1:
        return cands[0]
    for c in cands:
        if not c.victims.pods:
            return c
    for key in (
        lambda c: priority(c.victims.pods[0]),
        lambda c: sum(priority(p) + PRIORITY_OFFSET for p in c.victims.pods),
        lambda c: len(c.victims.pods),
    ):
        cands = _keep_min(cands, key)
        if len(cands) == 1:
            return cands[0]
    best, latest = cands[0], earliest_start_of_highest(cands[0].victims, now)
    for c in cands[1:]:
        t = earliest_start_of_highest(c.victims, now)
        if t > latest:
            best, latest = c, t
    return best
