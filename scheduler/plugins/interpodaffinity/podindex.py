"""The pods of the snapshot indexed for InterPodAffinity
(docs/rules/scheduler-interpodaffinity.md#performance): a snapshot view (``reads_pods``) kept up to
date row by row, so a cycle costs O(term groups that can match the incoming pod) plus O(matching
pods), never O(all pods) nor O(all terms).

- Every pod by namespace, by (namespace, label key) and by (namespace, label key, value): the pods an
  incoming pod's term can match are found from the selector's most selective positive requirement.
- Existing pods' terms grouped by (kind, term, weight), each group listing (pod, position) → row:
  ``anti`` the required anti-affinity terms (kube's ``PodsWithRequiredAntiAffinity``), ``hard`` the
  required affinity terms and ``pref`` the preferred ones with their signed int32 weight (kube's
  ``PodsWithAffinity``). Pods of one workload share their terms, so a group is tested against the
  incoming pod once and its rows counted in one numpy call. The groups are filed in two
  ``TermIndex``es (``anti``; ``hard`` and ``pref``) by what their selector requires, so an incoming
  pod is tested only against the groups that can match its labels.
A re-copied row re-parses only the pods whose object changed (pod objects are replaced, never mutated).
Nodes joining or leaving in place (``resize``) cost the removed rows' pods (they leave every index) and
the moved rows' pods (their entries follow the row), never a pass over the cluster.
Imports: numpy, apis.labelselector, scheduler.framework, scheduler.plugins.interpodaffinity (terms,
termindex).
"""

from __future__ import annotations

from collections.abc import Iterable, KeysView, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from apis.labelselector import OP_EXISTS, OP_IN
from scheduler.framework.interfaces import IntArray, Pod
from scheduler.framework.rows import RowChange
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.interpodaffinity.termindex import GroupKey, TermIndex
from scheduler.plugins.interpodaffinity.terms import (
    AffinityTerm,
    PodTerms,
    int32,
    parse_pod_terms,
    pod_label_set,
    pod_namespace,
)

ANTI: Final = "anti"
HARD: Final = "hard"
PREF: Final = "pref"


@dataclass(slots=True, eq=False)
class Existing:
    """One pod of the snapshot (identity matters: a key may briefly sit on two rows)."""

    key: str
    row: int
    pod: Pod
    namespace: str
    labels: dict[str, str]
    terms: PodTerms
    groups: list[GroupKey]  # _groups_of(terms), made once per pod object (its entries come and go)


def _groups_of(terms: PodTerms) -> list[GroupKey]:
    """The pod's term groups, one entry per term (repeats kept: kube counts every term)."""
    out: list[GroupKey] = [(ANTI, t, 0) for t in terms.required_anti]
    out += [(HARD, t, 0) for t in terms.required_affinity]
    out += [(PREF, w.term, w.weight) for w in terms.preferred_affinity]
    out += [(PREF, w.term, int32(-w.weight)) for w in terms.preferred_anti]
    return out


def _drop(index: dict[object, dict[str, Existing]], k: object, e: Existing) -> None:
    d = index.get(k)
    if d is not None and d.get(e.key) is e:
        del d[e.key]
        if not d:
            del index[k]


class PodIndex:
    """See the module docstring."""

    reads_pods = True

    def __init__(self) -> None:
        self._clear(0)

    def _clear(self, n: int) -> None:
        self.rows: list[dict[str, Existing]] = [{} for _ in range(n)]
        self.by_ns: dict[object, dict[str, Existing]] = {}
        self.by_key: dict[object, dict[str, Existing]] = {}
        self.by_label: dict[object, dict[str, Existing]] = {}
        self.groups: dict[GroupKey, dict[tuple[str, int], Existing]] = {}
        self.anti_terms = TermIndex()  # the ANTI groups of `groups`
        self.score_terms = TermIndex()  # the HARD and PREF groups
        self._rows: dict[GroupKey, IntArray] = {}

    # --- upkeep -----------------------------------------------------------------------------------
    def rebuild(self, snapshot: Snapshot) -> None:
        old = {e.key: e for row in self.rows for e in row.values()}
        self._clear(snapshot.n)
        for i, info in enumerate(snapshot.infos):
            for key, pi in info.pods.items():
                self._add(self._entry(key, i, pi.pod, old.get(key)))

    def refresh(self, snapshot: Snapshot, rows: Sequence[int]) -> None:
        """Only the row's pods that changed (`Snapshot.pod_changes`), else every pod of the row."""
        for i in rows:
            current, pods = self.rows[i], snapshot.infos[i].pods
            gone, came = snapshot.pod_changes(i, current)
            for key in gone:
                e = current.get(key)
                if e is not None and ((pi := pods.get(key)) is None or pi.pod is not e.pod):
                    self._remove(e)
            for key in came:
                if key not in current:
                    self._add(self._entry(key, i, pods[key].pod, None))

    def resize(self, snapshot: Snapshot, change: RowChange) -> None:
        for r in change.removed:
            for e in list(self.rows[r].values()):
                self._remove(e)
        for old, new in change.moves:
            for e in self.rows[old].values():
                e.row = new
                for g in e.groups:
                    self._rows.pop(g, None)  # its cached rows hold the old row
        change.list(self.rows)
        for i in change.added:
            self.rows[i] = {}

    @staticmethod
    def _entry(key: str, row: int, pod: Pod, old: Existing | None) -> Existing:
        if old is not None and old.pod is pod:
            return Existing(key, row, pod, old.namespace, old.labels, old.terms, old.groups)
        terms = parse_pod_terms(pod)
        return Existing(key, row, pod, pod_namespace(pod), pod_label_set(pod), terms, _groups_of(terms))

    def _add(self, e: Existing) -> None:
        self.rows[e.row][e.key] = e
        ns = e.namespace
        self.by_ns.setdefault(ns, {})[e.key] = e
        for k, v in e.labels.items():
            self.by_key.setdefault((ns, k), {})[e.key] = e
            self.by_label.setdefault((ns, k, v), {})[e.key] = e
        for pos, g in enumerate(e.groups):
            members = self.groups.get(g)
            if members is None:
                members = self.groups[g] = {}
                self._terms(g).add(g)
            members[(e.key, pos)] = e
            self._rows.pop(g, None)

    def _remove(self, e: Existing) -> None:
        row = self.rows[e.row]
        if row.get(e.key) is e:
            del row[e.key]
        ns = e.namespace
        _drop(self.by_ns, ns, e)
        for k, v in e.labels.items():
            _drop(self.by_key, (ns, k), e)
            _drop(self.by_label, (ns, k, v), e)
        for pos, g in enumerate(e.groups):
            members = self.groups.get(g)
            if members is not None and members.get((e.key, pos)) is e:
                del members[(e.key, pos)]
                self._rows.pop(g, None)
                if not members:
                    del self.groups[g]
                    self._terms(g).remove(g)

    def _terms(self, g: GroupKey) -> TermIndex:
        return self.anti_terms if g[0] == ANTI else self.score_terms

    # --- queries ----------------------------------------------------------------------------------
    @property
    def anti_groups(self) -> KeysView[GroupKey]:
        """Every ANTI group held."""
        return self.anti_terms.groups.keys()

    @property
    def score_groups(self) -> KeysView[GroupKey]:
        """Every HARD and PREF group held."""
        return self.score_terms.groups.keys()

    def anti_matching(self, namespace: str, labels: Mapping[str, str]) -> list[GroupKey]:
        """The ANTI groups whose term matches a pod of ``namespace`` with ``labels``."""
        return self.anti_terms.matching(namespace, labels)

    def score_matching(self, namespace: str, labels: Mapping[str, str], hard: bool) -> list[GroupKey]:
        """The PREF groups, and HARD ones when ``hard``, whose term matches the pod."""
        return self.score_terms.matching(namespace, labels, "" if hard else HARD)

    def group_rows(self, g: GroupKey) -> IntArray:
        """The row of every member of group ``g`` (kept until the group changes)."""
        rows = self._rows.get(g)
        if rows is None:
            members = self.groups.get(g, {})
            rows = self._rows[g] = np.fromiter((e.row for e in members.values()), np.int64, len(members))
        return rows

    def matching(self, term: AffinityTerm) -> list[Existing]:
        """The pods of the snapshot ``term`` matches (namespace and selector)."""
        sel = term.selector
        if sel is None:
            return []
        out: list[Existing] = []
        for ns in term.namespaces:
            candidates, exact = self._candidates(ns, term)
            if exact:
                out.extend(candidates)
            else:
                out.extend(e for e in candidates if sel.matches(e.labels))
        return out

    def _candidates(self, ns: str, term: AffinityTerm) -> tuple[Iterable[Existing], bool]:
        """Pods of ``ns`` that satisfy the selector's most selective positive requirement, and
        whether that requirement is the whole selector (no further check needed)."""
        sel = term.selector
        assert sel is not None
        parts = len(sel.match_labels) + len(sel.match_expressions)
        best: list[dict[str, Existing]] | None = None
        best_size = -1
        for k, v in sel.match_labels.items():
            d = self.by_label.get((ns, k, v))
            if d is None:
                return (), True
            if best is None or len(d) < best_size:
                best, best_size = [d], len(d)
        for r in sel.match_expressions:
            if r.operator == OP_IN:
                ds = [d for v in set(r.values) if (d := self.by_label.get((ns, r.key, v))) is not None]
            elif r.operator == OP_EXISTS:
                d = self.by_key.get((ns, r.key))
                ds = [] if d is None else [d]
            else:
                continue
            size = sum(len(d) for d in ds)
            if size == 0:
                return (), True
            if best is None or size < best_size:
                best, best_size = ds, size
        if best is None:
            return self.by_ns.get(ns, {}).values(), parts == 0
        found = best[0].values() if len(best) == 1 else [e for d in best for e in d.values()]
        return found, parts == 1
