"""Victims on one node (docs/rules/scheduler-preemption.md#victims), kube's ``selectVictimsOnNode``.

On a copy of the node (and a clone of the cycle state, kept in step through the PreFilter extensions):
every pod of lower priority than the preemptor is removed; if the preemptor then fails the filters
(nominated pods counted) the node is no candidate. Otherwise the removed pods are reprieved one by one,
those whose disruption would violate a PodDisruptionBudget first, then the others, each group most
important first (``MoreImportantPod``: higher priority, then earlier start time): a pod is added back
and stays if the preemptor still fits, else it is a victim. The candidate's victims are in that order;
its PDB violations are the violating pods that stay victims. Given the resources NodeResourcesFit
checks (`fit`), a reprieve the node's resources cannot hold is a victim without running the filters
(docs/rules/scheduler-preemption.md#pruning): Fit would reject it, so the filters would.
Imports: standard library, apis (gonum, pod), scheduler.framework, scheduler.plugins.defaultpreemption.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from apis.pod import parse_time, status
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Pod
from scheduler.framework.nominated import (
    ExtensionError,
    add_pod,
    pod_passes_filters_on_node,
    priority,
    remove_pod,
)
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import NodeInfo, PodInfo
from scheduler.plugins.defaultpreemption.pdb import PDB, filter_pods_with_pdb_violation
from scheduler.plugins.noderesources import insufficient


@dataclass(frozen=True, slots=True)
class Victims:
    """The pods to delete on one node, in kube's order, and how many of them violate a budget."""

    pods: tuple[Pod, ...]
    num_pdb_violations: int


@dataclass(frozen=True, slots=True)
class Candidate:
    name: str
    victims: Victims


def start_time(pod: Pod, now: float) -> float:
    """``GetPodStartTime``: ``status.startTime`` in epoch seconds; a pod without one (assumed, or not
    started) counts as starting now — the cycle's clock, so equal for every such pod of a cycle."""
    t = parse_time(status(pod).get("startTime"))
    return now if t is None else t.timestamp()


def importance_order(pods: Iterable[Pod], now: float) -> list[Pod]:
    """Most important first (``MoreImportantPod``); equal pods keep their order (a stable sort)."""
    return sorted(pods, key=lambda p: (-priority(p), start_time(p, now)))


def fit_holds(info: NodeInfo, fit: Sequence[tuple[str, int]]) -> bool:
    """Whether NodeResourcesFit's Filter could pass on `info` (nominated pods only add usage): one
    more pod allowed, and for each checked resource ``allocatable >= request + requested`` (Go's int64)."""
    return not insufficient(info.allocatable, info.requested, len(info.pods), fit)


def select_victims_on_node(
    framework: Framework,
    state: CycleState,
    pod: Pod,
    info: NodeInfo,
    pdbs: Sequence[PDB],
    nominated: Sequence[Pod],
    resources: Sequence[str],
    fit: Sequence[tuple[str, int]] | None = None,
) -> Victims | None:
    """The victims that let `pod` onto `info`'s node, or None when the node is no candidate (no
    lower-priority pod, no fit without them, or a PreFilter extension failed). `nominated`: the pods
    nominated to this node; `resources`: the cluster snapshot's resource columns; `fit`: the resources
    NodeResourcesFit checks and the pod's request of each, when Fit is among the filters (None: no
    shortcut)."""
    info, state = info.copy(), state.clone()
    prio = priority(pod)
    potential = [pi for pi in info.pods.values() if priority(pi.pod) < prio]
    if not potential:
        return None
    try:
        for pi in potential:
            remove_pod(framework, state, pod, pi, info)
    except ExtensionError:
        return None
    if not pod_passes_filters_on_node(framework, state, pod, info, nominated, resources).is_success():
        return None
    by_pod = {id(pi.pod): pi for pi in potential}
    ordered = importance_order((pi.pod for pi in potential), state.now)
    violating, non_violating = filter_pods_with_pdb_violation(ordered, pdbs)
    victims: list[Pod] = []
    violations = 0

    def reprieve(pi: PodInfo) -> bool:
        """Adds the pod back; keeps it when the preemptor still fits, else it is a victim."""
        add_pod(framework, state, pod, pi, info)
        fits = (fit is None or fit_holds(info, fit)) and pod_passes_filters_on_node(
            framework, state, pod, info, nominated, resources
        ).is_success()
        if not fits:
            remove_pod(framework, state, pod, pi, info)
            victims.append(pi.pod)
        return fits

    try:
        for p in violating:
            if not reprieve(by_pod[id(p)]):
                violations += 1
        for p in non_violating:
            reprieve(by_pod[id(p)])
    except ExtensionError:
        return None
    return Victims(tuple(victims), violations)
