"""Score of NodeNUMAResource (docs/rules/scheduler-nodenumaresource.md#score), NUMA topology policy
none: Kubernetes' LeastAllocated / MostAllocated over the node's requested plus the pod's requests
against allocatable, weighted integer mean over the strategy's resources, with the CPUs the node's
pods hold counted amplified when the node's cpu amplification ratio is above 1. ``score_rows`` is the
same formula over numpy columns (every node at once); ``score_values`` one node's.
Pure. Imports: the standard library, numpy, apis.numa, scheduler.plugins.resourcemath, this package.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from apis.numa import amplify, go_fields
from scheduler.plugins.nodenumaresource.filtering import NodeFacts, cpu_ratio, request_cpu_bind
from scheduler.plugins.nodenumaresource.prefilter import PodState
from scheduler.plugins.resourcemath import allocation_score

LEAST_ALLOCATED: Final = "LeastAllocated"
MOST_ALLOCATED: Final = "MostAllocated"
MAX_NODE_SCORE: Final = 100
_COLUMNS: Final = frozenset({"cpu", "memory", "ephemeral-storage"})
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class ScoringStrategy:
    type: str = LEAST_ALLOCATED
    resources: tuple[tuple[str, int], ...] = (("cpu", 1), ("memory", 1))


def _scalar(name: str) -> bool:
    """Kubernetes' IsScalarResourceName: extended, hugepages, prefixed native or attachable volumes."""
    return "/" in name or name.startswith(("hugepages-", "attachable-volumes-"))


def scored_resources(strategy: ScoringStrategy, pod: Mapping[str, int]) -> list[tuple[str, int]]:
    """The weighted resources that can take part: cpu, memory, ephemeral-storage, and scalar resources
    the pod requests (a node without the resource then drops it: allocatable 0)."""
    out: dict[str, int] = {}
    for name, weight in strategy.resources:
        if name in _COLUMNS or (_scalar(name) and pod.get(name, 0) != 0):
            out[name] = weight  # a name given twice keeps its last weight (a Go map)
    return list(out.items())


def score_values(
    strategy: ScoringStrategy,
    requested: Mapping[str, int],
    allocatable: Mapping[str, int],
    pod: Mapping[str, int],
) -> int:
    """One node's score (requested = the node's pods, without the incoming pod)."""
    total = weights = 0
    for name, weight in scored_resources(strategy, pod):
        alloc = allocatable.get(name, 0)
        if alloc == 0:
            continue
        req = requested.get(name, 0) + pod.get(name, 0)
        total += allocation_score(strategy.type == MOST_ALLOCATED, req, alloc) * weight
        weights += weight
    return total // weights if weights else 0


def score_rows(
    strategy: ScoringStrategy,
    requested: Mapping[str, I64],
    allocatable: Mapping[str, I64],
    pod: Mapping[str, int],
    n: int,
) -> I64:
    """``score_values`` for every row: ``requested``/``allocatable`` are columns by resource (a missing
    column is all zero)."""
    total = np.zeros(n, np.int64)
    weights = np.zeros(n, np.int64)
    for name, weight in scored_resources(strategy, pod):
        alloc = allocatable.get(name)
        if alloc is None:
            continue
        req = requested.get(name, np.zeros(n, np.int64)) + pod.get(name, 0)
        has = alloc != 0
        safe = np.where(has, alloc, 1)
        if strategy.type == MOST_ALLOCATED:
            s = np.minimum(req, alloc) * MAX_NODE_SCORE // safe
        else:
            s = np.where(req > alloc, 0, (alloc - req) * MAX_NODE_SCORE // safe)
        total += np.where(has, s * weight, 0)
        weights += np.where(has, weight, 0)
    return np.where(weights > 0, total // np.where(weights > 0, weights, 1), 0)


def score_node(
    state: PodState,
    facts: NodeFacts,
    strategy: ScoringStrategy,
    requested: Mapping[str, int],
    allocatable: Mapping[str, int],
) -> int:
    """One node's Score (docs/rules/scheduler-nodenumaresource.md#score): 0 for a binding pod on an
    invalid topology or when the amplification annotation does not decode; amplified otherwise."""
    if state.skip:
        return 0
    bind, status = request_cpu_bind(state, facts.node_bind_policy)
    if status is not None:
        return 0  # upstream returns the status; Filter already rejected the node
    if bind and not facts.topology_valid:
        return 0
    try:
        ratio = cpu_ratio(facts)
    except ValueError:
        return 0
    pod: dict[str, int] = dict(state.requests)
    if bind and ratio > 1 and pod.get("cpu", 0):
        pod["cpu"] = amplify(pod["cpu"], ratio)
    if state.cpu_milli == 0 or ratio <= 1:
        return score_values(strategy, requested, allocatable, pod)
    held = facts.allocated_cpus()
    if held is None:
        return 0
    req = dict(requested)
    req["cpu"] = req.get("cpu", 0) - held * 1000 + amplify(held * 1000, ratio)
    return score_values(strategy, req, allocatable, pod)


def parse_strategy(raw: Any, where: str) -> ScoringStrategy:
    """``{type, resources: [{name, weight}]}``; null → the default; errors name the field and value."""
    if raw is None:
        return ScoringStrategy()
    f = go_fields(raw, ("type", "resources"), where)
    kind = f.get("type")
    if kind not in (LEAST_ALLOCATED, MOST_ALLOCATED):
        raise ValueError(f"{where}.type={kind!r}: scoring strategy must be LeastAllocated or MostAllocated")
    resources = f.get("resources")
    if resources is not None and not isinstance(resources, list):
        raise ValueError(f"{where}.resources={resources!r}: expected a list")
    out: list[tuple[str, int]] = []
    for i, r in enumerate(resources or []):
        g = go_fields(r, ("name", "weight"), f"{where}.resources[{i}]")
        name, weight = g.get("name") or "", g.get("weight", 0)
        if not isinstance(name, str):
            raise ValueError(f"{where}.resources[{i}].name={name!r}: expected a string")
        if isinstance(weight, bool) or not isinstance(weight, int) or not 0 < weight <= 100:
            msg = f"resource weight of {name} not in valid range (0, 100]"
            raise ValueError(f"{where}.resources[{i}].weight={weight!r}: {msg}")
        out.append((name, weight))
    return ScoringStrategy(str(kind), tuple(out))
