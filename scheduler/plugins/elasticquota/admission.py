"""PreFilter's admission of a pod by its quota (docs/rules/scheduler-elasticquota.md#prefilter-admission):
the runtime (or max) limit, the non-preemptible min, the ancestors' limits with enableCheckParentQuota, with
upstream's exact reason strings; and the state PostFilter's preemption reads afterwards
(docs/rules/scheduler-elasticquota.md#preemption).
Imports: the standard library, apis (elasticquota, quantity), scheduler.framework (status) and this package.
Pure: the manager is read, not changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from apis.elasticquota import ROOT_QUOTA, is_pod_non_preemptible
from apis.pod import pod_requests
from apis.quantity import Quantity
from scheduler.framework.status import Status
from scheduler.plugins.elasticquota import resources as r
from scheduler.plugins.elasticquota.manager import GroupQuotaManager
from scheduler.plugins.elasticquota.quotainfo import QuotaInfo, pod_charge, pod_request_quantities
from scheduler.plugins.elasticquota.resources import Res


@dataclass(slots=True)
class PostFilterState:
    """What PreFilter saw of the pod's quota: its used (adjusted by the AddPod/RemovePod extensions while
    preemption tries victims), its non-preemptible used, the limit and the names of the pods in its cache."""

    quota: str
    used: Res
    non_preemptible_used: Res
    used_limit: Res
    # the quota's pod keys as a live view, not a copy (O(pods of the quota) per pod, tens of thousands in
    # the default quota): the state lives within one scheduling cycle, under the scheduler's lock, while no
    # pod event runs (docs/rules/scheduler-elasticquota.md#performance)
    pod_cache: AbstractSet[str] = frozenset()
    max_names: frozenset[str] | None = None  # None: charges are not masked
    skip: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def clone(self) -> PostFilterState:
        return PostFilterState(
            self.quota,
            dict(self.used),
            dict(self.non_preemptible_used),
            dict(self.used_limit),
            self.pod_cache,
            self.max_names,
            self.skip,
            dict(self.extra),
        )

    def adjust(self, pod_key: str, pod: Mapping[str, Any], sign: int) -> None:
        """AddPod (+1) / RemovePod (-1): the pod's charge moves ``used`` when the pod is in the cache."""
        if pod_key not in self.pod_cache:
            return
        names = dict.fromkeys(pod_requests(pod) if self.max_names is None else self.max_names)
        charge = pod_charge(pod, names)
        self.used = r.clamp_non_negative(r.add(self.used, {n: sign * v for n, v in charge.items()}))


def used_limit(info: QuotaInfo, runtime_quota: bool) -> Res:
    """The limit PreFilter checks against: the runtime field with enableRuntimeQuota, else the max."""
    return dict(info.runtime) if runtime_quota else dict(info.max)


def _limit_text(info: QuotaInfo, runtime_quota: bool) -> Mapping[str, int | Quantity]:
    return dict(info.runtime) if runtime_quota else dict(info.quota.max)


def admit(
    mgr: GroupQuotaManager,
    quota: str,
    pod: Mapping[str, Any],
    runtime_quota: bool,
    check_parent: bool,
) -> tuple[Status, PostFilterState | None]:
    """The PreFilter verdict for ``pod`` in ``quota`` (already resolved) and the state PostFilter reads.
    The manager's runtime is expected refreshed (and overridden where a scenario says so)."""
    info = mgr.info(quota)
    if info is None:
        return Status.error("Could not find the specified ElasticQuota"), None
    limit = used_limit(info, runtime_quota)
    state = PostFilterState(
        quota, dict(info.used), dict(info.np_used), limit, info.pods.keys(), frozenset(info.max)
    )
    req = pod_charge(pod, info.max)
    req_text = pod_request_quantities(pod, info.max)
    ok, exceeded = r.less_than_or_equal(r.add(req, state.used), limit)
    if not ok:
        return Status.unschedulable(
            f"Insufficient quotas, quotaName: {quota}, "
            f"runtime: {r.print_resource_list(_limit_text(info, runtime_quota))}, "
            f"used: {r.print_resource_list(state.used)}, pod's request: {r.print_resource_list(req_text)}, "
            f"exceedDimensions: {r.go_list(exceeded)}"
        ), state
    if is_pod_non_preemptible(pod):
        ok, exceeded = r.less_than_or_equal(r.add(req, state.non_preemptible_used), info.min)
        if not ok:
            return Status.unschedulable(
                f"Insufficient non-preemptible quotas, quotaName: {quota}, "
                f"min: {r.print_resource_list(info.quota.min)}, "
                f"nonPreemptibleUsed: {r.print_resource_list(state.non_preemptible_used)}, "
                f"pod's request: {r.print_resource_list(req_text)}, exceedDimensions: {r.go_list(exceeded)}"
            ), state
    if check_parent:
        return check_ancestors(mgr, info, req, req_text, runtime_quota), state
    return Status.success(), state


def check_ancestors(
    mgr: GroupQuotaManager, info: QuotaInfo, req: Res, req_text: Mapping[str, Quantity], runtime_quota: bool
) -> Status:
    """enableCheckParentQuota: every ancestor below the root must hold the pod's request on top of its
    used (docs/rules/scheduler-elasticquota.md#prefilter-admission)."""
    topo = [info.parent, info.name]
    name = info.parent
    while name not in ("", ROOT_QUOTA) and len(topo) <= len(mgr.quotas) + 1:  # a parent cycle ends
        ancestor = mgr.info(name)
        if ancestor is None:
            return Status.error(f"Could not find the elasticQuota {name}, quotaNameTopo: {r.go_list(topo)}")
        limit = used_limit(ancestor, runtime_quota)
        new_used = r.mask(r.add(req, ancestor.used), req)
        ok, exceeded = r.less_than_or_equal(new_used, limit)
        if not ok:
            return Status.unschedulable(
                f"Insufficient quotas, quotaNameTopo: {r.go_list(topo)}, "
                f"runtime: {r.print_resource_list(_limit_text(ancestor, runtime_quota))}, "
                f"used: {r.print_resource_list(ancestor.used)}, "
                f"pod's request: {r.print_resource_list(req_text)}, "
                f"exceedDimensions: {r.go_list(exceeded)}"
            )
        name = ancestor.parent
        topo.insert(0, name)
    return Status.success()
