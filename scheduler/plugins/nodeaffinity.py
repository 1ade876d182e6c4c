"""NodeAffinity filter (NodeSelector included): a node passes when it carries every
``spec.nodeSelector`` label (key present, value equal) and, if the pod has
``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution``, matches at least one of its
``nodeSelectorTerms``. Otherwise: UNSCHEDULABLE_AND_UNRESOLVABLE,
``node(s) didn't match Pod's node affinity/selector``. Preferred affinity (scoring) is not implemented.

Term semantics follow Kubernetes' ``component-helpers`` node selector: terms are ORed; inside a term
``matchExpressions`` (labels) and ``matchFields`` are ANDed; a term with neither matches nothing, so
does an empty term list. Label operators In, NotIn, Exists, DoesNotExist, Gt, Lt (``labels.Requirement``:
NotIn and DoesNotExist hold on a node without the key; Gt/Lt need the label to parse as a base-10
int64). A requirement that ``labels.NewRequirement`` rejects (unknown operator, key not a qualified name,
a value not a label value, In/NotIn without values, Exists/DoesNotExist with values, Gt/Lt without
exactly one integer) makes its whole term match nothing. ``matchFields`` support In/NotIn with exactly
one value over the node's fields, which are only ``metadata.name`` (any other field reads as "").

Vectorised: per label key a snapshot view of value codes aligned to the rows (made on first use,
kept up to date by the snapshot); each distinct requirement becomes a lookup table over the key's
distinct values, gathered over all rows.
Imports: numpy, apis (jsonfields, labelselector), scheduler.framework.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from apis.jsonfields import as_mapping
from apis.labelselector import is_label_value, is_qualified_name
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import BoolArray, FilterResult, Pod
from scheduler.framework.snapshot import NodeInfo, Snapshot
from scheduler.framework.status import Status

NAME: Final = "NodeAffinity"
ERR_REASON_POD: Final = "node(s) didn't match Pod's node affinity/selector"
STATE_KEY: Final = "PreFilter" + NAME
FIELD_NODE_NAME: Final = "metadata.name"

IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT = "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"

_INT_RE: Final = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def parse_int64(s: str) -> int | None:
    """Go ``strconv.ParseInt(s, 10, 64)``: optional sign, decimal digits, int64 range; else None."""
    if not _INT_RE.fullmatch(s):
        return None
    v = int(s)
    return v if _INT64_MIN <= v <= _INT64_MAX else None


valid_label_key = is_qualified_name
valid_label_value = is_label_value


def node_labels(node: Mapping[str, Any]) -> dict[str, str]:
    """``metadata.labels`` (a JSON null value reads as "", as Go decodes it)."""
    raw = as_mapping(as_mapping(node.get("metadata")).get("labels"))
    return {str(k): v if isinstance(v, str) else "" for k, v in raw.items()}


@dataclass(frozen=True, slots=True)
class LabelReq:
    """A valid label requirement; ``bound`` is the integer of Gt/Lt."""

    key: str
    op: str
    values: frozenset[str] = frozenset()
    bound: int = 0


@dataclass(frozen=True, slots=True)
class FieldReq:
    """A valid field requirement: field ``key`` equal (In) or not equal (NotIn) to ``value``."""

    key: str
    equal: bool
    value: str


@dataclass(frozen=True, slots=True)
class Term:
    """A term that can match: None means the part is absent (not checked)."""

    labels: tuple[LabelReq, ...] | None
    fields: tuple[FieldReq, ...] | None


@dataclass(frozen=True, slots=True)
class RequiredAffinity:
    """The pod's compiled constraints. ``terms`` is None without required node affinity; otherwise the
    terms that can match (an empty tuple rejects every node)."""

    selector: tuple[LabelReq, ...]
    terms: tuple[Term, ...] | None

    def is_empty(self) -> bool:
        return not self.selector and self.terms is None


def _label_req(expr: Mapping[str, Any]) -> LabelReq | None:
    key, op = expr.get("key"), expr.get("operator")
    values = [v if v is not None else "" for v in _list(expr.get("values"))]
    if not isinstance(key, str) or not valid_label_key(key) or not all(isinstance(v, str) for v in values):
        return None
    if not all(valid_label_value(v) for v in values):
        return None
    if op in (IN, NOT_IN):
        return LabelReq(key, op, frozenset(values)) if values else None
    if op in (EXISTS, DOES_NOT_EXIST):
        return None if values else LabelReq(key, op)
    if op in (GT, LT) and len(values) == 1:
        bound = parse_int64(values[0])
        return None if bound is None else LabelReq(key, op, bound=bound)
    return None


def _field_req(expr: Mapping[str, Any]) -> FieldReq | None:
    key, op, values = expr.get("key"), expr.get("operator"), _list(expr.get("values"))
    if op not in (IN, NOT_IN) or len(values) != 1 or not isinstance(values[0], str):
        return None
    return FieldReq(key if isinstance(key, str) else "", op == IN, values[0])


def _term(raw: Mapping[str, Any]) -> Term | None:
    """A compiled term, or None when it can match nothing (empty or invalid)."""
    exprs = [as_mapping(e) for e in _list(raw.get("matchExpressions"))]
    fields = [as_mapping(e) for e in _list(raw.get("matchFields"))]
    if not exprs and not fields:
        return None
    labels = [_label_req(e) for e in exprs]
    freqs = [_field_req(e) for e in fields]
    if any(r is None for r in labels) or any(r is None for r in freqs):
        return None
    return Term(
        tuple(r for r in labels if r is not None) if exprs else None,
        tuple(r for r in freqs if r is not None) if fields else None,
    )


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
        compiled = (_term(as_mapping(t)) for t in _list(required.get("nodeSelectorTerms")))
        terms = tuple(dict.fromkeys(t for t in compiled if t is not None))
    return RequiredAffinity(selector, terms)


class LabelColumn:
    """Label ``key`` over all rows (a snapshot view): ``codes[i]`` indexes ``values`` (-1: row i lacks
    the key). Values no row carries any more stay until a rebuild (they only widen the tables)."""

    reads_pods = False  # the Node object only

    def __init__(self, key: str) -> None:
        self.key = key
        self.codes: npt.NDArray[np.int32] = np.zeros(0, np.int32)
        self.values: list[str] = []
        self.index: dict[str, int] = {}

    def _code(self, info: NodeInfo) -> int:
        labels = node_labels(info.node)
        if self.key not in labels:
            return -1
        value = labels[self.key]
        c = self.index.get(value)
        if c is None:
            c = self.index[value] = len(self.values)
            self.values.append(value)
        return c

    def rebuild(self, snapshot: Snapshot) -> None:
        self.values, self.index = [], {}
        self.codes = np.fromiter((self._code(info) for info in snapshot.infos), np.int32, snapshot.n)

    def refresh(self, snapshot: Snapshot, rows: Sequence[int]) -> None:
        for i in rows:
            self.codes[i] = self._code(snapshot.infos[i])
        if len(self.values) > 2 * snapshot.n + 64:  # values no row carries any more piled up: drop them
            self.rebuild(snapshot)

    def mask(self, req: LabelReq) -> BoolArray:
        """The rows whose label satisfies ``req``."""
        if req.op == EXISTS:
            return self.codes >= 0
        if req.op == DOES_NOT_EXIST:
            return self.codes < 0
        # A table over the distinct values plus one final slot for "absent", which code -1 reaches.
        table = np.zeros(len(self.values) + 1, np.bool_)
        if req.op in (IN, NOT_IN):
            for v in req.values:
                c = self.index.get(v)
                if c is not None:
                    table[c] = True
            return table[self.codes] if req.op == IN else ~table[self.codes]
        for c, v in enumerate(self.values):  # Gt/Lt: the label must parse as an int64; absent fails
            x = parse_int64(v)
            table[c] = x is not None and (x > req.bound if req.op == GT else x < req.bound)
        return table[self.codes]


class NodeAffinity:
    """PreFilter + Filter plugin; see the module docstring."""

    def __init__(self) -> None:
        self._status = Status.unresolvable(ERR_REASON_POD, plugin=NAME)

    @property
    def name(self) -> str:
        return NAME

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
        n = snapshot.n
        if req.is_empty():
            return FilterResult.all_pass(n)
        masks: dict[LabelReq, BoolArray] = {}

        def label_mask(r: LabelReq) -> BoolArray:
            m = masks.get(r)
            if m is None:
                column = snapshot.view((NAME, "label", r.key), lambda: LabelColumn(r.key))
                m = masks[r] = column.mask(r)
            return m

        ok = np.ones(n, np.bool_)
        for r in req.selector:
            ok &= label_mask(r)
        if req.terms is not None:
            any_term = np.zeros(n, np.bool_)
            for term in req.terms:
                m = np.ones(n, np.bool_)
                for r in term.labels or ():
                    m &= label_mask(r)
                for f in term.fields or ():
                    m &= self._field_mask(f, snapshot)
                any_term |= m
            ok &= any_term
        return FilterResult.from_mask(~ok, self._status)

    @staticmethod
    def _field_mask(f: FieldReq, snapshot: Snapshot) -> BoolArray:
        if f.key == FIELD_NODE_NAME:
            eq = np.zeros(snapshot.n, np.bool_)
            i = snapshot.index.get(f.value)
            if i is not None:
                eq[i] = True
        else:  # no such field on a node: it reads as ""
            eq = np.full(snapshot.n, f.value == "", np.bool_)
        return eq if f.equal else ~eq
