"""The existing pods' term groups indexed by what their selector requires
(docs/rules/scheduler-interpodaffinity.md#performance): an incoming pod is tested only against the
groups whose required label it carries, not against every group of the cluster.

Each group's term is filed, for every namespace it applies to, under its selector's most selective
positive requirement: a ``matchLabels`` pair or an ``In`` (fewest values first) under
``(namespace, key, value)`` for each value, an ``Exists`` under ``(namespace, key)``. A selector with no
positive requirement (only ``NotIn``/``DoesNotExist``, or ``{}``) is filed under ``(namespace,)`` and
tried for every pod of the namespace; an absent selector matches no pod and is filed nowhere. A pod of
namespace ``ns`` reaches ``(ns,)``, and ``(ns, k)`` and ``(ns, k, v)`` for each of its labels ``k=v``:
every group whose term can match it, each once (a pod has one value per key). A group whose filed
requirement is its whole selector matches every pod that reaches it, so ``matches`` runs only for the
others. Groups are added and removed one by one as the pod index gains or loses them.
Imports: apis.labelselector, scheduler.plugins.interpodaffinity.terms.
"""

from __future__ import annotations

from collections.abc import Mapping

from apis.labelselector import OP_EXISTS, OP_IN, LabelSelector
from scheduler.plugins.interpodaffinity.terms import AffinityTerm

GroupKey = tuple[str, AffinityTerm, int]  # kind, term, signed weight (0 for anti and hard)
Bucket = tuple[str, ...]  # (namespace,), (namespace, key) or (namespace, key, value)


def requirement(selector: LabelSelector) -> tuple[str, tuple[str, ...] | None] | None:
    """The selector's most selective positive requirement as (key, values): a ``matchLabels`` pair or
    an ``In`` with the fewest distinct values, else an ``Exists`` (values None); None when it has none.
    Every pod the selector matches carries the key, with one of the values when there are some."""
    if selector.match_labels:
        k, v = next(iter(selector.match_labels.items()))
        return k, (v,)
    best: tuple[str, tuple[str, ...] | None] | None = None
    for r in selector.match_expressions:
        if r.operator == OP_IN:
            values = tuple(dict.fromkeys(r.values))
            if best is None or best[1] is None or len(values) < len(best[1]):
                best = r.key, values
        elif r.operator == OP_EXISTS and best is None:
            best = r.key, None
    return best


def buckets(term: AffinityTerm) -> tuple[tuple[Bucket, ...], bool]:
    """Where ``term`` is filed, and whether reaching a bucket means matching (the filed requirement
    is the whole selector). An ``In`` without values (a selector parsing refuses) matches no pod."""
    sel = term.selector
    if sel is None:
        return (), True
    found = requirement(sel)
    parts = len(sel.match_labels) + len(sel.match_expressions)
    spaces = sorted(term.namespaces)
    if found is None:
        return tuple((ns,) for ns in spaces), parts == 0
    key, values = found
    if values is None:
        return tuple((ns, key) for ns in spaces), parts == 1
    return tuple((ns, key, v) for ns in spaces for v in values), parts == 1


class TermIndex:
    """See the module docstring. ``groups``: every group held, with its buckets and exactness."""

    def __init__(self) -> None:
        self.groups: dict[GroupKey, tuple[tuple[Bucket, ...], bool]] = {}
        self.buckets: dict[Bucket, dict[GroupKey, bool]] = {}  # bucket → group → exact

    def add(self, g: GroupKey) -> None:
        where, exact = buckets(g[1])
        self.groups[g] = where, exact
        for b in where:
            self.buckets.setdefault(b, {})[g] = exact

    def remove(self, g: GroupKey) -> None:
        found = self.groups.pop(g, None)
        if found is None:
            return
        for b in found[0]:
            d = self.buckets.get(b)
            if d is not None:
                d.pop(g, None)
                if not d:
                    del self.buckets[b]

    def candidates(self, namespace: str, labels: Mapping[str, str]) -> list[tuple[GroupKey, bool]]:
        """Every group whose term may match a pod of ``namespace`` with ``labels`` (a superset of the
        matching ones), with whether it surely does."""
        out: list[tuple[GroupKey, bool]] = []
        found = self.buckets
        if not found:
            return out
        d = found.get((namespace,))
        if d is not None:
            out.extend(d.items())
        for k, v in labels.items():
            d = found.get((namespace, k))
            if d is not None:
                out.extend(d.items())
            d = found.get((namespace, k, v))
            if d is not None:
                out.extend(d.items())
        return out

    def matching(self, namespace: str, labels: Mapping[str, str], without: str = "") -> list[GroupKey]:
        """The groups whose term matches a pod of ``namespace`` with ``labels``
        (``schedutil.PodMatchesTermsNamespaceAndSelector``), leaving out those of kind ``without``."""
        return [
            g
            for g, exact in self.candidates(namespace, labels)
            if g[0] != without and (exact or g[1].matches(namespace, labels))
        ]
