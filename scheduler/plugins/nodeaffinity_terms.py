"""Node selector terms as Kubernetes' ``component-helpers`` node affinity parses and matches them
(docs/rules/scheduler-affinity-taint.md#node-selector-terms), shared by NodeAffinity's Filter, Score and
args: parsing with kube's error per invalid requirement, a label column view per key, and one boolean
row mask per term.

Terms are ORed; inside a term ``matchExpressions`` (labels) and ``matchFields`` are ANDed; a term with
neither is empty (it matches nothing). Label operators In, NotIn, Exists, DoesNotExist, Gt, Lt
(``labels.Requirement``: NotIn and DoesNotExist hold on a node without the key; Gt/Lt need the label to
parse as a base-10 int64). A requirement that ``labels.NewRequirement`` rejects (unknown operator, key
not a qualified name, a value not a label value, In/NotIn without values, Exists/DoesNotExist with
values, Gt/Lt without exactly one integer) is a parse error of its whole term. ``matchFields`` support
In/NotIn with exactly one value over the node's fields, which are only ``metadata.name`` (any other field
reads as "").

Vectorised: per label key a snapshot view of value codes aligned to the rows (made on first use, kept
up to date by the snapshot); each distinct requirement becomes a lookup table over the key's distinct
values, gathered over all rows.
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
from scheduler.framework.interfaces import BoolArray
from scheduler.framework.snapshot import NodeInfo, RowChange, Snapshot

FIELD_NODE_NAME: Final = "metadata.name"
IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT = "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"
LABEL_OPS: Final = frozenset({IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT})

_INT_RE: Final = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def parse_int64(s: str) -> int | None:
    """Go ``strconv.ParseInt(s, 10, 64)``: optional sign, decimal digits, int64 range; else None."""
    if not _INT_RE.fullmatch(s):
        return None
    v = int(s)
    return v if _INT64_MIN <= v <= _INT64_MAX else None


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


def label_req(expr: Mapping[str, Any]) -> LabelReq | str:
    """The requirement, or kube's reason it does not parse (``labels.NewRequirement``'s order: operator,
    key, value count, integers, then each value's syntax)."""
    key, op = expr.get("key"), expr.get("operator")
    raw = as_list(expr.get("values"))
    values = [v if v is not None else "" for v in raw]
    if not isinstance(op, str) or op not in LABEL_OPS:
        return f"{op!r} is not a valid node selector operator"
    if not isinstance(key, str) or not is_qualified_name(key):
        return f"key: Invalid value: {key!r}: not a qualified name"
    if not all(isinstance(v, str) for v in values):
        return f"values: Invalid value: {raw!r}: not strings"
    if op in (IN, NOT_IN) and not values:
        return "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty"
    if op in (EXISTS, DOES_NOT_EXIST) and values:
        return f"values: Invalid value: {values!r}: values set must be empty for exists and does not exist"
    bound = 0
    if op in (GT, LT):
        if len(values) != 1:
            return (
                f"values: Invalid value: {values!r}: for 'Gt', 'Lt' operators, exactly one value is required"
            )
        parsed = parse_int64(values[0])
        if parsed is None:
            why = "for 'Gt', 'Lt' operators, the value must be an integer"
            return f"values[0]: Invalid value: {values[0]!r}: {why}"
        bound = parsed
    for k, v in enumerate(values):
        if not is_label_value(v):
            return f"values[{k}]: Invalid value: {v!r}: not a valid label value"
    return LabelReq(key, op, frozenset(values), bound)


def field_req(expr: Mapping[str, Any]) -> FieldReq | str:
    """The field requirement, or kube's reason it does not parse."""
    key, op, values = expr.get("key"), expr.get("operator"), as_list(expr.get("values"))
    if op not in (IN, NOT_IN):
        return f"{op!r} is not a valid node field selector operator"
    if len(values) != 1 or not isinstance(values[0], str):
        return f"unexpected number of value ({len(values)}) for node field selector operator {op!r}"
    return FieldReq(key if isinstance(key, str) else "", op == IN, values[0])


def parse_term(raw: Mapping[str, Any]) -> Term | str | None:
    """A node selector term: the compiled Term, None when it is empty (neither part), or the reason it
    does not parse (the first invalid requirement, labels before fields), prefixed by its path."""
    exprs = [as_mapping(e) for e in as_list(raw.get("matchExpressions"))]
    fields = [as_mapping(e) for e in as_list(raw.get("matchFields"))]
    if not exprs and not fields:
        return None
    labels: list[LabelReq] = []
    for k, e in enumerate(exprs):
        r = label_req(e)
        if isinstance(r, str):
            return f"matchExpressions[{k}]: {r}"
        labels.append(r)
    freqs: list[FieldReq] = []
    for k, e in enumerate(fields):
        f = field_req(e)
        if isinstance(f, str):
            return f"matchFields[{k}]: {f}"
        freqs.append(f)
    return Term(tuple(labels) if exprs else None, tuple(freqs) if fields else None)


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

    def resize(self, snapshot: Snapshot, change: RowChange) -> None:
        """Nodes joined or left (docs/scheduler-scale.md#node-list): the codes follow their rows; new
        rows are refreshed next."""
        self.codes = change.array(self.codes, -1)

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
            hit = table.take(self.codes)  # (take: several times faster than fancy indexing; -1 is the last)
            return hit if req.op == IN else ~hit
        for c, v in enumerate(self.values):  # Gt/Lt: the label must parse as an int64; absent fails
            x = parse_int64(v)
            table[c] = x is not None and (x > req.bound if req.op == GT else x < req.bound)
        return table.take(self.codes)


class Masks:
    """Row masks of requirements and terms over one snapshot, each requirement's computed once (one
    per scheduling cycle: a view refresh would outdate them). ``view_owner`` names the plugin whose
    label column views are used."""

    def __init__(self, snapshot: Snapshot, view_owner: str) -> None:
        self.snapshot = snapshot
        self.owner = view_owner
        self._labels: dict[LabelReq, BoolArray] = {}

    def label(self, r: LabelReq) -> BoolArray:
        m = self._labels.get(r)
        if m is None:
            column = self.snapshot.view((self.owner, "label", r.key), lambda: LabelColumn(r.key))
            m = self._labels[r] = column.mask(r)
        return m

    def field(self, f: FieldReq) -> BoolArray:
        n = self.snapshot.n
        if f.key == FIELD_NODE_NAME:
            eq = np.zeros(n, np.bool_)
            i = self.snapshot.index.get(f.value)
            if i is not None:
                eq[i] = True
        else:  # no such field on a node: it reads as ""
            eq = np.full(n, f.value == "", np.bool_)
        return eq if f.equal else ~eq

    def term(self, term: Term) -> BoolArray:
        m = np.ones(self.snapshot.n, np.bool_)
        for r in term.labels or ():
            m &= self.label(r)
        for f in term.fields or ():
            m &= self.field(f)
        return m

    def any_term(self, terms: Sequence[Term]) -> BoolArray:
        """The rows matching at least one of ``terms`` (none for no terms)."""
        ok = np.zeros(self.snapshot.n, np.bool_)
        for t in terms:
            ok |= self.term(t)
        return ok
