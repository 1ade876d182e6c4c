"""PV matching as kube-scheduler v1.20.2's volume binder does it
(docs/rules/scheduler-volumes.md#pv-matching): a PV's required node affinity against a node's labels,
a StorageClass' allowedTopologies, and FindMatchingVolume (the smallest available PV of the claim's
class that fits the claim and the node).

Node selector terms are parsed here (self-contained: only labels and the name "" are matched, as
CheckNodeAffinity builds a node of labels only).
Imports: apis (jsonfields, labelselector, quantity), scheduler.framework.volumes,
scheduler.plugins.volume.common.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

from apis.jsonfields import as_mapping
from apis.labelselector import LabelSelector, is_label_value, is_qualified_name
from apis.quantity import Quantity, QuantityError
from scheduler.framework.volumes import pv_class, pvc_class
from scheduler.plugins.volume.common import as_list, labels_of

Obj = Mapping[str, Any]
FILESYSTEM: Final = "Filesystem"
AVAILABLE: Final = "Available"
_ZERO: Final = Quantity.from_int(0)


IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT = "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"
FIELD_NODE_NAME: Final = "metadata.name"
_INT_RE: Final = re.compile(r"[+-]?[0-9]+")


def parse_int64(s: str) -> int | None:
    """Go ``strconv.ParseInt(s, 10, 64)``."""
    if not _INT_RE.fullmatch(s):
        return None
    v = int(s)
    return v if -(2**63) <= v < 2**63 else None


@dataclass(frozen=True, slots=True)
class Req:
    """A valid requirement: a label (In/NotIn/Exists/DoesNotExist/Gt/Lt) or, with `field`, a node field
    (In/NotIn one value)."""

    key: str
    op: str
    values: frozenset[str] = frozenset()
    bound: int = 0
    field: bool = False


def _label_req(e: Obj) -> Req | None:
    key, op = e.get("key"), e.get("operator")
    values = [v if v is not None else "" for v in as_list(e.get("values"))]
    if not isinstance(key, str) or not is_qualified_name(key):
        return None
    if not all(isinstance(v, str) and is_label_value(v) for v in values):
        return None
    if op in (IN, NOT_IN):
        return Req(key, op, frozenset(values)) if values else None
    if op in (EXISTS, DOES_NOT_EXIST):
        return None if values else Req(key, op)
    if op in (GT, LT) and len(values) == 1:
        bound = parse_int64(values[0])
        return None if bound is None else Req(key, op, bound=bound)
    return None


def _field_req(e: Obj) -> Req | None:
    key, op, values = e.get("key"), e.get("operator"), as_list(e.get("values"))
    if op not in (IN, NOT_IN) or len(values) != 1 or not isinstance(values[0], str):
        return None
    return Req(key if isinstance(key, str) else "", str(op), frozenset(values), field=True)


def _req_matches(r: Req, labels: Mapping[str, str], name: str) -> bool:
    if r.field:
        return ((name if r.key == FIELD_NODE_NAME else "") in r.values) == (r.op == IN)
    value = labels.get(r.key)
    if r.op == IN:
        return value is not None and value in r.values
    if r.op == NOT_IN:
        return value is None or value not in r.values
    if r.op == EXISTS:
        return value is not None
    if r.op == DOES_NOT_EXIST:
        return value is None
    x = parse_int64(value) if value is not None else None
    return x is not None and (x > r.bound if r.op == GT else x < r.bound)


Term = tuple[Req, ...]


def compile_node_selector(required: Obj) -> tuple[Term, ...]:
    """A NodeSelector's terms that can match: an empty term, or one with a requirement that does not
    parse, matches nothing and is dropped."""
    terms: list[Term] = []
    for raw in as_list(required.get("nodeSelectorTerms")):
        t = as_mapping(raw)
        exprs = [_label_req(as_mapping(e)) for e in as_list(t.get("matchExpressions"))]
        fields = [_field_req(as_mapping(e)) for e in as_list(t.get("matchFields"))]
        reqs = [*exprs, *fields]
        if reqs and all(r is not None for r in reqs):
            terms.append(tuple(r for r in reqs if r is not None))
    return tuple(terms)


def pv_node_affinity_terms(pv: Obj) -> tuple[Term, ...] | None:
    """None when the PV has no required node affinity (it fits every node)."""
    affinity = as_mapping(pv.get("spec")).get("nodeAffinity")
    required = as_mapping(affinity).get("required")
    if not isinstance(required, Mapping):
        return None
    return compile_node_selector(required)


def terms_match(terms: tuple[Term, ...] | None, labels: Mapping[str, str]) -> bool:
    """volumeutil.CheckNodeAffinity: the node is given by its labels only (its name reads as "")."""
    return terms is None or any(all(_req_matches(r, labels, "") for r in t) for t in terms)


def compile_topologies(sc: Obj) -> list[list[tuple[str, frozenset[str]]]] | None:
    """allowedTopologies as a list of terms (key In values ANDed); None: no restriction. A term that
    is empty or does not parse becomes [] and matches nothing."""
    raw = as_list(sc.get("allowedTopologies"))
    if not raw:
        return None
    terms: list[list[tuple[str, frozenset[str]]]] = []
    for t in raw:
        exprs = [as_mapping(e) for e in as_list(as_mapping(t).get("matchLabelExpressions"))]
        reqs: list[tuple[str, frozenset[str]]] = []
        for e in exprs:
            key, values = e.get("key"), [v if v is not None else "" for v in as_list(e.get("values"))]
            ok = isinstance(key, str) and is_qualified_name(key) and bool(values)
            if not ok or not all(isinstance(v, str) and is_label_value(v) for v in values):
                reqs = []
                break
            reqs.append((str(key), frozenset(str(v) for v in values)))
        terms.append(reqs)
    return terms


def topologies_match(terms: list[list[tuple[str, frozenset[str]]]] | None, labels: Mapping[str, str]) -> bool:
    """MatchTopologySelectorTerms."""
    if terms is None:
        return True
    return any(t and all(labels.get(k) in vs for k, vs in t) for t in terms)


def storage_of(obj: Obj, field: str) -> Quantity:
    """``spec.capacity.storage`` of a PV or ``spec.resources.requests.storage`` of a claim (0 if absent)."""
    spec = as_mapping(obj.get("spec"))
    holder = (
        as_mapping(spec.get("capacity"))
        if field == "capacity"
        else as_mapping(as_mapping(spec.get("resources")).get("requests"))
    )
    raw = holder.get("storage")
    try:
        return Quantity(str(raw)) if raw is not None else _ZERO
    except QuantityError:
        return _ZERO


def exact_size(q: Quantity) -> int | Fraction:
    """A quantity's exact value, as an int when it is whole (fast to compare and sort)."""
    f = q.as_fraction()
    return f.numerator if f.denominator == 1 else f


def is_bound_to_claim(pv: Obj, pvc: Obj) -> bool:
    """IsVolumeBoundToClaim."""
    ref = as_mapping(pv.get("spec")).get("claimRef")
    if not isinstance(ref, Mapping):
        return False
    meta = as_mapping(pvc.get("metadata"))
    if ref.get("name") != meta.get("name") or (ref.get("namespace") or "") != (meta.get("namespace") or ""):
        return False
    return not ref.get("uid") or ref.get("uid") == meta.get("uid")


def claim_selector(pvc: Obj) -> LabelSelector | None:
    """The claim's ``spec.selector``; raises LabelSelectorError when it does not parse."""
    raw = as_mapping(pvc.get("spec")).get("selector")
    return None if raw is None else LabelSelector.from_dict(raw)


class CompiledPV:
    """A PV with what matching reads parsed once (kept across cycles while the PV object is the same)."""

    __slots__ = (
        "available",
        "capacity",
        "claim_ref",
        "cls",
        "deleting",
        "labels",
        "mode",
        "modes",
        "name",
        "pv",
        "size",
        "terms",
    )

    def __init__(self, pv: Obj) -> None:
        meta, spec = as_mapping(pv.get("metadata")), as_mapping(pv.get("spec"))
        self.pv = pv
        self.name = str(meta.get("name") or "")
        self.capacity = storage_of(pv, "capacity")
        self.size = exact_size(self.capacity)
        self.terms = pv_node_affinity_terms(pv)
        ref = spec.get("claimRef")
        self.claim_ref = (
            (ref.get("namespace") or "", ref.get("name"), ref.get("uid") or "")
            if isinstance(ref, Mapping)
            else None
        )
        self.mode = spec.get("volumeMode") or FILESYSTEM
        self.deleting = meta.get("deletionTimestamp") is not None
        self.available = as_mapping(pv.get("status")).get("phase") == AVAILABLE
        self.cls = pv_class(pv)
        self.modes = frozenset(m for m in as_list(spec.get("accessModes")) if isinstance(m, str))
        self.labels = labels_of(pv)

    def bound_to(self, ns: str, name: Any, uid: str) -> bool:
        """IsVolumeBoundToClaim against a claim's namespace, name and uid."""
        ref = self.claim_ref
        return ref is not None and ref[0] == ns and ref[1] == name and (not ref[2] or ref[2] == uid)


def find_matching_volume(
    pvc: Obj,
    pvs: Iterable[CompiledPV],
    labels: Mapping[str, str],
    excluded: set[str],
    selector: LabelSelector | None,
) -> CompiledPV | None:
    """FindMatchingVolume with delayed binding and a node (given by its labels)."""
    requested = storage_of(pvc, "requests")
    spec = as_mapping(pvc.get("spec"))
    mode = spec.get("volumeMode") or FILESYSTEM
    cls = pvc_class(pvc)
    modes = set(as_list(spec.get("accessModes")))
    smallest: CompiledPV | None = None
    for c in pvs:
        pv = c.pv
        pv_spec = as_mapping(pv.get("spec"))
        if c.name in excluded:
            continue
        if isinstance(pv_spec.get("claimRef"), Mapping) and not is_bound_to_claim(pv, pvc):
            continue
        if c.capacity.cmp(requested) < 0:
            continue
        if (pv_spec.get("volumeMode") or FILESYSTEM) != mode:
            continue
        if as_mapping(pv.get("metadata")).get("deletionTimestamp") is not None:
            continue
        affinity_ok = terms_match(c.terms, labels)
        if is_bound_to_claim(pv, pvc):
            return c if affinity_ok else None
        if as_mapping(pv.get("status")).get("phase") != AVAILABLE:
            continue
        if selector is not None and not selector.matches(labels_of(pv)):
            continue
        if pv_class(pv) != cls or not affinity_ok:
            continue
        if not modes <= set(as_list(pv_spec.get("accessModes"))):
            continue
        if smallest is None or smallest.capacity.cmp(c.capacity) > 0:
            smallest = c
    return smallest


def claim_candidates(
    pvc: Obj, pvs: Iterable[CompiledPV], selector: LabelSelector | None
) -> tuple[CompiledPV | None, list[CompiledPV]]:
    """FindMatchingVolume's checks that do not depend on the node, once per claim: the first PV (in the
    given order) already bound to the claim — which alone decides the claim on every node — and the
    PVs that can be chosen, smallest first (ties in the given order). Node affinity is left to the
    caller."""
    meta, spec = as_mapping(pvc.get("metadata")), as_mapping(pvc.get("spec"))
    ns, name, uid = str(meta.get("namespace") or ""), meta.get("name"), str(meta.get("uid") or "")
    requested = exact_size(storage_of(pvc, "requests"))
    mode = spec.get("volumeMode") or FILESYSTEM
    cls = pvc_class(pvc)
    modes = frozenset(m for m in as_list(spec.get("accessModes")) if isinstance(m, str))
    found: list[tuple[Any, int, CompiledPV]] = []
    for order, c in enumerate(pvs):
        bound = c.bound_to(ns, name, uid)
        if (c.claim_ref is not None and not bound) or c.size < requested or c.mode != mode or c.deleting:
            continue
        if bound:
            return c, []
        if not c.available or (selector is not None and not selector.matches(c.labels)):
            continue
        if c.cls != cls or not modes <= c.modes:
            continue
        found.append((c.size, order, c))
    found.sort(key=lambda f: (f[0], f[1]))
    return None, [c for _, _, c in found]
