"""Oracle for ElasticQuota's runtime quota (docs/rules/scheduler-elasticquota.md#runtime-quota): the
redistribution of one resource written as the rules read (rounds handing out shares by the largest
remainder, exact fractions, ties by name), and a quota tree evaluated the lazy way upstream does it: each
quota's runtime by walking its own path from the root, each parent's split recomputed on the way, request
and used summed by recursion over the tree. Property tests compare the production calculator and group
quota manager with it.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from fractions import Fraction

ROOT, SYSTEM, DEFAULT = "koordinator-root-quota", "koordinator-system-quota", "koordinator-default-quota"


@dataclass(frozen=True)
class Child:
    name: str
    weight: int
    request: int
    min: int
    guarantee: int = 0
    lend: bool = True


def hamilton(total: int, nodes: list[Child]) -> dict[str, int]:
    """Largest remainder: each weighted node's exact share floored, the leftover units one each to the
    largest fractional parts (ties: smaller name first)."""
    weights = sum(n.weight for n in nodes)
    out = {n.name: 0 for n in nodes}
    if weights <= 0 or total <= 0:
        return out
    exact = {n.name: Fraction(n.weight * total, weights) for n in nodes if n.weight > 0}
    for name, share in exact.items():
        out[name] = math.floor(share)
    leftover = total - sum(out.values())
    by_fraction = sorted(exact, key=lambda name: (-(exact[name] - math.floor(exact[name])), name))
    for name in by_fraction[:leftover]:
        out[name] += 1
    return out


def redistribute(total: int, children: list[Child]) -> dict[str, int]:
    runtime: dict[str, int] = {}
    hungry: list[Child] = []
    for c in children:
        guaranteed = max(c.min, c.guarantee)
        if c.request > guaranteed:
            runtime[c.name] = guaranteed
            hungry.append(c)
        else:
            runtime[c.name] = c.request if c.lend else guaranteed
    left = total - sum(runtime.values())
    while left > 0 and hungry and sum(c.weight for c in hungry) > 0:
        given = hamilton(left, hungry)
        left = 0
        still = []
        for c in hungry:
            runtime[c.name] += given[c.name]
            if runtime[c.name] >= c.request:
                left += runtime[c.name] - c.request
                runtime[c.name] = c.request
            else:
                still.append(c)
        hungry = still
    return runtime


@dataclass
class OQuota:
    name: str
    parent: str
    max: dict[str, int]
    min: dict[str, int]
    weight: dict[str, int]
    lend: bool = True
    pods: list[tuple[dict[str, int], bool]] = field(default_factory=list)  # (request, assigned)


@dataclass
class TreeOracle:
    quotas: dict[str, OQuota]
    cluster_total: dict[str, int]
    scale: bool = True

    def kids(self, name: str) -> list[OQuota]:
        return [q for q in self.quotas.values() if q.parent == name and q.name not in (SYSTEM, DEFAULT)]

    def all_kids(self, name: str) -> list[OQuota]:
        return [q for q in self.quotas.values() if q.parent == name]

    def own(self, q: OQuota, assigned_only: bool) -> dict[str, int]:
        out: dict[str, int] = {}
        for req, assigned in q.pods:
            if assigned_only and not assigned:
                continue
            for r, v in req.items():
                if r in q.max:
                    out[r] = out.get(r, 0) + v
        return out

    def limited(self, name: str) -> dict[str, int]:
        q = self.quotas[name]
        return {r: min(v, q.max[r]) if r in q.max else v for r, v in self.request(name).items()}

    def child_request(self, name: str) -> dict[str, int]:
        out = self.own(self.quotas[name], False)
        for c in self.all_kids(name):
            for r, v in self.limited(c.name).items():
                out[r] = out.get(r, 0) + v
        return out

    def request(self, name: str) -> dict[str, int]:
        if name == ROOT:
            out: dict[str, int] = {}
            for c in self.all_kids(ROOT):
                for r, v in self.limited(c.name).items():
                    out[r] = out.get(r, 0) + v
            return out
        q = self.quotas[name]
        out = self.child_request(name)
        if not q.lend:
            for r, m in q.min.items():
                out[r] = max(out.get(r, m), m)
        return out

    def used(self, name: str) -> dict[str, int]:
        out = self.own(self.quotas[name], True) if name != ROOT else {}
        for c in self.all_kids(name):
            for r, v in self.used(c.name).items():
                out[r] = out.get(r, 0) + v
        return out

    def root_total(self) -> dict[str, int]:
        out = dict(self.cluster_total)
        for special in (SYSTEM, DEFAULT):
            if special in self.quotas:
                for r, v in self.used(special).items():
                    out[r] = out.get(r, 0) - v
        return out

    def mins_under(self, parent: str, total: dict[str, int]) -> dict[str, dict[str, int]]:
        kids = self.kids(parent)
        mins = {k.name: dict(k.min) for k in kids}
        if not self.scale:
            return mins
        sums: dict[str, int] = {}
        for k in kids:
            for r, v in k.min.items():
                sums[r] = sums.get(r, 0) + v
        for r, t in total.items():
            s = sums.get(r, 0)
            if t >= s:
                continue
            for k in kids:
                if t <= 0:  # a positive amount is at least 1 in whole units (rounded away from zero)
                    mins[k.name][r] = 0
                else:
                    mins[k.name][r] = int(float(t) * float(k.min.get(r, 0)) / float(s))
        return mins

    def runtime(self, name: str) -> dict[str, int]:
        """The runtime field: the path from the root walked down, each parent's split recomputed."""
        path = [name]
        while path[-1] != ROOT:
            path.append(self.quotas[path[-1]].parent)
        path.reverse()
        total = self.root_total()
        keys = sorted(
            {r for q in self.quotas.values() if q.name not in (ROOT, SYSTEM, DEFAULT) for r in q.max}
        )
        for parent, child in itertools.pairwise(path):
            mins = self.mins_under(parent, total)
            out: dict[str, int] = {}
            for r in keys:
                children = [
                    Child(k.name, k.weight.get(r, 0), self.limited(k.name).get(r, 0), mins[k.name].get(r, 0))
                    if k.lend
                    else Child(
                        k.name,
                        k.weight.get(r, 0),
                        self.limited(k.name).get(r, 0),
                        mins[k.name].get(r, 0),
                        0,
                        False,
                    )
                    for k in self.kids(parent)
                ]
                out[r] = redistribute(total.get(r, 0), children)[child]
            total = out
            keys = sorted(self.quotas[child].max)
        return total
