"""Memory eviction (docs/rules/koordlet.md): the tasks of gates BEMemoryEvict, MemoryAllocatableEvict and
MemoryEvict (in that order), each with its config check, trigger, release and sorted candidates,
executed by ``evictplan.plan_evictions``; a 4 s cool-down after a round that evicted. The BE task only
ever lists pods whose raw QoS label is BE (docs/rules/koordlet.md#be-evictors-evict-only-be-pods). MemoryEvict
credits released memory in bytes (docs/rules/koordlet.md#released-memory-is-counted-in-bytes).

``decide`` is pure; ``build_tasks`` and the per-gate helpers are what ``koord simulate`` runs.
Imports: standard library, apis.*, agent.podmeta, agent.qosmanager.{framework,evictplan}.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from agent.podmeta import PodMeta
from agent.qosmanager.evictplan import (
    TARGET_REQUEST,
    TARGET_USED,
    AmountFn,
    EvictState,
    EvictTask,
    allocatable_config_valid,
    cool_down_active,
    eviction_allowed,
    generic_candidates,
    generic_key,
    generic_less,
    go_div,
    is_be,
    node_quantity,
    sort_pods,
    threshold_strategy,
    tier_request,
    tier_sums,
    to_decision,
)
from agent.qosmanager.evictplan import allocatable_amount as shared_allocatable_amount
from agent.qosmanager.framework import Decision, Snapshot
from apis import constants as c
from apis.kubeobjects import Node, Pod
from apis.nodeslo import ResourceThresholdStrategy
from apis.pod import pod_requests
from apis.qos import (
    PriorityClass,
    pod_priority,
    priority_class_with_default,
)

__all__ = [
    "GATES",
    "MemoryEvictConfig",
    "MemoryEvictStrategy",
    "allocatable_release",
    "build_tasks",
    "candidates",
    "config_valid",
    "decide",
    "used_release",
]

BE_MEMORY_EVICT: Final = "BEMemoryEvict"
MEMORY_EVICT: Final = "MemoryEvict"
MEMORY_ALLOCATABLE_EVICT: Final = "MemoryAllocatableEvict"
GATES: Final = (BE_MEMORY_EVICT, MEMORY_ALLOCATABLE_EVICT, MEMORY_EVICT)
"""Task order of a round."""
TIER_NAMES: Final = (c.RESOURCE_MEMORY, c.BATCH_MEMORY, c.MID_MEMORY)

Strategy = ResourceThresholdStrategy | None
PodUsage = Mapping[str, float]
"""pod UID → bytes (latest fresh sample); a pod without an entry has no sample."""


@dataclass(frozen=True)
class MemoryEvictConfig:
    cool_down_seconds: float = 4.0
    already_evicted: frozenset[str] = field(default_factory=frozenset)
    """UIDs in the evictor's 2-minute cache (pending release)."""


# --- config checks and releases -------------------------------------------------------------------


def _lower(s: ResourceThresholdStrategy) -> int | None:
    thr = s.memory_evict_threshold_percent
    if thr is None:
        return None
    return s.memory_evict_lower_percent if s.memory_evict_lower_percent is not None else thr - 2


def config_valid(feature: str, s: Strategy) -> bool:
    if s is None:
        return False
    if feature in (BE_MEMORY_EVICT, MEMORY_EVICT):
        thr, lower = s.memory_evict_threshold_percent, _lower(s)
        if thr is None or thr < 0 or lower is None or lower >= thr:
            return False
        return feature == BE_MEMORY_EVICT or s.evict_enabled_priority_threshold is not None
    if feature == MEMORY_ALLOCATABLE_EVICT:
        return allocatable_config_valid(
            s.memory_allocatable_evict_threshold_percent,
            s.memory_allocatable_evict_lower_percent,
            s.allocatable_evict_priority_threshold,
        )
    return False


def used_release(capacity: int, used: int, s: Strategy) -> int:
    """Bytes the BEMemoryEvict/MemoryEvict tasks must release (0 = not triggered); thresholds as given."""
    if s is None or capacity <= 0:
        return 0
    thr, lower = s.memory_evict_threshold_percent, _lower(s)
    if thr is None or lower is None:
        return 0
    usage = go_div(int(used) * 100, capacity)
    if usage < thr:
        return 0
    return max(0, go_div(capacity * (usage - lower), 100))


def _tier_name(pod: Pod) -> tuple[PriorityClass, str]:
    cls = priority_class_with_default(pod)
    if cls is PriorityClass.BATCH:
        return cls, c.BATCH_MEMORY
    if cls is PriorityClass.MID:
        return cls, c.MID_MEMORY
    return cls, c.RESOURCE_MEMORY


def _pod_tier_request(pod: Pod) -> tuple[PriorityClass, str, int]:
    cls, name = _tier_name(pod)
    if name == c.RESOURCE_MEMORY:
        q = pod_requests(pod).get(c.RESOURCE_MEMORY)
        return cls, name, 0 if q is None else q.value()
    return cls, name, tier_request(pod, name)


def allocatable_release(node: Node | None, pods: Sequence[PodMeta], s: Strategy) -> dict[str, int]:
    """Bytes the MemoryAllocatableEvict task must release per tier resource (only positive entries)."""
    if s is None or s.allocatable_evict_priority_threshold is None:
        return {}
    thr = s.memory_allocatable_evict_threshold_percent or 0
    lower = s.memory_allocatable_evict_lower_percent or 0
    sums = tier_sums(pods, s.allocatable_evict_priority_threshold, _pod_tier_request)
    out: dict[str, int] = {}
    for name, req in sums.items():
        alloc = node_quantity(node, "allocatable", name)
        if not alloc:
            amount = req
        else:
            r, a = float(req), float(alloc)
            amount = int((r / a - lower / 100) * a) if r / a > thr / 100 else 0
        if amount > 0:
            out[name] = amount
    return out


def allocatable_amount(release: Mapping[str, int]) -> AmountFn:
    """Per-pod credit of the allocatable task (``evictplan.allocatable_amount`` with memory tiers)."""
    return shared_allocatable_amount(release, _pod_tier_request)


# --- candidates -----------------------------------------------------------------------------------


def _used(usage: PodUsage, pod: PodMeta) -> int:
    value = usage.get(pod.uid)
    return 0 if value is None else int(value)


def _be_less(usage: PodUsage) -> Any:
    def less(a: PodMeta, b: PodMeta) -> bool:
        pa, pb = pod_priority(a.pod), pod_priority(b.pod)
        if pa is not None and pb is not None and pa != pb:
            return pa < pb
        ma, mb = _used(usage, a), _used(usage, b)
        if ma != 0 and mb != 0:
            return ma > mb
        if ma == 0 and mb == 0:
            return a.name > b.name
        return mb == 0

    return less


def candidates(feature: str, pods: Sequence[PodMeta], usage: PodUsage, s: Strategy) -> list[PodMeta]:
    """Every pod ``feature``'s task may evict, in the order it tries them."""
    if feature == BE_MEMORY_EVICT:
        chosen = [p for p in pods if is_be(p) and eviction_allowed(p.pod, feature)]
        return sort_pods(chosen, _be_less(usage))
    if s is None:
        return []
    limit = s.evict_enabled_priority_threshold if feature == MEMORY_EVICT else None
    if feature == MEMORY_ALLOCATABLE_EVICT:
        limit = s.allocatable_evict_priority_threshold
    elif feature != MEMORY_EVICT:
        return []
    if limit is None:
        return []
    chosen = generic_candidates(pods, feature, limit, usage.keys())
    if feature == MEMORY_EVICT:
        return sort_pods(chosen, generic_less(generic_key, lambda p: _used(usage, p)))
    return sort_pods(chosen, generic_less(generic_key, lambda p: _pod_tier_request(p.pod)[2]))


# --- one round ------------------------------------------------------------------------------------


def build_tasks(
    features: Collection[str],
    node: Node | None,
    node_used: float | None,
    pods: Sequence[PodMeta],
    usage: PodUsage,
    s: Strategy,
) -> list[EvictTask]:
    """The round's tasks in order BEMemoryEvict → MemoryAllocatableEvict → MemoryEvict (gates not in
    ``features``, invalid configs, no trigger or no fresh node sample contribute none)."""
    capacity = node_quantity(node, "capacity", c.RESOURCE_MEMORY) or 0
    tasks: list[EvictTask] = []
    if capacity <= 0:
        return tasks
    for gate in GATES:
        if gate not in features or not config_valid(gate, s):
            continue
        if gate == MEMORY_ALLOCATABLE_EVICT:
            release = allocatable_release(node, pods, s)
            target, amount = TARGET_REQUEST, allocatable_amount(release)
        else:
            if node_used is None:
                continue
            bytes_ = used_release(capacity, int(node_used), s)
            release = {c.RESOURCE_MEMORY: bytes_} if bytes_ > 0 else {}
            target = TARGET_USED
            amount = _used_amount(usage)
        if release:
            tasks.append(EvictTask(gate, target, release, tuple(candidates(gate, pods, usage, s)), amount))
    return tasks


def _used_amount(usage: PodUsage) -> Any:
    def amount(pod: PodMeta) -> dict[str, int]:
        # bytes, not ×1000 (docs/rules/koordlet.md#released-memory-is-counted-in-bytes)
        return {c.RESOURCE_MEMORY: _used(usage, pod)}

    return amount


def decide(snapshot: Snapshot, config: MemoryEvictConfig, state: EvictState | None) -> Decision[EvictState]:
    state = state or EvictState()
    if cool_down_active(state, snapshot.now, config.cool_down_seconds):
        return Decision(state=state)
    s = threshold_strategy(snapshot)
    features = [g for g in GATES if snapshot.gates.get(g, False)]
    if s is None or snapshot.node is None or not features:
        return Decision(state=state)
    fresh = 2 * snapshot.collect_interval_seconds
    node_used = snapshot.metrics.last("node_memory_usage", {}, fresh)
    usage: dict[str, float] = {}
    for p in snapshot.pods:
        v = snapshot.metrics.last("pod_memory_usage", {"pod_uid": p.uid}, fresh)
        if v is not None:
            usage[p.uid] = v
    tasks = build_tasks(features, snapshot.node, node_used, snapshot.pods, usage, s)
    return to_decision(snapshot, tasks, config.already_evicted, state, BE_MEMORY_EVICT)


class MemoryEvictStrategy:
    """The memoryEvict loop: one strategy for its three gates (registered with ``GATES``; ``decide`` reads
    which of them are on from the snapshot)."""

    name = "memoryEvict"
    interval_seconds = 1.0

    def __init__(self, interval_seconds: float = 1.0) -> None:
        self.interval_seconds = interval_seconds

    def decide(
        self, snapshot: Snapshot, config: MemoryEvictConfig, state: EvictState | None
    ) -> Decision[EvictState]:
        return decide(snapshot, config, state)
