"""Score of NodeNUMAResource (docs/rules/scheduler-nodenumaresource.md#score), NUMA topology policy
none, in its one form: every row at once over numpy columns. Kubernetes' LeastAllocated /
MostAllocated over the node's requested plus the pod's requests against allocatable, weighted integer
mean over the strategy's resources; on a node whose cpu amplification ratio is above 1 the CPUs its
pods hold count amplified, and so does a binding pod's cpu request; 0 where the rule says so. What the
formula reads of each node besides the snapshot's columns comes in as columns too (``ScoreRows``,
gathered by scheduler.plugins.nodenumaresource.rows).
Pure. Imports: the standard library, numpy, apis.numa, this package (prefilter).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from apis.numa import go_fields
from scheduler.plugins.nodenumaresource.prefilter import PodState

LEAST_ALLOCATED: Final = "LeastAllocated"
MOST_ALLOCATED: Final = "MostAllocated"
MAX_NODE_SCORE: Final = 100
_COLUMNS: Final = frozenset({"cpu", "memory", "ephemeral-storage"})
# An amplified quantity past this saturates: Go's int64(float64) of a larger value is undefined, and
# anything this large is far over any allocatable (docs/rules/scheduler-nodenumaresource.md#score).
AMPLIFIED_MAX: Final = 2**62
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class ScoringStrategy:
    type: str = LEAST_ALLOCATED
    resources: tuple[tuple[str, int], ...] = (("cpu", 1), ("memory", 1))


@dataclass(frozen=True, slots=True)
class ScoreRows:
    """What Score reads of each row besides requested and allocatable, one entry per row
    (docs/rules/scheduler-nodenumaresource.md#score)."""

    ratio: F64  # the node's cpu amplification ratio: -1 unset, NaN when the annotation does not decode
    bind: Bools  # the pod binds CPUs there (PreFilter said so, or the node forces it)
    refused: Bools  # the node forces binding on a cpu request that is not whole CPUs
    valid: Bools  # a valid CPU topology (read where ``bind``)
    held: I64  # CPUs the node's pods hold, -1 when its topology is present but invalid (read where amplified)


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


def amplify_rows(origin: I64, ratio: F64) -> I64:
    """apis.numa.amplify on every row: ``ceil(float64(origin) × ratio)`` where the ratio is above 1
    (float64 as upstream's Amplify computes it), ``origin`` elsewhere (NaN included); saturates at
    ``AMPLIFIED_MAX``."""
    out = origin.copy()
    up = ratio > 1
    if up.any():
        product = origin[up].astype(np.float64) * ratio[up]
        out[up] = np.fmin(np.ceil(product), float(AMPLIFIED_MAX)).astype(np.int64)
    return out


def _weighted_mean(
    strategy: ScoringStrategy,
    requested: Mapping[str, I64],
    allocatable: Mapping[str, I64],
    pod: Mapping[str, int],
    pod_cpu: I64 | int,
    n: int,
) -> I64:
    """Σ score × weight / Σ weight over the resources with non-zero allocatable, per row (a missing
    column is all zero); ``pod_cpu`` replaces the pod's cpu request (per row when amplified)."""
    total = np.zeros(n, np.int64)
    weights = np.zeros(n, np.int64)
    for name, weight in scored_resources(strategy, pod):
        alloc = allocatable.get(name)
        if alloc is None:
            continue
        mine = pod_cpu if name == "cpu" else pod.get(name, 0)
        req = requested.get(name, np.zeros(n, np.int64)) + mine
        has = alloc != 0
        safe = np.where(has, alloc, 1)
        if strategy.type == MOST_ALLOCATED:
            s = np.minimum(req, alloc) * MAX_NODE_SCORE // safe
        else:
            s = np.where(req > alloc, 0, (alloc - req) * MAX_NODE_SCORE // safe)
        total += np.where(has, s * weight, 0)
        weights += np.where(has, weight, 0)
    return np.where(weights > 0, total // np.where(weights > 0, weights, 1), 0)


def score_rows(
    strategy: ScoringStrategy,
    state: PodState,
    requested: Mapping[str, I64],
    allocatable: Mapping[str, I64],
    rows: ScoreRows,
) -> I64:
    """Every row's Score (docs/rules/scheduler-nodenumaresource.md#score): ``requested``/``allocatable``
    are the snapshot's columns by resource (the node's pods, without this one)."""
    n = len(rows.ratio)
    if state.skip:
        return np.zeros(n, np.int64)
    # upstream returns the status (refused) or 0; Filter already rejected such nodes
    zero = rows.refused | (rows.bind & ~rows.valid) | np.isnan(rows.ratio)
    cpu = state.cpu_milli
    pod_cpu: I64 | int = cpu
    req = dict(requested)
    amplified = rows.ratio > 1
    if cpu and amplified.any():
        zero |= amplified & (rows.held < 0)
        held = np.where(amplified, np.maximum(rows.held, 0), 0) * 1000
        base = req.get("cpu", np.zeros(n, np.int64))
        req["cpu"] = base - held + amplify_rows(held, rows.ratio)
        mine = np.full(n, cpu, np.int64)
        pod_cpu = np.where(rows.bind, amplify_rows(mine, rows.ratio), mine)
    scores = _weighted_mean(strategy, req, allocatable, state.requests, pod_cpu, n)
    scores[zero] = 0
    return scores


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
