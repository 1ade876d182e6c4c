"""The in-process half of the preemption comparison (docs/testing.md#the-kube-scheduler-oracle).

kube-scheduler's copy of a pod preempts for real: the harness reads the node it nominated and the pods
it deleted. koord's live copy may not (its victims would be kube's cluster), so koord's DefaultPreemption
runs here, on the cluster kube saw: every candidate node of its dry run (1.20's default args make both
schedulers try every potential node of a small cluster), then the candidates that tie for best in
kube's order, written here from 1.20's ``pickOneNodeForPreemption``: fewest PDB violations, lowest
priority of the most important victim, smallest sum of (priority + 2^31), fewest victims, latest
earliest start time among each node's most important victims. With the start times the harness's
kubelet gives every pod these leave one candidate, and kube's choice is deterministic; were several
left, kube's map order would pick among them, so only membership is required.

`compare(...)` returns the mismatches (kind, kube, koord, detail): kube preempted and koord found no
candidate, or the reverse; kube's node not among koord's tied best; koord's own pick (`pick_one`) not
among them; koord's victims on kube's node not the pods kube deleted.
Imports: standard library, scheduler (framework, plugins.defaultpreemption), tests.differential.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.nominated import pre_filter_state
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.defaultpreemption.candidates import eligible, pick_one
from scheduler.plugins.defaultpreemption.plugin import DefaultPreemption
from scheduler.plugins.defaultpreemption.victims import Candidate
from tests.differential.checker import Obj

Miss = tuple[str, Any, Any, str]


def _priority(pod: Obj) -> int:
    return int((pod.get("spec") or {}).get("priority") or 0)


def _started(pod: Obj) -> float:
    raw = (pod.get("status") or {}).get("startTime")
    return datetime.fromisoformat(str(raw).replace("Z", "+00:00")).timestamp() if raw else float("inf")


def tied_best(candidates: Sequence[Candidate]) -> list[Candidate]:
    """The candidates kube 1.20 could pick: those equal-best on every criterion in its order."""
    keys: list[Callable[[Candidate], float]] = [
        lambda c: c.victims.num_pdb_violations,
        lambda c: _priority(dict(c.victims.pods[0])) if c.victims.pods else -(2**31),
        lambda c: sum(_priority(dict(p)) + 2**31 for p in c.victims.pods),
        lambda c: len(c.victims.pods),
        lambda c: -_earliest_of_highest(c),  # the latest wins
    ]
    left = list(candidates)
    for key in keys:
        if len(left) <= 1:
            break
        best = min(key(c) for c in left)
        left = [c for c in left if key(c) == best]
    return left


def _earliest_of_highest(c: Candidate) -> float:
    pods = [dict(p) for p in c.victims.pods]
    if not pods:
        return float("inf")
    top = max(_priority(p) for p in pods)
    return min(_started(p) for p in pods if _priority(p) == top)


def _name(pod: Any) -> str:
    return str(pod["metadata"]["name"])


def compare(
    fw: Framework, pod: Obj, snap: Snapshot, state: CycleState, statuses: dict[str, Status],
    kube_node: str | None, kube_victims: Sequence[str],
) -> tuple[list[Miss], bool]:  # fmt: skip
    """koord's candidates for `pod` against kube's preemption (`kube_node` None: kube did not preempt).
    Returns the mismatches and whether a preemption was compared."""
    plugin = next((p for p in fw.post_filters if isinstance(p, DefaultPreemption)), None)
    if plugin is None:
        return [("preemption", kube_node, None, "koord's profile has no DefaultPreemption")], False
    candidates: list[Candidate] = []
    if eligible(pod, snap, statuses) and snap.n:
        base = pre_filter_state(fw, pod, snap, state.now)
        if isinstance(base, Status):
            return [("preemption", kube_node, None, f"PreFilter failed again: {base.message()}")], False
        candidates = plugin.find_candidates(fw, base, pod, snap, statuses) or []
    names = sorted(c.name for c in candidates)
    if kube_node is None:
        if candidates:
            return [("preemption", None, names, "kube did not preempt; koord has candidates")], False
        return [], False
    if not candidates:
        return [("preemption", kube_node, None, "kube preempted; koord has no candidate")], True
    best = tied_best(candidates)
    out: list[Miss] = []
    tied = sorted(c.name for c in best)
    if kube_node not in tied:
        detail = {c.name: [_name(p) for p in c.victims.pods] for c in candidates}
        out.append(("preemption-node", kube_node, tied, f"koord's candidates and victims: {detail}"))
    own = pick_one(candidates, state.now)
    if own is not None and own.name not in tied:
        out.append(("preemption-pick", tied, own.name, "koord's pick_one is not among the tied best"))
    mine = next((c for c in candidates if c.name == kube_node), None)
    if mine is not None and sorted(_name(p) for p in mine.victims.pods) != sorted(kube_victims):
        out.append((
            "preemption-victims", sorted(kube_victims), sorted(_name(p) for p in mine.victims.pods),
            f"on {kube_node}; PDB violations koord counts: {mine.victims.num_pdb_violations}",
        ))  # fmt: skip
    return out, True
