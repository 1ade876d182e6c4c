"""ElasticQuota's PostFilter (docs/rules/scheduler-elasticquota.md#preemption): kube's preemption evaluator
with the quota's overrides, on koord's framework. Eligibility is the quota's (a terminating pod of the
same quota on the nominated node); every node of the snapshot is a candidate (no sampling); on each, only
the pods ``can_preempt`` allows are removed, and a reprieved pod is a victim again when the filters fail
or when the quota's used (PreFilter's state, kept in step by the PreFilter extensions) plus the preemptor's
request exceeds the quota's limit. The choice among candidates is DefaultPreemption's, and so is the
result written to the cycle state (`PreemptionResult`), so the gateway carries it out unchanged.
Imports: the standard library, apis (pod), scheduler.framework, scheduler.plugins.defaultpreemption and
this package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from apis.pod import metadata, pod_requests
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Pod
from scheduler.framework.nominated import (
    ExtensionError,
    NominatedPods,
    add_pod,
    nominated_node_name,
    pod_passes_filters_on_node,
    priority,
    remove_pod,
)
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import NodeInfo, PodInfo, Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.defaultpreemption.candidates import dry_run, pick_one, potential_array
from scheduler.plugins.defaultpreemption.pdb import PDB, filter_pods_with_pdb_violation
from scheduler.plugins.defaultpreemption.plugin import RESULT_KEY, PreemptionResult
from scheduler.plugins.defaultpreemption.victims import Victims, importance_order
from scheduler.plugins.elasticquota import resources as r
from scheduler.plugins.elasticquota.admission import PostFilterState
from scheduler.plugins.elasticquota.quotainfo import pod_charge

PREFIX = "preemption: "


def post_filter(
    fw: Framework,
    state_key: str,
    can_preempt: Callable[[Pod, Pod], bool],
    eligible: Callable[[Pod, Any, Mapping[str, Sequence[Pod]]], tuple[bool, str]],
    nominated: NominatedPods,
    pdbs: Sequence[PDB],
    state: CycleState,
    pod: Pod,
    snapshot: Snapshot,
    statuses: Mapping[str, Status],
    plugin: str,
) -> Status:
    node = nominated_node_name(pod)
    node_pods: dict[str, list[Pod]] = {}
    i = snapshot.index.get(node) if node else None
    if i is not None:
        node_pods[node] = [pi.pod for pi in snapshot.infos[i].pods.values()]
    st = statuses.get(node) if node else None
    ok, message = eligible(pod, None if st is None else st.code, node_pods)
    if not ok:
        return Status.unschedulable(PREFIX + message, plugin=plugin)
    if snapshot.n == 0:
        return Status.error(PREFIX + "no nodes available to schedule pods", plugin=plugin)
    base = _pre_filter_state(fw, pod, snapshot, state.now, plugin)
    if isinstance(base, Status):
        return Status.error(f"{PREFIX}running PreFilter again: {base.message()}", plugin=plugin)
    rows = potential_array(snapshot, statuses)
    if not len(rows):
        state.write(RESULT_KEY, PreemptionResult(None, clear_preemptor=True))
        return Status.unschedulable(plugin=plugin)

    def victims_of(row: int) -> Victims | None:
        info = snapshot.infos[row]
        return _victims_on_node(
            fw, base, state_key, can_preempt, pod, info, pdbs, nominated.for_node(info.name), snapshot
        )

    candidates = dry_run(rows.tolist(), 0, len(rows), victims_of, snapshot.names)
    best = pick_one(candidates, state.now)
    if best is None:
        return Status.unschedulable(plugin=plugin)
    prio = priority(pod)
    lower = tuple(p for p in nominated.for_node(best.name) if priority(p) < prio)
    state.write(RESULT_KEY, PreemptionResult(best.name, best.victims.pods, lower, candidate=best))
    return Status(reasons=(best.name,), plugin=plugin)


def _pre_filter_state(
    fw: Framework, pod: Pod, snapshot: Snapshot, now: float, own: str
) -> CycleState | Status:
    """What the profile's PreFilter plugins write for `pod`. This plugin's own rejection (the quota is
    full: what preemption within the quota is for) still leaves its state; another's is returned."""
    state = CycleState(now)
    for p in fw.pre_filters:
        st = p.pre_filter(state, pod, snapshot)
        if not st.is_success() and not st.is_skip() and p.name != own:
            return st.with_plugin(p.name)
    return state


def _victims_on_node(
    fw: Framework,
    base: CycleState,
    state_key: str,
    can_preempt: Callable[[Pod, Pod], bool],
    pod: Pod,
    info: NodeInfo,
    pdbs: Sequence[PDB],
    nominated: Sequence[Pod],
    snapshot: Snapshot,
) -> Victims | None:
    """``SelectVictimsOnNode`` with the quota's rules on a copy of the node and a clone of the state;
    None when the node is no candidate (no victim, no fit without them, an extension failed)."""
    info, state = info.copy(), base.clone()
    potential = [pi for pi in info.pods.values() if can_preempt(pod, pi.pod)]
    if not potential:
        return None
    resources = snapshot.resources
    req = pod_charge(pod, pod_requests(pod))
    try:
        for pi in potential:
            remove_pod(fw, state, pod, pi, info)
        if not pod_passes_filters_on_node(fw, state, pod, info, nominated, resources).is_success():
            return None
        by_pod = {id(pi.pod): pi for pi in potential}
        ordered = importance_order((pi.pod for pi in potential), state.now)
        violating, non_violating = filter_pods_with_pdb_violation(ordered, pdbs)
        victims: list[Pod] = []
        violations = 0

        def over_quota() -> bool:
            post = state.get(state_key)
            if not isinstance(post, PostFilterState):
                return False
            return not r.less_than_or_equal(r.mask(r.add(post.used, req), req), post.used_limit)[0]

        def reprieve(pi: PodInfo) -> bool:
            add_pod(fw, state, pod, pi, info)
            fits = pod_passes_filters_on_node(fw, state, pod, info, nominated, resources).is_success()
            if not fits:
                remove_pod(fw, state, pod, pi, info)
                victims.append(pi.pod)
            if over_quota():
                if fits:  # still on the node
                    remove_pod(fw, state, pod, pi, info)
                victims.append(pi.pod)
            return fits

        for p in violating:
            if not reprieve(by_pod[id(p)]):
                violations += 1
        for p in non_violating:
            reprieve(by_pod[id(p)])
    except ExtensionError:
        return None
    return Victims(tuple(_unique(victims)), violations)


def _unique(pods: list[Pod]) -> list[Pod]:
    """A pod listed twice (failing both checks) is deleted once: the gateway deletes each victim."""
    seen: set[str] = set()
    out = []
    for p in pods:
        key = f"{metadata(p).get('namespace')}/{metadata(p).get('name')}"
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out
