"""The profile's Filter plugins on ONE node evaluated apart from the snapshot, and nominated pods.

kube-scheduler runs its filters on a NodeInfo that differs from the cluster's in two places: preemption
removes victims from a copy of a node (docs/rules/scheduler-preemption.md#filters-on-one-node), and
every Filter counts the pods nominated to a node with a priority at least the pod's
(docs/rules/scheduler-preemption.md#nominated-pods, kube's ``addNominatedPods`` and
``PodPassesFiltersOnNode``). koord's framework is columnar, so such a node is a one-row `Snapshot` of
a copied NodeInfo, with the cluster's resource columns (the PreFilter state of resource plugins stays
aligned), on which `Framework.filter_all` runs with the cycle state; PreFilter plugins whose state
depends on other pods adjust a cloned state through `PreFilterExtensions` (`add_pod`/`remove_pod`).

`NominatedPods` is kube's PodNominator: pending pods by the node they are nominated to.
Imports: standard library, numpy, apis (pod, qos), scheduler.framework.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from apis.pod import pod_key
from apis.qos import pod_priority
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import IntArray, Pod, PreFilterExtensions
from scheduler.framework.runtime import Framework, Rejections
from scheduler.framework.snapshot import NodeInfo, PodInfo, Snapshot
from scheduler.framework.status import Status


def priority(pod: Mapping[str, Any]) -> int:
    """``corev1helpers.PodPriority``: ``spec.priority``, 0 when unset."""
    return pod_priority(pod) or 0


def pod_uid(pod: Mapping[str, Any]) -> str:
    """The pod's UID, or its ``namespace/name`` when it has none (objects built by tests)."""
    meta = pod.get("metadata")
    uid = meta.get("uid") if isinstance(meta, Mapping) else None
    return uid if isinstance(uid, str) and uid else pod_key(pod)


def nominated_node_name(pod: Mapping[str, Any]) -> str:
    status = pod.get("status")
    value = status.get("nominatedNodeName") if isinstance(status, Mapping) else None
    return value if isinstance(value, str) else ""


class ExtensionError(Exception):
    """A PreFilterExtensions call failed: kube turns its status into an error."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


# A Framework's plugins are fixed at construction; Protocol isinstance checks cost tens of
# microseconds, and preemption calls this for every pod it moves.
_EXTENSIONS: weakref.WeakKeyDictionary[Framework, list[PreFilterExtensions]] = weakref.WeakKeyDictionary()


def _extensions(framework: Framework) -> list[PreFilterExtensions]:
    found = _EXTENSIONS.get(framework)
    if found is None:
        found = [p for p in framework.pre_filters if isinstance(p, PreFilterExtensions)]
        _EXTENSIONS[framework] = found
    return found


def add_pod(framework: Framework, state: CycleState, pod: Pod, added: PodInfo, info: NodeInfo) -> None:
    """Adds `added` to `info` and tells the PreFilter extensions (kube's RunPreFilterExtensionAddPod);
    raises ExtensionError."""
    info.add_pod(added, info.generation + 1)
    for p in _extensions(framework):
        st = p.add_pod(state, pod, added.pod, info)
        if not st.is_success():
            raise ExtensionError(st.with_plugin(p.name))


def remove_pod(framework: Framework, state: CycleState, pod: Pod, removed: PodInfo, info: NodeInfo) -> None:
    """Removes `removed` from `info` and tells the PreFilter extensions; raises ExtensionError."""
    info.remove_pod(removed.key, info.generation + 1)
    for p in _extensions(framework):
        st = p.remove_pod(state, pod, removed.pod, info)
        if not st.is_success():
            raise ExtensionError(st.with_plugin(p.name))


def pre_filter_state(framework: Framework, pod: Pod, snapshot: Snapshot, now: float) -> CycleState | Status:
    """A new cycle state holding only what the profile's PreFilter plugins write for `pod` (what kube's
    preemption gets). The cycle's own state may also hold what Filter plugins cached for the rows of
    `snapshot`, which a one-row snapshot must not read. A failing PreFilter's status is returned."""
    state = CycleState(now)
    for p in framework.pre_filters:
        st = p.pre_filter(state, pod, snapshot)
        if not st.is_success() and not st.is_skip():
            return st.with_plugin(p.name)
    return state


def filters_on_node(
    framework: Framework, state: CycleState, pod: Pod, info: NodeInfo, resources: Iterable[str]
) -> Status:
    """The status the profile's filters give `info` alone: success, or the first rejecting plugin's
    (an ERROR status included). `state` holds PreFilter's data (`pre_filter_state`); the filters run
    on a clone, so what they cache for this one row does not outlive the call. `resources`: the
    cluster snapshot's resource columns."""
    one = Snapshot([info], resources)
    feasible, rejections = framework.filter_all(state.clone(), pod, one)
    if len(feasible):
        return Status.success()
    return rejections.statuses[int(rejections.which[0])]


class NominatedPods:
    """Pods nominated to nodes (kube's PodNominator), by UID, in the order they were nominated.
    Not thread-safe: the scheduler calls it under its lock."""

    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, Pod]] = {}
        self._node_of: dict[str, str] = {}

    def add(self, pod: Pod, node: str = "") -> None:
        """Nominates `pod` to `node`, or to its ``status.nominatedNodeName`` when `node` is empty (not
        nominated when both are)."""
        self.delete(pod)
        node = node or nominated_node_name(pod)
        if not node:
            return
        uid = pod_uid(pod)
        self._node_of[uid] = node
        self._by_node.setdefault(node, {})[uid] = pod

    def update(self, old: Pod, new: Pod) -> None:
        """A pod update: keeps a nomination made by `add(pod, node)` while neither object carries one
        (the API has not caught up yet), as kube's UpdateNominatedPod does."""
        node = ""
        if not nominated_node_name(old) and not nominated_node_name(new):
            node = self._node_of.get(pod_uid(old), "")
        self.delete(old)
        self.add(new, node)

    def delete(self, pod: Pod) -> None:
        uid = pod_uid(pod)
        node = self._node_of.pop(uid, None)
        if node is not None:
            pods = self._by_node[node]
            del pods[uid]
            if not pods:
                del self._by_node[node]

    def for_node(self, node: str) -> list[Pod]:
        return list(self._by_node.get(node, {}).values())

    def nodes(self) -> list[str]:
        return list(self._by_node)

    def __len__(self) -> int:
        return len(self._node_of)


def _relevant(pod: Pod, nominated: Sequence[Pod]) -> list[Pod]:
    """Nominated pods a Filter counts: priority ≥ the pod's, the pod itself excluded."""
    prio, uid = priority(pod), pod_uid(pod)
    return [p for p in nominated if priority(p) >= prio and pod_uid(p) != uid]


def with_nominated(
    framework: Framework, state: CycleState, pod: Pod, info: NodeInfo, nominated: Sequence[Pod]
) -> tuple[CycleState, NodeInfo] | None:
    """kube's ``addNominatedPods``: a cloned state and copied node with the relevant nominated pods
    added, or None when none is relevant. Raises ExtensionError."""
    pods = _relevant(pod, nominated)
    if not pods:
        return None
    state_out, info_out = state.clone(), info.copy()
    for p in pods:
        add_pod(framework, state_out, pod, PodInfo.of(p), info_out)
    return state_out, info_out


def pod_passes_filters_on_node(
    framework: Framework,
    state: CycleState,
    pod: Pod,
    info: NodeInfo,
    nominated: Sequence[Pod],
    resources: Iterable[str],
) -> Status:
    """kube's ``PodPassesFiltersOnNode``: the filters run with the relevant nominated pods added, and,
    when that passes, once more without them (a nominated pod may help, e.g. by affinity). Success,
    a rejection, or an ERROR status."""
    resources = tuple(resources)
    try:
        added = with_nominated(framework, state, pod, info, nominated)
    except ExtensionError as e:
        return Status.error(e.status.message(), plugin=e.status.plugin)
    if added is not None:
        st = filters_on_node(framework, added[0], pod, added[1], resources)
        if not st.is_success():
            return st
    return filters_on_node(framework, state, pod, info, resources)


class NominatedRows:
    """The rows of `snapshot` holding a nominated pod relevant to `pod`, and each one's check with
    them added (kube's first pass of ``PodPassesFiltersOnNode``). PreFilter runs once more, on a new
    state (`pre_filter_state`), at the first check; when it fails (only an unstable plugin can, the
    cycle's PreFilter passed) every row passes. Satisfies scheduler.framework.sampling's
    NominatedCheck."""

    def __init__(
        self, framework: Framework, state: CycleState, pod: Pod, snapshot: Snapshot, nominated: NominatedPods
    ) -> None:
        self.framework, self.pod, self.snapshot, self.now = framework, pod, snapshot, state.now
        self.pods: dict[int, list[Pod]] = {}
        for node in nominated.nodes():
            i = snapshot.index.get(node)
            if i is None:
                continue
            pods = nominated.for_node(node)
            if _relevant(pod, pods):
                self.pods[i] = pods
        self._base: CycleState | Status | None = None

    @property
    def rows(self) -> dict[int, list[Pod]]:
        return self.pods

    def check(self, i: int) -> Status | None:
        """Row i's status with its relevant nominated pods added; None when that passes."""
        if self._base is None:
            self._base = pre_filter_state(self.framework, self.pod, self.snapshot, self.now)
        if isinstance(self._base, Status):
            return None
        snapshot = self.snapshot
        try:
            added = with_nominated(self.framework, self._base, self.pod, snapshot.infos[i], self.pods[i])
        except ExtensionError as e:
            return Status.error(e.status.message(), plugin=e.status.plugin)
        if added is None:
            return None
        st = filters_on_node(self.framework, added[0], self.pod, added[1], snapshot.resources)
        return None if st.is_success() else st


def filter_with_nominated(
    framework: Framework,
    state: CycleState,
    pod: Pod,
    snapshot: Snapshot,
    feasible: IntArray,
    rejections: Rejections,
    nominated: NominatedPods,
) -> tuple[IntArray, Rejections]:
    """`Framework.filter_all`'s result corrected for nominated pods. `feasible` and `rejections` are the
    filters' result on the snapshot (kube's second pass, without nominated pods); each node with a
    relevant nominated pod is evaluated once more with them added (the first pass, `NominatedRows`),
    and when that fails its status is the first pass's. `state` is the cycle's: it gives the clock.
    Cost: one one-row evaluation per node with a relevant nominated pod."""
    check = NominatedRows(framework, state, pod, snapshot, nominated)
    rows: list[tuple[int, Status]] = []
    for i in check.rows:
        st = check.check(i)
        if st is not None:
            rows.append((i, st))
    if not rows:
        return feasible, rejections
    which = rejections.which.copy()
    statuses = list(rejections.statuses)
    for i, st in rows:
        which[i] = len(statuses)
        statuses.append(st)
    out = Rejections(which, tuple(statuses), rejections.names)
    return np.flatnonzero(which < 0), out
