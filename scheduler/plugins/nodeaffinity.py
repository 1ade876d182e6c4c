"""NodeAffinity (NodeSelector included), as kube-scheduler v1.20.2's plugin
(docs/rules/scheduler-affinity-taint.md#nodeaffinity).

Filter: a node passes when it matches the args' added required affinity (else
UNSCHEDULABLE_AND_UNRESOLVABLE, ``node(s) didn't match scheduler-enforced node affinity``), carries every
``spec.nodeSelector`` label (key present, value equal) and, if the pod has
``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution``, matches at least one of its
``nodeSelectorTerms`` (an invalid term matches nothing). Otherwise: UNSCHEDULABLE_AND_UNRESOLVABLE,
``node(s) didn't match Pod's node affinity`` (kube-scheduler 1.20's wording; 1.21+ added ``/selector``).

Score (docs/rules/scheduler-affinity-taint.md#nodeaffinity-score): the sum of the weights of the
preferred terms (the args' added ones, then the pod's) the node matches, then
``DefaultNormalizeScore(MaxNodeScore, false)``. A pod whose preferred terms do not parse fails the cycle
with an error at PreScore (kube 1.20.2 fails its Score).

Term parsing and matching, vectorised over the rows, are scheduler.plugins.nodeaffinity_terms'; the
args and preferred terms scheduler.plugins.nodeaffinity_args'.
Imports: numpy, apis.jsonfields, scheduler.framework, scheduler.plugins (nodeaffinity_terms,
nodeaffinity_args, normalizescore).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from apis.jsonfields import as_mapping
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterResult, IntArray, Pod, uniform_scores
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.nodeaffinity_args import (
    NodeAffinityArgs,
    Preferred,
    WeightedTerm,
    pod_preferred,
)
from scheduler.plugins.nodeaffinity_terms import (
    FIELD_NODE_NAME as FIELD_NODE_NAME,
)
from scheduler.plugins.nodeaffinity_terms import (
    IN,
    LabelColumn,
    LabelReq,
    Masks,
    Term,
    as_list,
    parse_term,
)
from scheduler.plugins.nodeaffinity_terms import (
    node_labels as node_labels,
)
from scheduler.plugins.nodeaffinity_terms import (
    parse_int64 as parse_int64,
)
from scheduler.plugins.normalizescore import default_normalize_score

__all__ = ["FIELD_NODE_NAME", "LabelColumn", "LabelReq", "NodeAffinity", "RequiredAffinity", "compile_pod"]

NAME: Final = "NodeAffinity"
ERR_REASON_POD: Final = "node(s) didn't match Pod's node affinity"
ERR_REASON_ENFORCED: Final = "node(s) didn't match scheduler-enforced node affinity"
STATE_KEY: Final = "PreFilter" + NAME
SCORE_STATE_KEY: Final = "PreScore" + NAME


@dataclass(frozen=True, slots=True)
class RequiredAffinity:
    """The pod's compiled constraints. ``terms`` is None without required node affinity; otherwise the
    terms that can match (an empty tuple rejects every node)."""

    selector: tuple[LabelReq, ...]
    terms: tuple[Term, ...] | None

    def is_empty(self) -> bool:
        return not self.selector and self.terms is None


_NO_CONSTRAINTS: Final = RequiredAffinity((), None)


def compile_pod(pod: Pod) -> RequiredAffinity:
    spec = as_mapping(pod.get("spec"))
    if not spec.get("nodeSelector") and not spec.get("affinity"):  # the common case: nothing to compile
        return _NO_CONSTRAINTS
    selector = tuple(
        LabelReq(str(k), IN, frozenset({v if isinstance(v, str) else ""}))
        for k, v in as_mapping(spec.get("nodeSelector")).items()
    )
    required = as_mapping(spec.get("affinity")).get("nodeAffinity")
    required = as_mapping(required).get("requiredDuringSchedulingIgnoredDuringExecution")
    terms: tuple[Term, ...] | None = None
    if isinstance(required, Mapping):
        compiled = (parse_term(as_mapping(t)) for t in as_list(required.get("nodeSelectorTerms")))
        terms = tuple(dict.fromkeys(t for t in compiled if isinstance(t, Term)))
    return RequiredAffinity(selector, terms)


def merge_weights(terms: tuple[WeightedTerm, ...]) -> dict[Term, int]:
    """Equal terms match the same rows: one mask each, their weights summed."""
    out: dict[Term, int] = {}
    for term, w in terms:
        out[term] = out.get(term, 0) + w
    return out


class NodeAffinity:
    """PreFilter + Filter, PreScore + Score + NormalizeScore; see the module docstring.
    ``NodeAffinity()`` has no added affinity (kube's default args)."""

    normalizes_by_range = True  # DefaultNormalizeScore (docs/architecture.md#uniform-scores)

    def __init__(self, args: NodeAffinityArgs | None = None) -> None:
        self.args = args or NodeAffinityArgs()
        self._status = Status.unresolvable(ERR_REASON_POD, plugin=NAME)
        self._enforced = Status.unresolvable(ERR_REASON_ENFORCED, plugin=NAME)

    @classmethod
    def from_args(cls, args: Mapping[str, Any] | None) -> NodeAffinity:
        """From a ``NodeAffinityArgs`` JSON mapping (v1beta1 or v1); ValueError names the bad field."""
        return cls(NodeAffinityArgs.from_args(args))

    @property
    def name(self) -> str:
        return NAME

    # --- filtering --------------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        state.write(STATE_KEY, compile_pod(pod))
        return Status.success()

    def _required(self, state: CycleState, pod: Pod) -> RequiredAffinity:
        req = state.get(STATE_KEY)
        if not isinstance(req, RequiredAffinity):
            req = compile_pod(pod)
            state.write(STATE_KEY, req)
        return req

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        req = self._required(state, pod)
        added = self.args.required
        n = snapshot.n
        if req.is_empty() and added is None:
            return FilterResult.all_pass(n)
        masks = Masks(snapshot, NAME)
        ok = np.ones(n, np.bool_)
        for r in req.selector:
            ok &= masks.label(r)
        if req.terms is not None:
            ok &= masks.any_term(req.terms)
        if added is None:
            return FilterResult.from_mask(~ok, self._status)
        enforced = masks.any_term(added)  # checked first: its reason wins
        if not np.count_nonzero(~ok | ~enforced):
            return FilterResult.all_pass(n)
        which = np.where(enforced, np.where(ok, -1, 1), 0).astype(np.int32)
        return FilterResult(which, (self._enforced, self._status))

    # --- scoring ----------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> Status:
        preferred = pod_preferred(pod)
        state.write(SCORE_STATE_KEY, preferred)
        if preferred.error is not None:
            return Status.error(preferred.error, plugin=NAME)
        return Status.success()

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        """Every row's sum of matched weights. Without PreScore, terms that do not parse count nothing
        (the framework has no error path out of Score)."""
        preferred = state.get(SCORE_STATE_KEY)
        if not isinstance(preferred, Preferred):
            preferred = pod_preferred(pod)
            state.write(SCORE_STATE_KEY, preferred)
        weighted = merge_weights(self.args.preferred + preferred.terms)
        if not weighted:
            return uniform_scores(snapshot.n, 0)
        scores = np.zeros(snapshot.n, np.int64)
        masks = Masks(snapshot, NAME)
        for term, w in weighted.items():
            if w:
                scores += masks.term(term) * np.int64(w)  # (a boolean-indexed += costs several times more)
        return scores

    def normalize_scores(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        default_normalize_score(scores, reverse=False)
        return Status.success()
