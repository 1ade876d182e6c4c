"""Device scoring (docs/rules/scheduler-deviceshare.md#scoring): the ``scoringStrategy`` argument
(``LeastAllocated`` or ``MostAllocated`` over weighted resources), the score of one device for a
per-instance request (used to order devices in Reserve) and of a node's devices taken together (the
Score extension point; normalised by kube's DefaultNormalizeScore), all integer arithmetic as upstream.
Imports: the standard library, apis.device, scheduler.plugins.resourcemath.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from apis.device import GPU_MEMORY, GPU_MEMORY_RATIO, KOORD_FPGA, KOORD_RDMA
from scheduler.plugins.resourcemath import allocation_score

LEAST_ALLOCATED: Final = "LeastAllocated"
MOST_ALLOCATED: Final = "MostAllocated"
# gpu-core carries no weight by default (docs/rules/scheduler-deviceshare.md#scoring)
DEFAULT_WEIGHTS: Final[Mapping[str, int]] = MappingProxyType(
    {GPU_MEMORY_RATIO: 1, GPU_MEMORY: 1, KOORD_RDMA: 1, KOORD_FPGA: 1}
)

Values = Mapping[str, int]


@dataclass(frozen=True, slots=True)
class ScoringStrategy:
    type: str = LEAST_ALLOCATED
    weights: Mapping[str, int] = field(default_factory=lambda: DEFAULT_WEIGHTS)


DEFAULT_STRATEGY: Final = ScoringStrategy()


def parse_strategy(raw: object, where: str = "scoringStrategy") -> ScoringStrategy:
    """``{"type", "resources": [{"name", "weight"}]}``; None = the default. Missing ``type`` is
    LeastAllocated, missing ``resources`` the default weights (docs/rules/scheduler-deviceshare.md#scoring).
    ValueError names the field and the value."""
    if raw is None:
        return DEFAULT_STRATEGY
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected an object, got {raw!r}")
    kind = raw.get("type", LEAST_ALLOCATED)
    if kind not in (LEAST_ALLOCATED, MOST_ALLOCATED):
        raise ValueError(f"{where}.type={kind!r}: must be {LEAST_ALLOCATED} or {MOST_ALLOCATED}")
    resources = raw.get("resources")
    if resources is None:
        return ScoringStrategy(str(kind))
    if not isinstance(resources, list):
        raise ValueError(f"{where}.resources={resources!r}: expected a list")
    weights: dict[str, int] = {}
    for i, item in enumerate(resources):
        at = f"{where}.resources[{i}]"
        if not isinstance(item, Mapping):
            raise ValueError(f"{at}={item!r}: expected an object")
        name, weight = item.get("name"), item.get("weight", 1)
        if not isinstance(name, str) or not name:
            raise ValueError(f"{at}.name={name!r}: expected a resource name")
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
            raise ValueError(f"{at}.weight={weight!r}: must be an integer in [1, 100]")
        weights[name] = weight
    return ScoringStrategy(str(kind), weights)


def _weighted(strategy: ScoringStrategy, request: Values, totals: Values, frees: Values) -> int:
    score = weight_sum = 0
    for name, weight in strategy.weights.items():
        total = totals.get(name, 0)
        if total == 0:  # a resource the device does not have takes no part
            continue
        free = frees.get(name, 0)
        # more free than total (an over-reported free): counted as fully requested
        requested = total - free + request.get(name, 0) if total >= free else total
        score += allocation_score(strategy.type == MOST_ALLOCATED, requested, total) * weight
        weight_sum += weight
    return score // weight_sum if weight_sum else 0


def score_device(strategy: ScoringStrategy, request: Values, total: Values, free: Values) -> int:
    """One device's score for a per-instance request (docs/rules/scheduler-deviceshare.md#scoring)."""
    return _weighted(strategy, request, total, free)


def score_node(
    strategy: ScoringStrategy, request: Values, totals: Iterable[Values], frees: Iterable[Values]
) -> int:
    """The same formula over the sums of the node's devices of one type."""
    return _weighted(strategy, request, _sum(totals), _sum(frees))


def _sum(lists: Iterable[Values]) -> dict[str, int]:
    out: dict[str, int] = {}
    for values in lists:
        for n, v in values.items():
            out[n] = out.get(n, 0) + v
    return out


def as_json(strategy: ScoringStrategy) -> dict[str, Any]:
    return {
        "type": strategy.type,
        "resources": [{"name": n, "weight": w} for n, w in strategy.weights.items()],
    }
