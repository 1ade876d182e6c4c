"""TaintToleration filter: every ``NoSchedule`` and ``NoExecute`` taint of a node must be tolerated by
the pod (Kubernetes' ``tainttoleration`` Filter; ``PreferNoSchedule`` taints are ignored here, their
scoring is not implemented). The first untolerated taint, in the node's order, names the rejection:
``node(s) had taint {<key>: <value>}, that the pod didn't tolerate`` (the Kubernetes 1.20 wording),
code UNSCHEDULABLE_AND_UNRESOLVABLE.

Toleration matching is ``Toleration.ToleratesTaint``: a toleration's non-empty effect must equal the
taint's, a non-empty key must equal the taint's; operator ``Exists`` then matches any value, ``Equal``
(or empty) needs equal values, other operators match nothing. So ``{operator: Exists}`` without key
tolerates every taint.

Vectorised: each row's list of NoSchedule/NoExecute taints is interned as a "signature" (rows share
signatures, and there are few distinct ones) in a snapshot view; a pod is checked once per distinct
signature and the verdicts are spread over the rows with one numpy gather. When every signature is
empty (no row has such a taint), every row passes without that work.
Imports: numpy, apis.jsonfields, scheduler.framework.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from apis.jsonfields import as_mapping
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterResult, Pod
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status

NAME: Final = "TaintToleration"
FILTERED_EFFECTS: Final = frozenset({"NoSchedule", "NoExecute"})

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


def node_filtered_taints(node: Mapping[str, Any]) -> Signature:
    """The node's NoSchedule/NoExecute taints, in ``spec.taints`` order."""
    taints = as_mapping(node.get("spec")).get("taints")
    if not isinstance(taints, list):
        return ()
    out: list[Taint] = []
    for t in taints:
        if isinstance(t, Mapping):
            effect = _str(t.get("effect"))
            if effect in FILTERED_EFFECTS:
                out.append((_str(t.get("key")), _str(t.get("value")), effect))
    return tuple(out)


def first_untolerated(taints: Sequence[Taint], tolerations: Sequence[Mapping[str, Any]]) -> Taint | None:
    """``FindMatchingUntoleratedTaint``: the first taint no toleration tolerates, or None."""
    for taint in taints:
        if not any(toleration_tolerates(t, taint) for t in tolerations):
            return taint
    return None


class Signatures:
    """Row-aligned signature ids (a snapshot view): ``ids[i]`` indexes ``sigs``, the interned taint lists."""

    reads_pods = False  # the Node object only

    def __init__(self) -> None:
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
            (self._intern(node_filtered_taints(info.node)) for info in snapshot.infos), np.int32, snapshot.n
        )

    def refresh(self, snapshot: Snapshot, rows: Sequence[int]) -> None:
        for i in rows:
            self.ids[i] = self._intern(node_filtered_taints(snapshot.infos[i].node))
        if len(self.sigs) > 64 + snapshot.n // 8:  # signatures no row uses any more piled up: drop them
            self.rebuild(snapshot)


class TaintToleration:
    """Filter plugin; see the module docstring."""

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
        return FilterResult(verdict[view.ids], tuple(statuses))
