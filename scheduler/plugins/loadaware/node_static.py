"""What the plugin derives from a Node object alone (docs/rules/scheduler.md#inputs-per-node): capacity,
threshold profile and, per resource, the smallest sum of usages that fails Filter
(``exact.min_exceeding_sum``). Derived once per distinct content and reused: ``NodeStatics.of`` answers from
the node dict's identity (the scheduler cache replaces node dicts, never mutates them) or from a key made of
every input the derivation reads (the allocatable values of the vector's resources with their types, and the
two annotation texts).
Imports: the standard library, apis.constants, scheduler.plugins.loadaware (args, profile, exact).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from apis import constants as c
from scheduler.plugins.loadaware.args import LoadAwareSchedulingArgs
from scheduler.plugins.loadaware.exact import min_exceeding_sum
from scheduler.plugins.loadaware.profile import ThresholdProfile, Vector, node_capacity, node_profile

#: Largest |value| for which Score's float64 evaluation is exact (see ``table``): 101 × 2**46 < 2**53.
SCORE_EXACT_LIMIT: Final = 1 << 46
_CACHE_LIMIT: Final = 4096
_MISSING: Final = object()


def _sum_bounds(thresholds: Vector, capacity: Vector) -> tuple[int | None, ...]:
    """Per resource: None when the check is off (threshold 0 or capacity 0), else the smallest failing
    sum. Negative capacities (never produced by a sane node) are left to the per-node reference."""
    return tuple(
        None if t == 0 or cap <= 0 else min_exceeding_sum(t, cap)
        for t, cap in zip(thresholds, capacity, strict=True)
    )


@dataclass(frozen=True, slots=True)
class NodeStatic:
    """The Node-derived facts of one node, in resource-vector order.

    ``np_*``: the profile used for pods that are not judged by prod thresholds (aggregated thresholds
    when an aggregated profile applies, else usage thresholds); ``pp_*``: for Prod pods (the prod
    thresholds when ``prod_set``; then ``pp_active`` is true, as a set vector has a non-zero value;
    else the same as ``np_*``). ``*_bounds``: smallest failing sums;
    ``*_codes``: the FilterResult status index of each resource's rejection. ``regular``: every
    capacity is in ``[0, SCORE_EXACT_LIMIT]`` (the vectorised forms handle the node exactly)."""

    capacity: Vector
    profile: ThresholdProfile
    capacity_f: tuple[float, ...]
    np_active: bool
    np_bounds: tuple[int | None, ...]
    np_codes: tuple[int, ...]
    pp_active: bool
    pp_bounds: tuple[int | None, ...]
    pp_codes: tuple[int, ...]
    regular: bool


def derive(args: LoadAwareSchedulingArgs, resources: Sequence[str], node: Mapping[str, Any]) -> NodeStatic:
    """Build the record of ``node`` from scratch."""
    r = len(resources)
    capacity = node_capacity(resources, node)
    profile = node_profile(args, resources, node)
    np_thresholds = profile.aggregated if profile.aggregated is not None else profile.usage
    offset = r if profile.aggregated is not None else 0
    np_bounds = _sum_bounds(np_thresholds, capacity)
    np_codes = tuple(1 + j + offset for j in range(r))
    np_active = any(t != 0 for t in np_thresholds)
    if profile.prod_set:
        pp_bounds, pp_codes = _sum_bounds(profile.prod, capacity), tuple(1 + j for j in range(r))
        pp_active = True
    else:
        pp_bounds, pp_codes, pp_active = np_bounds, np_codes, np_active
    regular = all(0 <= v <= SCORE_EXACT_LIMIT for v in capacity)
    regular = regular and not any(
        t != 0 and cap < 0
        for thresholds in (np_thresholds, profile.prod)
        for t, cap in zip(thresholds, capacity, strict=True)
    )
    return NodeStatic(
        capacity=capacity,
        profile=profile,
        capacity_f=tuple(float(v) if v != 0 else math.inf for v in capacity),
        np_active=np_active,
        np_bounds=np_bounds,
        np_codes=np_codes,
        pp_active=pp_active,
        pp_bounds=pp_bounds,
        pp_codes=pp_codes,
        regular=regular,
    )


def content_key(resources: Sequence[str], node: Mapping[str, Any]) -> Hashable:
    """Every input ``derive`` reads: typed allocatable values of the vector's resources and the
    raw-allocatable and usage-thresholds annotation texts. Raises TypeError when not hashable."""
    allocatable = ((node.get("status") or {}).get("allocatable")) or {}
    values: list[Hashable] = []
    if isinstance(allocatable, Mapping):
        for name in resources:
            v = allocatable.get(name, _MISSING)
            values.append(_MISSING if v is _MISSING else (type(v), v))
    else:
        values.append("not-a-map")
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    texts: list[str | None] = [None, None]
    if isinstance(annotations, Mapping):
        for k, name in enumerate((c.ANNOTATION_NODE_RAW_ALLOCATABLE, c.ANNOTATION_USAGE_THRESHOLDS)):
            text = annotations.get(name)
            texts[k] = text if isinstance(text, str) else None
    key = (tuple(values), texts[0], texts[1])
    hash(key)
    return key


class NodeStatics:
    """Records by node name (valid while the node dict is the same object) and by content."""

    def __init__(self, args: LoadAwareSchedulingArgs, resources: Sequence[str]) -> None:
        self.args = args
        self.resources = tuple(resources)
        self.by_name: dict[str, tuple[Mapping[str, Any], NodeStatic]] = {}
        self.by_content: dict[Hashable, NodeStatic] = {}

    def of(self, name: str, node: Mapping[str, Any]) -> NodeStatic:
        """The record of ``node`` (named ``name``)."""
        known = self.by_name.get(name)
        if known is not None and known[0] is node:
            return known[1]
        try:
            key = content_key(self.resources, node)
        except (TypeError, AttributeError):
            record = derive(self.args, self.resources, node)
        else:
            found = self.by_content.get(key)
            if found is None:
                found = derive(self.args, self.resources, node)
                if len(self.by_content) >= _CACHE_LIMIT:
                    self.by_content.clear()
                self.by_content[key] = found
            record = found
        self.by_name[name] = (node, record)
        return record

    def forget_others(self, names: Sequence[str]) -> None:
        """Drop the identity entries of nodes not in ``names`` (after a layout change)."""
        keep = set(names)
        for name in [n for n in self.by_name if n not in keep]:
            del self.by_name[name]
