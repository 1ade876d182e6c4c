"""Oracles for NodeUnschedulable, TaintToleration, NodeAffinity and NodeResourcesFit: each rule of
docs/rules/scheduler.md node by node, in plain Python over the snapshot's NodeInfos (Node objects,
pods, allocatable and requested maps), with Go's int64 arithmetic spelled out where NodeResourcesFit's
Score could overflow. Each oracle is constructible from nothing; `oracle_for` maps a production plugin
to its oracle. Pod parsing that is not a per-node rule (the pod's effective requests, the compiled node
affinity) is the production code's: its own tests pin it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from apis.gonum import go_div, wrap_int64
from apis.pod import pod_requests
from apis.quantity import QuantityError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import IntArray, Plugin, Pod
from scheduler.framework.nonzero import with_default_requests
from scheduler.framework.snapshot import NodeInfo, Snapshot
from scheduler.framework.status import MAX_NODE_SCORE, Status
from scheduler.framework.units import to_values
from scheduler.plugins import nodeaffinity, noderesources, nodeunschedulable, tainttoleration
from scheduler.plugins.nodeaffinity import FIELD_NODE_NAME, LabelReq, RequiredAffinity, compile_pod
from scheduler.plugins.nodeaffinity_args import NodeAffinityArgs, Preferred, pod_preferred
from scheduler.plugins.noderesources import NodeResourcesFit
from scheduler.plugins.resourcemath import SCORE_WEIGHTS, is_checked_resource

Taint = tuple[str, str, str]  # key, value, effect


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# --- taints -----------------------------------------------------------------------------------------
def tolerates(toleration: Mapping[str, Any], taint: Taint) -> bool:
    """Kubernetes ``Toleration.ToleratesTaint``."""
    key, value, effect = taint
    if _str(toleration.get("effect")) not in ("", effect):
        return False
    if _str(toleration.get("key")) not in ("", key):
        return False
    operator = _str(toleration.get("operator"))
    if operator == "Exists":
        return True
    return operator in ("", "Equal") and _str(toleration.get("value")) == value


def tolerations_of(pod: Pod) -> list[Mapping[str, Any]]:
    return [t for t in _list(_map(pod.get("spec")).get("tolerations")) if isinstance(t, Mapping)]


def default_normalize(scores: IntArray, reverse: bool) -> None:
    """``helper.DefaultNormalizeScore(MaxNodeScore, reverse, scores)``, one score at a time."""
    max_count = 0
    for s in scores.tolist():
        max_count = max(max_count, s)
    for k, s in enumerate(scores.tolist()):
        if max_count == 0:
            scores[k] = MAX_NODE_SCORE if reverse else s
        else:
            s = go_div(MAX_NODE_SCORE * s, max_count)
            scores[k] = MAX_NODE_SCORE - s if reverse else s


class NodeUnschedulableOracle:
    """A cordoned node rejects a pod not tolerating ``node.kubernetes.io/unschedulable:NoSchedule``."""

    name = nodeunschedulable.NAME

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> Status:
        if _map(snapshot.infos[i].node.get("spec")).get("unschedulable") is not True:
            return Status.success()
        taint = ("node.kubernetes.io/unschedulable", "", "NoSchedule")
        if any(tolerates(t, taint) for t in tolerations_of(pod)):
            return Status.success()
        return Status.unresolvable("node(s) were unschedulable", plugin=self.name)


class TaintTolerationOracle:
    """The node's first NoSchedule/NoExecute taint (in its order) that no toleration tolerates rejects.
    Score: the node's PreferNoSchedule taints that none of the pod's tolerations with effect
    PreferNoSchedule or empty tolerates, counted; normalised reversed."""

    name = tainttoleration.NAME

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> tuple[int, Status]:
        tolerations = [t for t in tolerations_of(pod) if _str(t.get("effect")) in ("", "PreferNoSchedule")]
        count = 0
        for raw in _list(_map(snapshot.infos[i].node.get("spec")).get("taints")):
            if not isinstance(raw, Mapping) or _str(raw.get("effect")) != "PreferNoSchedule":
                continue
            taint = (_str(raw.get("key")), _str(raw.get("value")), "PreferNoSchedule")
            if not any(tolerates(t, taint) for t in tolerations):
                count += 1
        return count, Status.success()

    def normalize_scores(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        default_normalize(scores, reverse=True)
        return Status.success()

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> Status:
        tolerations = tolerations_of(pod)
        for raw in _list(_map(snapshot.infos[i].node.get("spec")).get("taints")):
            if not isinstance(raw, Mapping) or _str(raw.get("effect")) not in ("NoSchedule", "NoExecute"):
                continue
            taint = (_str(raw.get("key")), _str(raw.get("value")), _str(raw.get("effect")))
            if not any(tolerates(t, taint) for t in tolerations):
                text = f"node(s) had taint {{{taint[0]}: {taint[1]}}}, that the pod didn't tolerate"
                return Status.unresolvable(text, plugin=self.name)
        return Status.success()


# --- node affinity ------------------------------------------------------------------------------------
def label_holds(req: LabelReq, labels: Mapping[str, str]) -> bool:
    """``labels.Requirement.Matches`` for one node's labels."""
    present, value = req.key in labels, labels.get(req.key, "")
    if req.op == "In":
        return present and value in req.values
    if req.op == "NotIn":
        return not present or value not in req.values
    if req.op == "Exists":
        return present
    if req.op == "DoesNotExist":
        return not present
    number = nodeaffinity.parse_int64(value) if present else None  # Gt, Lt
    if number is None:
        return False
    return number > req.bound if req.op == "Gt" else number < req.bound


def node_matches(req: RequiredAffinity, labels: Mapping[str, str], name: str) -> bool:
    """Every nodeSelector label, and (with required affinity) one term whose requirements all hold."""
    if not all(label_holds(r, labels) for r in req.selector):
        return False
    if req.terms is None:
        return True
    fields = {FIELD_NODE_NAME: name}
    return any(
        all(label_holds(r, labels) for r in term.labels or ())
        and all((fields.get(f.key, "") == f.value) == f.equal for f in term.fields or ())
        for term in req.terms
    )


class NodeAffinityOracle:
    """Filter: the args' added required terms (their own reason, checked first), then the pod's
    constraints. Score: the weights of the added and the pod's preferred terms the node matches, summed;
    normalised by the highest; a pod whose preferred terms do not parse fails PreScore."""

    name = nodeaffinity.NAME
    key = "Oracle" + nodeaffinity.NAME

    def __init__(self, args: NodeAffinityArgs | None = None) -> None:
        self.args = args or NodeAffinityArgs()

    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> Status:
        preferred = pod_preferred(pod)
        if preferred.error is not None:
            return Status.error(preferred.error, plugin=self.name)
        return Status.success()

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> tuple[int, Status]:
        preferred = pod_preferred(pod)
        pod_terms = preferred.terms if isinstance(preferred, Preferred) and preferred.error is None else ()
        info = snapshot.infos[i]
        labels = nodeaffinity.node_labels(info.node)
        total = 0
        for term, weight in (*self.args.preferred, *pod_terms):
            if node_matches(RequiredAffinity((), (term,)), labels, info.name):
                total += weight
        return total, Status.success()

    def normalize_scores(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        default_normalize(scores, reverse=False)
        return Status.success()

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        state.write(self.key, compile_pod(pod))
        return Status.success()

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> Status:
        req = state.get(self.key)
        if not isinstance(req, RequiredAffinity):
            req = compile_pod(pod)
        info = snapshot.infos[i]
        labels = nodeaffinity.node_labels(info.node)
        added = self.args.required
        if added is not None and not node_matches(RequiredAffinity((), added), labels, info.name):
            return Status.unresolvable(nodeaffinity.ERR_REASON_ENFORCED, plugin=self.name)
        if node_matches(req, labels, info.name):
            return Status.success()
        return Status.unresolvable(nodeaffinity.ERR_REASON_POD, plugin=self.name)


# --- node resources -----------------------------------------------------------------------------------
i64 = wrap_int64  # Go's int64 arithmetic: the oracles' short name


def nonzero_requests(pod: Pod) -> tuple[int, int]:
    """``GetNonzeroRequests``: a container without a cpu (memory) request counts 100m (200Mi), then the
    pod's requests are aggregated as for the Filter."""
    spec = dict(_map(pod.get("spec")))
    for field in ("containers", "initContainers"):
        spec[field] = [with_default_requests(_map(c)) for c in _list(spec.get(field))]
    values = to_values(pod_requests({**pod, "spec": spec}))
    return values.get("cpu", 0), values.get("memory", 0)


def least_requested(requested: int, capacity: int) -> int:
    """Go's ``leastRequestedScore`` over int64."""
    if capacity == 0 or requested > capacity:
        return 0
    return go_div(i64((capacity - requested) * MAX_NODE_SCORE), capacity)


def fits_request_checks(pod: Pod) -> list[tuple[str, int]]:
    """What kube-scheduler 1.20's ``fitsRequest`` compares, in its order: nothing for a pod that requests
    nothing; else cpu, memory and ephemeral-storage (whatever the pod asks of each, zero included), then
    every scalar resource the pod names, by name."""
    requests = to_values(pod_requests(pod))
    base = ("cpu", "memory", "ephemeral-storage")
    scalars = sorted((r, v) for r, v in requests.items() if r not in base and is_checked_resource(r))
    if not scalars and not any(requests.get(r, 0) for r in base):
        return []
    return [*((r, requests.get(r, 0)) for r in base), *scalars]


class NodeResourcesFitOracle:
    name = noderesources.NAME
    key = "Oracle" + noderesources.NAME

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        try:
            checked = fits_request_checks(pod)
        except QuantityError as e:
            return Status.error(str(e), plugin=self.name)
        state.write(self.key, (checked, nonzero_requests(pod)))
        return Status.success()

    def _pod(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Any:
        found = state.get(self.key)
        if found is None:
            st = self.pre_filter(state, pod, snapshot)
            return st if not st.is_success() else state.get(self.key)
        return found

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> Status:
        """``Too many pods`` when one more pod exceeds allocatable pods, then ``Insufficient <r>`` for each
        resource fitsRequest checks where ``allocatable < request + requested`` (int64)."""
        found = self._pod(state, pod, snapshot)
        if isinstance(found, Status):
            return found
        info = snapshot.infos[i]
        reasons: list[str] = []
        if len(info.pods) + 1 > info.allocatable.get("pods", 0):
            reasons.append(noderesources.REASON_TOO_MANY_PODS)
        for r, request in found[0]:
            if info.allocatable.get(r, 0) < i64(request + info.requested.get(r, 0)):  # Go's fitsRequest
                reasons.append(f"Insufficient {r}")
        return Status.unschedulable(*reasons, plugin=self.name) if reasons else Status.success()

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> tuple[int, Status]:
        """LeastAllocated: the weighted mean of ``least_requested`` over cpu and memory, where requested
        is the node's pods' non-zero requests plus the pod's."""
        found = self._pod(state, pod, snapshot)
        if isinstance(found, Status):
            return 0, found
        info: NodeInfo = snapshot.infos[i]
        requested = list(found[1])
        for p in info.pods.values():
            cpu, memory = nonzero_requests(p.pod)
            requested = [requested[0] + cpu, requested[1] + memory]
        total = weights = 0
        for k, (r, w) in enumerate(SCORE_WEIGHTS):
            total = i64(total + least_requested(i64(requested[k]), info.allocatable.get(r, 0)) * w)
            weights += w
        return go_div(total, weights), Status.success()


_ORACLES: dict[type, Callable[[], Plugin]] = {
    nodeunschedulable.NodeUnschedulable: NodeUnschedulableOracle,
    tainttoleration.TaintToleration: TaintTolerationOracle,
    nodeaffinity.NodeAffinity: NodeAffinityOracle,
    NodeResourcesFit: NodeResourcesFitOracle,
}


def oracle_for(plugin: Plugin) -> Plugin | None:
    """The oracle of a production plugin, None for a plugin without one here."""
    if isinstance(plugin, nodeaffinity.NodeAffinity):  # its oracle follows the plugin's args
        return NodeAffinityOracle(plugin.args)
    make = _ORACLES.get(type(plugin))
    return None if make is None else make()
