"""Quota-aware preemption (docs/rules/scheduler-elasticquota.md#preemption): which pods a preemptor may evict
(``can_preempt``), whether it may preempt at all (``eligible_to_preempt``) and the victims on one node
(``select_victims_on_node``: the node filters are a callback, the quota limit is PreFilter's saved state).
Imports: the standard library, apis (elasticquota, pod, qos), scheduler.framework (status) and this package.
Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from apis.elasticquota import DEFAULT_QUOTA, is_pod_non_preemptible
from apis.pod import metadata, parse_time, pod_key, pod_requests, spec, status
from apis.qos import pod_priority
from scheduler.framework.status import Code, Status
from scheduler.plugins.elasticquota import resources as r
from scheduler.plugins.elasticquota.admission import PostFilterState
from scheduler.plugins.elasticquota.quotainfo import pod_charge

Pod = Mapping[str, Any]
NEVER: Final = "Never"


def priority(pod: Pod) -> int:
    value = pod_priority(pod)
    return 0 if value is None else value


def start_time(pod: Pod) -> float:
    """``status.startTime`` in epoch seconds; a pod without one counts as starting last (now)."""
    t = parse_time(status(pod).get("startTime"))
    return float("inf") if t is None else t.timestamp()


def importance_order(pods: Sequence[Pod]) -> list[Pod]:
    """Most important first: higher priority, then earlier start (a stable sort)."""
    return sorted(pods, key=lambda p: (-priority(p), start_time(p)))


def can_preempt(
    preemptor: Pod, victim: Pod, resolve: Callable[[Pod], str], disable_default_quota_preemption: bool
) -> bool:
    """The victim is preemptible, not in the default quota when that is protected, of lower priority,
    and in the preemptor's quota (docs/rules/scheduler-elasticquota.md#preemption)."""
    if is_pod_non_preemptible(victim):
        return False
    victim_quota = resolve(victim)
    if disable_default_quota_preemption and victim_quota == DEFAULT_QUOTA:
        return False
    if priority(preemptor) <= priority(victim):
        return False
    return resolve(preemptor) == victim_quota


def eligible_to_preempt(
    pod: Pod,
    nominated_node_status: Code | None,
    node_pods: Mapping[str, Sequence[Pod]],
    resolve: Callable[[Pod], str],
) -> tuple[bool, str]:
    """``PodEligibleToPreemptOthers``: ``node_pods`` maps every node of the snapshot to its pods."""
    if spec(pod).get("preemptionPolicy") == NEVER:
        return False, "not eligible due to preemptionPolicy=Never."
    nominated = status(pod).get("nominatedNodeName")
    if not isinstance(nominated, str) or not nominated:
        return True, ""
    if nominated_node_status == Code.UNSCHEDULABLE_AND_UNRESOLVABLE or nominated not in node_pods:
        return True, ""
    quota, prio = resolve(pod), priority(pod)
    for p in node_pods[nominated]:
        if metadata(p).get("deletionTimestamp") and resolve(p) == quota and priority(p) < prio:
            return False, "not eligible due to a terminating pod on the nominated node."
    return True, ""


def select_victims_on_node(
    preemptor: Pod,
    node: str,
    node_pods: Sequence[Pod],
    state: PostFilterState,
    may_preempt: Callable[[Pod], bool],
    filters_pass: Callable[[Sequence[Pod]], Status],
    violates_budget: Callable[[Pod], bool] = lambda _: False,
    key: Callable[[Pod], str] = pod_key,
) -> tuple[list[Pod], int, Status]:
    """``SelectVictimsOnNode`` with the quota's limit. ``filters_pass(pods)`` runs the node's filters with
    ``pods`` (those of ``node_pods`` still there) on the node; ``state`` is a copy the caller gives away;
    ``key`` names a pod in the quota's pod cache."""
    potential = [p for p in node_pods if may_preempt(p)]
    if not potential:
        name = metadata(preemptor).get("name") or ""
        return [], 0, Status.unresolvable(f"No victims found on node {node} for preemptor pod {name}")
    present = {key(p): p for p in node_pods}
    for p in potential:
        present.pop(key(p), None)
        state.adjust(key(p), p, -1)
    st = filters_pass(list(present.values()))
    if not st.is_success():
        return [], 0, st
    ordered = importance_order(potential)
    violating = [p for p in ordered if violates_budget(p)]
    non_violating = [p for p in ordered if not violates_budget(p)]
    preemptor_req = pod_charge(preemptor, pod_requests(preemptor))
    victims: list[Pod] = []
    num_violating = 0
    for group, is_violating in ((violating, True), (non_violating, False)):
        for p in group:
            k = key(p)
            present[k] = p
            state.adjust(k, p, 1)
            if not filters_pass(list(present.values())).is_success():
                present.pop(k, None)
                state.adjust(k, p, -1)
                victims.append(p)
                num_violating += is_violating
            new_used = r.mask(r.add(state.used, preemptor_req), preemptor_req)
            if not r.less_than_or_equal(new_used, state.used_limit)[0]:
                present.pop(k, None)
                state.adjust(k, p, -1)  # a pod failing both checks is removed and listed twice
                victims.append(p)
    return victims, num_violating, Status.success()
