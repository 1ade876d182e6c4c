"""One quota's state in the group quota manager: its spec in the core's units, the pods charged to it
(docs/rules/scheduler-elasticquota.md#pod-accounting) with their own sums, and the derived sums and runtime
the quota tree keeps (docs/rules/scheduler-elasticquota.md#propagation-to-ancestors,
docs/rules/scheduler-elasticquota.md#runtime-quota); a pod's charge.
Imports: the standard library, apis (elasticquota, pod, quantity) and this package. Pure data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apis.elasticquota import DEFAULT_QUOTA, SYSTEM_QUOTA, ElasticQuota
from apis.pod import pod_requests
from apis.quantity import Quantity
from scheduler.plugins.elasticquota import resources as r
from scheduler.plugins.elasticquota.resources import Res

SPECIAL_CHILDREN = (SYSTEM_QUOTA, DEFAULT_QUOTA)


def pod_charge(pod: Mapping[str, Any], names: Mapping[str, object]) -> Res:
    """The pod's effective request in core units, masked to ``names`` (a quota's max)."""
    return {n: r.to_int(n, q) for n, q in pod_requests(pod).items() if n in names}


def pod_request_quantities(pod: Mapping[str, Any], names: Mapping[str, object]) -> dict[str, Quantity]:
    return {n: q for n, q in pod_requests(pod).items() if n in names}


@dataclass(slots=True)
class PodEntry:
    pod: Mapping[str, Any]
    charge: Res
    non_preemptible: bool
    assigned: bool


@dataclass(slots=True)
class QuotaInfo:
    """One quota's state. ``self_*`` are the sums over its own pods; ``request``, ``child_request``,
    ``used``, ``np_request`` and ``np_used`` include its descendants (kept by the quota tree);
    ``runtime`` and ``auto_scale_min`` are up to date only after the tree refreshed the quota's path."""

    quota: ElasticQuota
    max: Res
    min: Res
    shared_weight: Res
    pods: dict[str, PodEntry] = field(default_factory=dict)
    self_request: Res = field(default_factory=dict)
    self_used: Res = field(default_factory=dict)
    self_np_request: Res = field(default_factory=dict)
    self_np_used: Res = field(default_factory=dict)
    request: Res = field(default_factory=dict)
    child_request: Res = field(default_factory=dict)
    used: Res = field(default_factory=dict)
    np_request: Res = field(default_factory=dict)
    np_used: Res = field(default_factory=dict)
    runtime: Res = field(default_factory=dict)
    auto_scale_min: Res = field(default_factory=dict)
    guaranteed: Res = field(default_factory=dict)
    allocated: Res = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.quota.name

    @property
    def parent(self) -> str:
        return self.quota.parent

    def limited_request(self) -> Res:
        return r.limited(self.request, self.max)

    def masked_runtime(self) -> Res:
        return r.mask(self.runtime, self.max)


def quota_info(quota: ElasticQuota) -> QuotaInfo:
    return QuotaInfo(
        quota,
        r.of_quantities(quota.max),
        r.of_quantities(quota.min),
        r.of_quantities(quota.effective_shared_weight),
    )
