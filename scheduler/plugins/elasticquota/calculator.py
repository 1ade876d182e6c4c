"""The runtime quota calculator: how a parent's amount is split among its direct children, one resource at a
time, by min, request and shared weight in rounds of the largest-remainder method
(docs/rules/scheduler-elasticquota.md#redistribution-one-resource); the min scaling applied when the
children's mins exceed it (docs/rules/scheduler-elasticquota.md#min-scaling); and one parent's whole
calculator, every child and resource at once (docs/rules/scheduler-elasticquota.md#top-down-evaluation),
which the quota tree runs along the path of the quota it refreshes.
Exact integers throughout (Python ints: upstream's 128-bit products never overflow here); the min scaling
is the one place that uses IEEE doubles, as upstream does.
Imports: the standard library and this package. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scheduler.plugins.elasticquota.resources import Res, whole_value


@dataclass(slots=True)
class Share:
    """One child in one resource's calculator (not frozen: a frozen dataclass's construction costs twice
    as much, and a parent's calculator builds one per child and resource on every run)."""

    name: str
    shared_weight: int
    request: int  # the child's max-limited request
    min: int
    guarantee: int = 0
    allow_lent_resource: bool = True


def largest_remainder(total: int, weight_sum: int, nodes: Sequence[Share]) -> list[int]:
    """Each node's share of ``total`` by weight: ``w*total div weight_sum`` each, then +1 to the largest
    remainders (ties by name, byte order) until the whole total is handed out. Weightless nodes get 0."""
    deltas = [0] * len(nodes)
    if weight_sum <= 0 or total <= 0 or not nodes:
        return deltas
    remainders: list[tuple[int, str, int]] = []
    for i, node in enumerate(nodes):
        if node.shared_weight <= 0:
            continue
        base, rem = divmod(node.shared_weight * total, weight_sum)
        deltas[i] = base
        remainders.append((rem, node.name, i))
    residual = total - sum(deltas)
    if residual <= 0 or not remainders:
        return deltas
    remainders.sort(key=lambda r: (-r[0], r[1].encode()))
    for _, _, i in remainders[:residual]:
        deltas[i] += 1
    return deltas


def redistribute(total: int, shares: Sequence[Share]) -> dict[str, int]:
    """Every child's runtime for one resource
    (docs/rules/scheduler-elasticquota.md#redistribution-one-resource)."""
    runtime: dict[str, int] = {}
    to_partition = total
    weight_sum = 0
    borrowers: list[Share] = []
    for c in shares:
        floor = max(c.min, c.guarantee)
        if c.request > floor:
            runtime[c.name] = floor
            borrowers.append(c)
            weight_sum += c.shared_weight
        elif c.allow_lent_resource:
            runtime[c.name] = c.request
        else:
            runtime[c.name] = floor
        to_partition -= runtime[c.name]
    while to_partition > 0 and weight_sum > 0 and borrowers:
        deltas = largest_remainder(to_partition, weight_sum, borrowers)
        still: list[Share] = []
        to_partition, weight_sum = 0, 0
        for c, delta in zip(borrowers, deltas, strict=True):
            runtime[c.name] += delta
            if runtime[c.name] < c.request:
                still.append(c)
                weight_sum += c.shared_weight
            else:
                to_partition += runtime[c.name] - c.request
                runtime[c.name] = c.request
        borrowers = still
    return runtime


def scaled_mins(total: Mapping[str, int], mins: Mapping[str, Mapping[str, int]]) -> dict[str, Res]:
    """The children's mins after scaling to ``total`` (docs/rules/scheduler-elasticquota.md#min-scaling):
    for every resource of ``total`` below the sum of the children's mins, each child gets
    ``int64(float64(total) * float64(min) / float64(sum))``, or 0 when the total is not positive in whole
    units. Other resources keep the child's min."""
    sums: dict[str, int] = {}
    for m in mins.values():
        for name, v in m.items():
            sums[name] = sums.get(name, 0) + v
    scale = [name for name, t in total.items() if t < sums.get(name, 0)]
    out: dict[str, Res] = {}
    for child, m in mins.items():
        scaled = dict(m)
        for name in scale:
            t, s = total[name], sums.get(name, 0)
            if whole_value(name, t) <= 0 or s <= 0:
                scaled[name] = 0
            else:
                scaled[name] = _go_int64(float(t) * float(m.get(name, 0)) / float(s))
        out[child] = scaled
    return out


def _go_int64(x: float) -> int:
    """Go's ``int64(x)`` of a finite double: truncation toward zero (amd64 gives MinInt64 out of range)."""
    if not -(2.0**63) <= x < 2.0**63:
        return -(1 << 63)
    return int(x)


@dataclass(slots=True)
class TreeNode:
    """What a parent's calculator reads of one child."""

    name: str
    max: Res
    min: Res
    shared_weight: Res
    limited_request: Res
    allow_lent_resource: bool = True
    guarantee: Res = field(default_factory=dict)


def split(
    total: Mapping[str, int], keys: Sequence[str], kids: Sequence[TreeNode], scale_min: bool
) -> tuple[dict[str, Res], dict[str, Res]]:
    """One parent's calculator (docs/rules/scheduler-elasticquota.md#top-down-evaluation): its amount
    ``total`` split among ``kids`` (the children that share) over ``keys`` (the root's: the max names of
    all quotas; any other parent's: its own max names), after the min scaling when ``scale_min``.
    Returns (runtime, scaled min) per child; a child's runtime holds every name of ``keys``."""
    if scale_min:
        mins = scaled_mins(total, {k.name: k.min for k in kids})
    else:
        mins = {k.name: dict(k.min) for k in kids}
    runtime: dict[str, Res] = {k.name: {} for k in kids}
    for key in keys:
        shares = [
            Share(
                k.name,
                k.shared_weight.get(key, 0),
                k.limited_request.get(key, 0),
                mins[k.name].get(key, 0),
                k.guarantee.get(key, 0),
                k.allow_lent_resource,
            )
            for k in kids
        ]
        for name, value in redistribute(total.get(key, 0), shares).items():
            runtime[name][key] = value
    return runtime, mins
