"""TaintToleration, as kube-scheduler v1.20.2's plugin
(docs/rules/scheduler-affinity-taint.md#tainttoleration).

Filter: every ``NoSchedule`` and ``NoExecute`` taint of a node must be tolerated by the pod. The first
untolerated taint, in the node's order, names the rejection: ``node(s) had taint {<key>: <value>}, that
the pod didn't tolerate`` (the Kubernetes 1.20 wording), code UNSCHEDULABLE_AND_UNRESOLVABLE.

Score (docs/rules/scheduler-affinity-taint.md#tainttoleration-score): the number of the node's
``PreferNoSchedule`` taints that none of the pod's tolerations with effect ``PreferNoSchedule`` or empty
tolerates (PreScore picks those tolerations), then ``DefaultNormalizeScore(MaxNodeScore, true)``: the
nodes with the most such taints score 0, a node without any 100.

Toleration matching is ``Toleration.ToleratesTaint``: a toleration's non-empty effect must equal the
taint's, a non-empty key must equal the taint's; operator ``Exists`` then matches any value, ``Equal``
(or empty) needs equal values, other operators match nothing. So ``{operator: Exists}`` without key
tolerates every taint.

Vectorised: each row's list of NoSchedule/NoExecute taints (and, in a second view, of PreferNoSchedule
taints) is interned as a "signature" (rows share signatures, and there are few distinct ones) in a
snapshot view; a pod is checked once per distinct signature and the verdicts (counts) are spread over
the rows with one numpy gather. When every signature is empty, nothing is checked.
Imports: numpy, apis.jsonfields, scheduler.framework, scheduler.plugins.normalizescore.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from apis.jsonfields import as_mapping
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterResult, IntArray, Pod, uniform_scores
from scheduler.framework.snapshot import RowChange, Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.normalizescore import default_normalize_score

NAME: Final = "TaintToleration"
PRE_SCORE_STATE_KEY: Final = "PreScore" + NAME
PREFER_NO_SCHEDULE: Final = "PreferNoSchedule"
FILTERED_EFFECTS: Final = frozenset({"NoSchedule", "NoExecute"})
SCORED_EFFECTS: Final = frozenset({PREFER_NO_SCHEDULE})

Taint = tuple[str, str, str]  # key, value, effect
Signature = tuple[Taint, ...]


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def reason(taint: Taint) -> str:
    return f"node(s) had taint {{{taint[0]}: {taint[1]}}}, that the pod didn't tolerate"


def toleration_tolerates(tol: Mapping[str, Any], taint: Taint) -> bool:
    """Kubernetes ``Toleration.ToleratesTaint`` (see the module docstring)."""
    key, value, effect = taint
    t_effect, t_key = _str(tol.get("effect")), _str(tol.get("key"))
    if t_effect and t_effect != effect:
        return False
    if t_key and t_key != key:
        return False
    op = _str(tol.get("operator"))
    if op in ("", "Equal"):
        return _str(tol.get("value")) == value
    return op == "Exists"


def pod_tolerations(pod: Pod) -> list[Mapping[str, Any]]:
    tols = as_mapping(pod.get("spec")).get("tolerations")
    return [t for t in tols if isinstance(t, Mapping)] if isinstance(tols, list) else []


def node_filtered_taints(node: Mapping[str, Any], effects: frozenset[str] = FILTERED_EFFECTS) -> Signature:
    """The node's taints with one of ``effects`` (by default NoSchedule/NoExecute), in ``spec.taints``
    order."""
    taints = as_mapping(node.get("spec")).get("taints")
    if not isinstance(taints, list):
        return ()
    out: list[Taint] = []
    for t in taints:
        if isinstance(t, Mapping):
            effect = _str(t.get("effect"))
            if effect in effects:
                out.append((_str(t.get("key")), _str(t.get("value")), effect))
    return tuple(out)


def first_untolerated(taints: Sequence[Taint], tolerations: Sequence[Mapping[str, Any]]) -> Taint | None:
    """``FindMatchingUntoleratedTaint``: the first taint no toleration tolerates, or None."""
    for taint in taints:
        if not any(toleration_tolerates(t, taint) for t in tolerations):
            return taint
    return None


def prefer_no_schedule_tolerations(tolerations: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``getAllTolerationPreferNoSchedule``: the tolerations with effect PreferNoSchedule or empty."""
    return [t for t in tolerations if _str(t.get("effect")) in ("", PREFER_NO_SCHEDULE)]


def count_intolerable(taints: Sequence[Taint], tolerations: Sequence[Mapping[str, Any]]) -> int:
    """``countIntolerableTaintsPreferNoSchedule``: the PreferNoSchedule taints no toleration tolerates."""
    return sum(
        1
        for taint in taints
        if taint[2] == PREFER_NO_SCHEDULE and not any(toleration_tolerates(t, taint) for t in tolerations)
    )


class Signatures:
    """Row-aligned signature ids (a snapshot view): ``ids[i]`` indexes ``sigs``, the interned lists of
    each row's taints with one of ``effects``."""

    reads_pods = False  # the Node object only

    def __init__(self, effects: frozenset[str] = FILTERED_EFFECTS) -> None:
        self.effects = effects
        self.ids: npt.NDArray[np.int32] = np.zeros(0, np.int32)
        self.sigs: list[Signature] = []
        self.index: dict[Signature, int] = {}

    def _intern(self, sig: Signature) -> int:
        s = self.index.get(sig)
        if s is None:
            s = self.index[sig] = len(self.sigs)
            self.sigs.append(sig)
        return s

    def rebuild(self, snapshot: Snapshot) -> None:
        self.sigs, self.index = [], {}
        self.ids = np.fromiter(
            (self._intern(node_filtered_taints(info.node, self.effects)) for info in snapshot.infos),
            np.int32,
            snapshot.n,
        )

    def refresh(self, snapshot: Snapshot, rows: Sequence[int]) -> None:
        for i in rows:
            self.ids[i] = self._intern(node_filtered_taints(snapshot.infos[i].node, self.effects))
        if len(self.sigs) > 64 + snapshot.n // 8:  # signatures no row uses any more piled up: drop them
            self.rebuild(snapshot)

    def resize(self, snapshot: Snapshot, change: RowChange) -> None:
        """Nodes joined or left (docs/scheduler-scale.md#node-list): the ids follow their rows; new rows
        are refreshed next."""
        self.ids = change.array(self.ids)


class TaintToleration:
    """Filter, PreScore + Score + NormalizeScore; see the module docstring."""

    normalizes_by_range = True  # DefaultNormalizeScore (docs/architecture.md#uniform-scores)

    @property
    def name(self) -> str:
        return NAME

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        view = snapshot.view((NAME, "signatures"), Signatures)
        if not any(view.sigs):  # no row has a NoSchedule/NoExecute taint
            return FilterResult.all_pass(snapshot.n)
        tolerations = pod_tolerations(pod)
        statuses: list[Status] = []
        status_of_taint: dict[Taint, int] = {}
        verdict = np.full(len(view.sigs), -1, np.int32)  # per signature: status index or -1
        for s, sig in enumerate(view.sigs):
            taint = first_untolerated(sig, tolerations)
            if taint is not None:
                k = status_of_taint.get(taint)
                if k is None:
                    k = status_of_taint[taint] = len(statuses)
                    statuses.append(Status.unresolvable(reason(taint), plugin=NAME))
                verdict[s] = k
        if not statuses:
            return FilterResult.all_pass(snapshot.n)
        return FilterResult(verdict.take(view.ids), tuple(statuses))

    # --- scoring ----------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> Status:
        state.write(PRE_SCORE_STATE_KEY, prefer_no_schedule_tolerations(pod_tolerations(pod)))
        return Status.success()

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        """Every row's count of intolerable PreferNoSchedule taints."""
        view = snapshot.view((NAME, "preferNoSchedule"), lambda: Signatures(SCORED_EFFECTS))
        if not any(view.sigs):  # no row has a PreferNoSchedule taint
            return uniform_scores(snapshot.n, 0)
        tolerations = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(tolerations, list):
            tolerations = prefer_no_schedule_tolerations(pod_tolerations(pod))
            state.write(PRE_SCORE_STATE_KEY, tolerations)
        counts = np.fromiter(
            (count_intolerable(sig, tolerations) for sig in view.sigs), np.int64, len(view.sigs)
        )
        return counts.take(view.ids)  # (take: several times faster than fancy indexing)

    def normalize_scores(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        default_normalize_score(scores, reverse=True)
        return Status.success()
