"""The ``Reservation`` scheduler plugin (docs/rules/scheduler-reservation.md#the-plugin) over a
``ReservationCache``: PreFilter works out each reservation node's state for the pod (only the nodes that
hold reservations: per-node Python there, nothing elsewhere), Filter applies the pure rules of
``filtering``, PreScore/Score nominate a reservation per node and prefer the smallest order, Reserve
assumes the pod as an owner of the nominated reservation and Unreserve forgets it. Wired
(docs/rules/scheduler-reservation.md#wiring): the node transformer takes the matched reservations'
reserve pods off the NodeInfos the other plugins see, PostFilter stops preemption for reserve pods,
PreBind writes the owner's ``reservation-allocated`` annotation and Bind hands a reserve pod to the
status writer (Available on the node).
Imports: the standard library, numpy, apis (pod, reservation, reservation_pod), scheduler.framework,
this package.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from apis.kubeobjects import Pod
from apis.pod import pod_annotations, pod_key, pod_requests
from apis.reservation import (
    ANNOTATION_RESERVATION_ALLOCATED,
    ANNOTATION_RESERVATION_NAME,
    ANNOTATION_RESERVATION_NODE,
)
from apis.reservation import Reservation as ReservationObject
from apis.reservation_pod import (
    exact_match_names,
    is_reservation_ignored,
    is_reserve_pod,
    new_reserve_pod,
    parse_affinity,
)
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterResult, IntArray
from scheduler.framework.snapshot import NodeInfo, Snapshot
from scheduler.framework.status import Status
from scheduler.framework.units import to_values
from scheduler.plugins.nodeaffinity_terms import node_labels
from scheduler.plugins.normalizescore import default_normalize_score
from scheduler.plugins.reservation.cache import ReservationCache
from scheduler.plugins.reservation.filtering import (
    ERR_AFFINITY,
    NO_IGNORED,
    Ignored,
    NodeFacts,
    PodFacts,
    filter_normal_pod,
    filter_reserve_pod,
)
from scheduler.plugins.reservation.info import ReservationInfo
from scheduler.plugins.reservation.scoring import (
    MOST_PREFERRED_SCORE,
    nominate,
    preferred_node,
    score_reservation,
)
from scheduler.plugins.reservation.transformer import NodeState, PodMatchFacts, node_state

NAME: Final = "Reservation"
STATE_KEY: Final = "Reservation/state"


@dataclass
class _State:
    """One cycle's state: the pod's facts, each reservation node's state by row, nominations by node."""

    reserve_pod: bool
    pod: PodFacts
    rows: dict[int, NodeState] = field(default_factory=dict)
    pinned: str = ""
    policy: str = ""
    preferred: str | None = None
    nominated: dict[str, ReservationInfo] = field(default_factory=dict)
    facts: dict[str, tuple[NodeState, NodeFacts]] = field(default_factory=dict)  # by node, from Filter
    status: Status | None = None  # PreFilter's answer, when the node transformer worked it out
    pod_counts: dict[int, int] = field(default_factory=dict)  # rows' pods before the transformer
    chosen: ReservationInfo | None = None  # what Reserve assumed, for PreBind


# Binding a reserve pod: the reservation made Available on the node (the wiring patches its status).
StatusWriter = Callable[[ReservationObject, str], Status]


class Reservation:
    """Koordinator's Reservation plugin; the cache is shared with the informers that feed it."""

    bind_annotations: tuple[str, ...] = (ANNOTATION_RESERVATION_ALLOCATED,)  # PreBind's, for the binder

    def __init__(self, cache: ReservationCache | None = None, ignored: Ignored = NO_IGNORED) -> None:
        self.cache = cache if cache is not None else ReservationCache()
        self.ignored = ignored
        self.assumed: dict[str, str] = {}  # pod key -> reservation uid Reserve assumed
        self.status_writer: StatusWriter | None = None  # set by the wiring (Bind of reserve pods)

    @property
    def name(self) -> str:
        return NAME

    # --- events -----------------------------------------------------------------------------------
    def on_reservation_add(self, obj: Mapping[str, Any]) -> None:
        self.cache.on_reservation_add(obj)

    def on_reservation_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        self.cache.on_reservation_update(old, new)

    def on_reservation_delete(self, obj: Mapping[str, Any]) -> None:
        self.cache.on_reservation_delete(obj)

    def on_pod_add(self, pod: Pod) -> None:
        if pod_key(pod) not in self.assumed:
            self.cache.on_pod_add(pod)

    def on_pod_update(self, old: Pod, new: Pod) -> None:
        self.assumed.pop(pod_key(new), None)
        self.cache.on_pod_update(old, new)

    def on_pod_delete(self, pod: Pod) -> None:
        self.assumed.pop(pod_key(pod), None)
        self.cache.on_pod_delete(pod)

    # --- PreFilter / Filter -----------------------------------------------------------------------
    def _node_requested(self, snapshot: Snapshot, row: int, infos: list[ReservationInfo]) -> dict[str, int]:
        """The row's requested resources with the reserve pods the cache does not hold yet added."""
        info = snapshot.infos[row]
        requested = dict(info.requested)
        for r in infos:
            reserve = new_reserve_pod(r.reservation)
            if pod_key(reserve) not in info.pods:
                for n, v in to_values(pod_requests(reserve)).items():
                    requested[n] = requested.get(n, 0) + v
        return requested

    def transform_node_infos(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> list[NodeInfo]:
        """Restoration (docs/rules/scheduler-reservation.md#restoration): PreFilter's work, done here so
        the matched reservations' reserve pods can be taken off the NodeInfos of this cycle."""
        st = self._prepare(state, pod, snapshot)
        changed: list[NodeInfo] = []
        for row, ns in st.rows.items():
            info = snapshot.infos[row]
            keys = [k for r in ns.matched if (k := _reserve_pod_key(r)) in info.pods]
            if not keys:
                continue
            st.pod_counts[row] = len(info.pods)
            copy = info.copy()
            for key in keys:
                copy.remove_pod(key, info.generation)
            changed.append(copy)
        return changed

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        st = state.get(STATE_KEY)
        if isinstance(st, _State) and st.status is not None:
            return st.status
        return self._prepare(state, pod, snapshot).status or Status.success()

    def _prepare(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> _State:
        st = self._compute(state, pod, snapshot)
        state.write(STATE_KEY, st)
        return st

    def _compute(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> _State:
        requests = pod_requests(pod)
        if is_reserve_pod(pod):
            annotations = pod_annotations(pod)
            r = self.cache.get_by_name(str(annotations.get(ANNOTATION_RESERVATION_NAME, "")))
            st = _State(
                True, PodFacts(requests), pinned=str(annotations.get(ANNOTATION_RESERVATION_NODE, ""))
            )
            if r is None:
                st.status = Status.error("reservation not found", plugin=NAME)
                return st
            st.policy = r.policy
            st.status = Status.success()
            return st
        try:
            affinity = parse_affinity(pod)
            exact = exact_match_names(pod)
        except ValueError as e:
            st = _State(False, PodFacts(requests))
            st.status = Status.error(str(e), plugin=NAME)
            return st
        ignored = is_reservation_ignored(pod)
        facts = PodMatchFacts(pod, affinity, exact, requests, ignored)
        st = _State(False, PodFacts(requests, affinity.present, affinity.name, ignored))
        for name in self.cache.nodes():
            row = snapshot.index.get(name)
            infos = self.cache.matchable_on_node(name)
            if row is None or not infos:
                continue
            node = snapshot.infos[row].node
            ns = node_state(facts, infos, name, node_labels(node), self._node_requested(snapshot, row, infos))
            if ns is not None:
                st.rows[row] = ns
        if affinity.present and not st.rows:
            st.status = Status.unresolvable(ERR_AFFINITY, plugin=NAME)
        else:
            st.status = Status.success()
        return st

    def _state(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> _State:
        st = state.get(STATE_KEY)
        if not isinstance(st, _State):
            self.pre_filter(state, pod, snapshot)
            st = state.get(STATE_KEY)
        assert isinstance(st, _State)
        return st

    def _node_facts(self, st: _State, snapshot: Snapshot, row: int, ns: NodeState | None) -> NodeFacts:
        info = snapshot.infos[row]
        pods = st.pod_counts.get(row, len(info.pods))  # the pods before the transformer took any off
        if ns is None:  # quirk: no state, no requested (docs/rules/scheduler-reservation.md#filter)
            return NodeFacts(info.allocatable, pods)
        return NodeFacts(info.allocatable, pods, ns.requested, ns.reserved_allocated)

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        st = self._state(state, pod, snapshot)
        n = snapshot.n
        which = np.full(n, -1, np.int32)
        statuses: list[Status] = []

        def reject(row: int, status: Status) -> None:
            which[row] = len(statuses)
            statuses.append(status.with_plugin(NAME))

        if st.reserve_pod:
            for name in self.cache.nodes():
                row = snapshot.index.get(name)
                if row is not None:
                    policies = [r.policy for r in self.cache.matchable_on_node(name)]
                    status = filter_reserve_pod(name, st.pinned, st.policy, policies)
                    if not status.is_success():
                        reject(row, status)
            if st.pinned:
                pinned_status = Status.unresolvable(*filter_reserve_pod("", st.pinned, "", ()).reasons)
                which[[i for i, name in enumerate(snapshot.names) if name != st.pinned]] = len(statuses)
                statuses.append(pinned_status.with_plugin(NAME))
            return FilterResult(which, tuple(statuses)) if statuses else FilterResult.all_pass(n)
        if st.pod.has_affinity:
            rows = np.ones(n, np.bool_)
            rows[list(st.rows)] = False
            which[rows] = 0
            statuses.append(Status.unresolvable(ERR_AFFINITY, plugin=NAME))
        for row, ns in st.rows.items():
            facts = self._node_facts(st, snapshot, row, ns)
            st.facts[snapshot.names[row]] = (ns, facts)
            status = filter_normal_pod(st.pod, facts, ns.matched, self.ignored)
            if not status.is_success():
                reject(row, status)
        return FilterResult(which, tuple(statuses)) if statuses else FilterResult.all_pass(n)

    # --- PreScore / Score -------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> Status:
        st = self._state(state, pod, snapshot)
        if st.reserve_pod or st.pod.ignored or not st.rows:
            return Status.skip()
        order = [int(i) for i in feasible if int(i) in st.rows]
        names = [snapshot.names[i] for i in order]
        st.preferred = preferred_node(names, {snapshot.names[i]: st.rows[i].matched for i in order})
        for i in order:
            ns = st.rows[i]
            chosen = nominate(st.pod, self._node_facts(st, snapshot, i, ns), ns.matched, self.ignored)
            if chosen is not None:
                st.nominated[snapshot.names[i]] = chosen
        return Status.success()

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        st = self._state(state, pod, snapshot)
        scores = np.zeros(len(feasible), np.int64)
        if st.reserve_pod:
            return scores
        for k, row in enumerate(feasible):
            name = snapshot.names[int(row)]
            if name == st.preferred:
                scores[k] = MOST_PREFERRED_SCORE
            elif name in st.nominated:
                scores[k] = score_reservation(st.pod.requests, st.nominated[name])
        return scores

    def normalize_scores(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        st = state.get(STATE_KEY)
        if isinstance(st, _State) and st.reserve_pod:
            return Status.success()
        default_normalize_score(scores, reverse=False)  # kube's DefaultNormalizeScore
        return Status.success()

    # --- Reserve / Unreserve ----------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        st = state.get(STATE_KEY)
        if not isinstance(st, _State) or st.reserve_pod or st.pod.ignored:
            return Status.success()
        chosen = st.nominated.get(node_name)
        if chosen is None and node_name in st.facts:  # PreScore did not run (one feasible node)
            ns, facts = st.facts[node_name]
            chosen = nominate(st.pod, facts, ns.matched, self.ignored)
        if chosen is None:
            return Status.success()
        st.chosen = chosen
        self.assumed[pod_key(pod)] = chosen.uid
        self.cache.assign(pod, chosen.uid)
        return Status.success()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        if self.assumed.pop(pod_key(pod), None) is not None:
            self.cache.unassign(pod)

    def nominated_reservation(self, state: CycleState, node_name: str) -> ReservationInfo | None:
        """The reservation PreScore nominated for the pod on ``node_name`` (Reserve assumes it; PreBind
        writes it as the pod's ``reservation-allocated`` annotation)."""
        st = state.get(STATE_KEY)
        return st.nominated.get(node_name) if isinstance(st, _State) else None

    # --- PostFilter / PreBind / Bind (docs/rules/scheduler-reservation.md#wiring) -------------------
    def post_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, statuses: dict[str, Status]
    ) -> Status:
        """A reserve pod never preempts (an error ends PostFilter, as upstream's); others pass on."""
        if is_reserve_pod(pod):
            return Status.error("reserve pods do not preempt", plugin=NAME)
        return Status.unschedulable(plugin=NAME)

    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """The owner's ``reservation-allocated`` annotation (``{"name", "uid"}``), written on the pod
        object the binder patches onto the API before the Binding."""
        st = state.get(STATE_KEY)
        if not isinstance(st, _State) or st.chosen is None or pod_key(pod) not in self.assumed:
            return Status.success()
        meta = pod["metadata"]
        value = json.dumps({"name": st.chosen.name, "uid": st.chosen.uid}, separators=(",", ":"))
        # a new dict: the queue's copy of the pod shares the old one
        meta["annotations"] = {**(meta.get("annotations") or {}), ANNOTATION_RESERVATION_ALLOCATED: value}
        return Status.success()

    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """A reserve pod's bind makes its reservation Available on the node; other pods: Skip."""
        if not is_reserve_pod(pod):
            return Status.skip()
        name = str(pod_annotations(pod).get(ANNOTATION_RESERVATION_NAME, ""))
        r = self.cache.get_by_name(name)
        if r is None:
            return Status.error(f"reservation {name} not found", plugin=NAME)
        if self.status_writer is None:
            return Status.error("no reservation status writer", plugin=NAME)
        return self.status_writer(r.reservation, node_name)


def _reserve_pod_key(r: ReservationInfo) -> str:
    """The key of the reservation's reserve pod (docs/rules/scheduler-reservation.md#reserve-pod)."""
    meta = (r.reservation.template or {}).get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    return f"{namespace or 'default'}/{r.uid}"
