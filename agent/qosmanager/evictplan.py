"""Shared pieces of the memory and CPU evictors (docs/rules/koordlet.md): the eviction-policy annotation,
the candidate filters and sort keys common to the generic evictors, Go's integer rules, and the execution
of one round, ``plan_evictions`` (upstream ``KillAndEvictPods``): tasks run in order, a task whose target
is already covered is skipped, each pod's amount is credited per target type as the max over every
task's per-pod function, and a pod already evicted (the evictor's 2-minute cache) counts as pending
release.

Also the allocatable tasks' common parts (config check, tier sums, per-pod credit, node quantities), the
NodeSLO switch (``threshold_strategy``) and the conversion of picks into ``Evict`` actions with the
cool-down state (``to_decision``, with the guard of docs/rules/koordlet.md#be-evictors-evict-only-be-pods).
Pure, no I/O.
Imports: standard library, apis.{constants,kubeobjects,nodeslo,pod,qos,quantity,waits}, agent.podmeta,
agent.resourceexecutor.actions, agent.qosmanager.framework.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from agent.podmeta import PodMeta
from agent.qosmanager.framework import Decision, Snapshot
from agent.resourceexecutor.actions import Evict
from apis import constants as c
from apis.gonum import go_div
from apis.kubeobjects import Node, Pod
from apis.nodeslo import ResourceThresholdStrategy
from apis.pod import (
    PHASE_PENDING,
    PHASE_RUNNING,
    container_requests,
    containers,
    init_containers,
    is_restartable_init_container,
    phase,
    pod_annotations,
    pod_labels,
    resource_list,
    status,
)
from apis.qos import (
    PriorityClass,
    QoSClass,
    eviction_priority,
    priority_value_with_default,
    qos_class_raw,
    sub_priority,
)
from apis.quantity import Quantity
from apis.waits import clamp_seconds

__all__ = [
    "MAX_ALLOCATABLE_PRIORITY",
    "TARGET_REQUEST",
    "TARGET_USED",
    "EvictPick",
    "EvictState",
    "EvictTask",
    "TierRequest",
    "allocatable_amount",
    "allocatable_config_valid",
    "cool_down_active",
    "eviction_allowed",
    "generic_candidates",
    "generic_key",
    "go_div",
    "is_be",
    "node_quantity",
    "plan_evictions",
    "sort_pods",
    "threshold_strategy",
    "tier_request",
    "tier_sums",
    "to_decision",
]

TARGET_USED: Final = "podUsed"
TARGET_REQUEST: Final = "podResourceRequest"
EVICT_REASON: Final = "evicted"
"""Upstream's reason string for every koordlet eviction (metric label, Event message)."""

MAX_ALLOCATABLE_PRIORITY: Final = 7999
"""The allocatable evictors' ``allocatablEvictPriorityThreshold`` must not exceed koord-mid's top."""

Amounts = Mapping[str, int]
AmountFn = Callable[[PodMeta], Amounts]
TierRequest = Callable[[Pod], tuple[PriorityClass, str, int]]
"""A pod's priority class, the tier resource the allocatable evictor counts for it, and its request."""


def allocatable_config_valid(
    threshold: int | None, lower: int | None, priority_threshold: int | None
) -> bool:
    """The allocatable evictors' config check: threshold ≥ 0, lower < threshold, priority ≤ 7999."""
    return (
        threshold is not None
        and threshold >= 0
        and lower is not None
        and lower < threshold
        and priority_threshold is not None
        and priority_threshold <= MAX_ALLOCATABLE_PRIORITY
    )


def node_quantity(node: Node | None, section: str, name: str, milli: bool = False) -> int | None:
    """``status.<section>[name]`` as ``Value()`` (``MilliValue()`` with ``milli``); None when absent."""
    q = resource_list(status(node or {}).get(section), (name,)).get(name)
    if q is None:
        return None
    return q.milli_value() if milli else q.value()


def tier_sums(pods: Sequence[PodMeta], priority_threshold: int, tier: TierRequest) -> dict[str, int]:
    """Σ tier request per tier resource of the pods at or below ``priority_threshold``."""
    sums: dict[str, int] = {}
    for p in pods:
        if priority_value_with_default(p.pod) > priority_threshold:
            continue
        _, name, req = tier(p.pod)
        sums[name] = sums.get(name, 0) + req
    return sums


def allocatable_amount(release: Mapping[str, int], tier: TierRequest) -> AmountFn:
    """Per-pod credit of an allocatable task: a batch (mid) pod's tier request when that tier resource is
    being released; nothing otherwise."""

    def amount(pod: PodMeta) -> dict[str, int]:
        cls, name, req = tier(pod.pod)
        if cls in (PriorityClass.BATCH, PriorityClass.MID) and name in release:
            return {name: req}
        return {}

    return amount


def is_be(pod: PodMeta) -> bool:
    """The raw ``koordinator.sh/qosClass`` label is exactly ``BE`` (the BE evictors' selector,
    docs/rules/koordlet.md#be-evictors-evict-only-be-pods)."""
    return qos_class_raw(pod.pod) is QoSClass.BE


def eviction_allowed(pod: Pod, gate: str) -> bool:
    """``koordinator.sh/eviction-policy``: absent → allowed; a JSON array of gate names → allowed iff it
    lists ``gate``; unparsable → disallowed."""
    raw = pod_annotations(pod).get(c.ANNOTATION_EVICTION_POLICY)
    if raw is None:
        return True
    try:
        names = json.loads(raw) if isinstance(raw, str) else None
    except (ValueError, RecursionError):  # RecursionError: JSON nested too deep to parse
        return False
    if names is None:
        return True  # JSON null unmarshals into a nil slice: no restriction
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return False
    return gate in names


def running_or_pending(pod: Pod) -> bool:
    return phase(pod) in (PHASE_RUNNING, PHASE_PENDING)


def eviction_enabled(pod: Pod) -> bool:
    return pod_labels(pod).get(c.LABEL_POD_EVICTION_ENABLED) == "true"


def tier_request(pod: Pod, name: str) -> int:
    """Σ of the positive ``name`` requests of the containers and sidecar init containers, as ``Value()``
    (batch/mid cpu are already milli integers)."""
    total = 0
    for ctr in [*containers(pod), *(i for i in init_containers(pod) if is_restartable_init_container(i))]:
        q: Quantity | None = container_requests(ctr, (name,)).get(name)
        if q is not None and q.sign() > 0:
            total += q.value()
    return total


def sort_pods(pods: Sequence[PodMeta], less: Callable[[PodMeta, PodMeta], bool]) -> list[PodMeta]:
    """Sort with a Go ``sort.Slice`` less function; pods that compare equal keep their input order
    (upstream's order for ties is undefined)."""

    def cmp(a: PodMeta, b: PodMeta) -> int:
        if less(a, b):
            return -1
        if less(b, a):
            return 1
        return 0

    return sorted(pods, key=functools.cmp_to_key(cmp))


def generic_key(pod: PodMeta) -> tuple[int, int, int]:
    """The generic evictors' first sort keys: eviction-priority annotation, priority value, sub-priority."""
    return eviction_priority(pod.pod), priority_value_with_default(pod.pod), sub_priority(pod.pod)


def generic_candidates(
    pods: Sequence[PodMeta], feature: str, priority_limit: int, sampled: Collection[str]
) -> list[PodMeta]:
    """The generic (MemoryEvict/CPUEvict and allocatable) candidate filter, unsorted: Running/Pending,
    the eviction-policy annotation allows ``feature``, priority value ≤ the limit, eviction-enabled label,
    and a fresh usage sample (``sampled`` holds the pod UIDs with one)."""
    return [
        p
        for p in pods
        if running_or_pending(p.pod)
        and eviction_allowed(p.pod, feature)
        and priority_value_with_default(p.pod) <= priority_limit
        and eviction_enabled(p.pod)
        and p.uid in sampled
    ]


def generic_less(
    key: Callable[[PodMeta], tuple[int, int, int]], usage: Callable[[PodMeta], int]
) -> Callable[[PodMeta, PodMeta], bool]:
    """The generic evictors' order: (eviction-priority, priority value, sub-priority) ascending, then
    ``usage`` descending."""

    def less(a: PodMeta, b: PodMeta) -> bool:
        ka, kb = key(a), key(b)
        if ka != kb:
            return ka < kb
        return usage(a) > usage(b)

    return less


@dataclass(frozen=True)
class EvictTask:
    """One gate's share of a round: what to release (per resource, all > 0) and who may go, in order."""

    gate: str
    target: str
    """``podUsed`` or ``podResourceRequest``: amounts are credited per target type."""
    release: Mapping[str, int]
    candidates: tuple[PodMeta, ...]
    amount: AmountFn
    """What evicting a pod releases toward this target type (per resource)."""


@dataclass(frozen=True)
class EvictPick:
    task: EvictTask
    pod: PodMeta
    pending: bool
    """Already evicted earlier (still in the evictor's cache): credited, not evicted again."""
    credited: Amounts


@dataclass(frozen=True)
class EvictState:
    """Cool-down state: when a pod was last newly evicted (None = never)."""

    last_evict_time: datetime | None = None


def cool_down_active(state: EvictState | None, now: datetime, seconds: float) -> bool:
    if state is None or state.last_evict_time is None:
        return False
    try:
        return now < state.last_evict_time + timedelta(seconds=clamp_seconds(seconds, "eviction cool-down"))
    except OverflowError:  # a last eviction near datetime.max: still cooling down
        return True


def _covered(released: Mapping[str, int], target: Mapping[str, int]) -> bool:
    return all(released.get(name, 0) >= amount for name, amount in target.items())


def plan_evictions(tasks: Sequence[EvictTask], already_evicted: Collection[str]) -> list[EvictPick]:
    """One round of ``KillAndEvictPods`` (docs/rules/koordlet.md, "Execution"). ``already_evicted``: pod
    UIDs the evictor evicted recently (pending release). Returns the picks in order; pending ones are not
    to be evicted again."""
    released: dict[str, dict[str, int]] = {t.target: {} for t in tasks}
    picked: set[str] = set()
    picks: list[EvictPick] = []

    def credit(pod: PodMeta) -> None:
        for target, totals in released.items():
            best: dict[str, int] = {}
            for t in tasks:
                if t.target != target:
                    continue
                for name, value in t.amount(pod).items():
                    best[name] = max(best.get(name, value), value)
            for name, value in best.items():
                totals[name] = totals.get(name, 0) + value

    for task in tasks:
        for pod in task.candidates:
            if _covered(released[task.target], task.release):
                break
            if pod.uid in picked:
                continue
            picked.add(pod.uid)
            before = dict(released[task.target])
            credit(pod)
            gained = {k: v - before.get(k, 0) for k, v in released[task.target].items() if v != before.get(k)}
            picks.append(EvictPick(task, pod, pod.uid in already_evicted, gained))
    return picks


def threshold_strategy(snapshot: Snapshot) -> ResourceThresholdStrategy | None:
    """The NodeSLO's ``resourceUsedThresholdWithBE`` when its ``enable`` is true, else None (skip)."""
    slo = snapshot.node_slo
    s = slo.resource_used_threshold_with_be if slo is not None else None
    return s if s is not None and s.enable else None


def to_decision(
    snapshot: Snapshot,
    tasks: Sequence[EvictTask],
    already_evicted: Collection[str],
    state: EvictState,
    be_gate: str,
) -> Decision[EvictState]:
    """Evict actions for the non-pending picks; the cool-down restarts when any pod is newly evicted."""
    actions: list[Evict] = []
    for pick in plan_evictions(tasks, already_evicted):
        if pick.pending:
            continue
        # docs/rules/koordlet.md#be-evictors-evict-only-be-pods, whatever the input
        if pick.task.gate == be_gate and not is_be(pick.pod):
            continue
        actions.append(
            Evict(
                strategy=pick.task.gate,
                pod=pick.pod,
                reason=EVICT_REASON,
                message=f"trigger by koordlet feature {pick.task.gate}, kill pod: {pick.pod.name}",
                released_bytes=sum(v for k, v in pick.credited.items() if "memory" in k),
                released_milli_cpu=sum(v for k, v in pick.credited.items() if "cpu" in k),
            )
        )
    new_state = EvictState(snapshot.now) if actions else state
    return Decision(evictions=tuple(actions), state=new_state)
