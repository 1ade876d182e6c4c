"""Per-row counts of the pods a selector matches, and per-row codes of a node-derived string, kept by
the snapshot (docs/rules/scheduler-spread.md#counting-pods).

``PodIndex`` (a snapshot view that reads pods) indexes every non-terminating pod of every row by
namespace and by (namespace, label key[, value]); it follows the rows the snapshot re-copies, so a
cycle never scans every pod. ``counts(namespace, selector)`` is, for each row, the number of pods of
that namespace, not being deleted (no ``deletionTimestamp``), whose labels the selector matches — what
kube-scheduler's ``countPodsMatchSelector``/``countMatchingPods`` compute node by node. The first call
for a selector walks the pods of its narrowest posting list; later calls patch only the rows changed
since (``RowResults``). Nodes joining or leaving in place (``resize``) cost their own pods and the
moved rows' pods, not a pass over the cluster.

``CodeColumn`` keeps ``fn(Node)`` as small integer codes per row (-1 for "": no value).
Imports: numpy, apis (jsonfields, kubeobjects, labelselector), scheduler.framework.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from apis.jsonfields import as_mapping
from apis.kubeobjects import Node
from apis.labelselector import OP_EXISTS, OP_IN, Requirement
from scheduler.framework.listers import Requirements, labels_of, matches, namespace_of
from scheduler.framework.rowresults import RowResults
from scheduler.framework.rows import RowChange
from scheduler.framework.snapshot import PodInfo, Snapshot

I64 = npt.NDArray[np.int64]
VIEW_KEY: Final = ("Spread", "pods")
_NONE: Final[frozenset[int]] = frozenset()
ROW_SCAN_LIMIT: Final = 32  # stale rows recounted by scanning their pods; beyond, from the posting lists
Slots = set[int] | frozenset[int]


def is_terminating(pod: Mapping[str, Any]) -> bool:
    return as_mapping(pod.get("metadata")).get("deletionTimestamp") is not None


class PodIndex:
    """See the module docstring. Slots are reused; ``slot_row[s]`` is -1 for a free slot."""

    reads_pods = True

    def __init__(self) -> None:
        self._reset(0)

    def _reset(self, n: int) -> None:
        self.n = n
        self.slot_row: I64 = np.zeros(0, np.int64)
        self.slot_ns: list[str] = []
        self.slot_labels: list[dict[str, str]] = []
        self.free: list[int] = []
        self.rows: list[dict[str, tuple[int, object]]] = []  # row → pod key → (slot, pod object)
        self.by_ns: dict[str, set[int]] = {}
        self.by_key: dict[tuple[str, str], set[int]] = {}
        self.by_label: dict[tuple[str, str, str], set[int]] = {}
        self.results = RowResults(n)

    # --- RowView ----------------------------------------------------------------------------------
    def rebuild(self, snapshot: Snapshot) -> None:
        """New rows: pods already indexed keep their slot (only their row changes), so a node added
        to the cluster does not re-index every pod's labels."""
        old = {key: entry for row in self.rows for key, entry in row.items()}
        self.n = snapshot.n
        self.rows = [{} for _ in range(snapshot.n)]
        self.results = RowResults(snapshot.n)
        for i, info in enumerate(snapshot.infos):
            row = self.rows[i]
            for key, pi in info.pods.items():
                entry = old.pop(key, None)
                if entry is not None and entry[1] is pi.pod:
                    row[key] = entry
                    if entry[0] >= 0:
                        self.slot_row[entry[0]] = i
                    continue
                if entry is not None:
                    old[key] = entry
                self._add(i, key, pi)
        for s, _ in old.values():  # pods gone (or replaced) since
            if s >= 0:
                self._release(s)

    def refresh(self, snapshot: Snapshot, rows: Sequence[int]) -> None:
        """Only the row's pods that changed (`Snapshot.pod_changes`), else every pod of the row: a pod
        whose object is new is re-indexed, one gone leaves, one new is indexed."""
        for i in rows:
            pods, kept = snapshot.infos[i].pods, self.rows[i]
            gone, came = snapshot.pod_changes(i, kept)
            for key in gone:
                entry = kept.get(key)
                if entry is not None and ((pi := pods.get(key)) is None or pi.pod is not entry[1]):
                    self._remove(i, key)
            for key in came:
                if key not in kept:
                    self._add(i, key, pods[key])
        self.results.changed(rows)

    def resize(self, snapshot: Snapshot, change: RowChange) -> None:
        """The removed rows' pods leave every index; the moved rows' pods follow their row."""
        for r in change.removed:
            for s, _ in self.rows[r].values():
                if s >= 0:
                    self._release(s)
        slot_row = self.slot_row
        for old, new in change.moves:
            for s, _ in self.rows[old].values():
                if s >= 0:
                    slot_row[s] = new
        change.list(self.rows)
        for i in change.added:
            self.rows[i] = {}
        self.n = change.n
        self.results.resize(change)

    def _add(self, row: int, key: str, info: PodInfo) -> None:
        pod = info.pod
        if is_terminating(pod):
            self.rows[row][key] = (-1, pod)  # followed, never counted
            return
        ns, labels = namespace_of(pod), labels_of(pod)
        if self.free:
            s = self.free.pop()
            self.slot_ns[s], self.slot_labels[s] = ns, labels
        else:
            s = len(self.slot_ns)
            self.slot_ns.append(ns)
            self.slot_labels.append(labels)
            if s >= len(self.slot_row):
                grown = np.full(max(64, 2 * len(self.slot_row)), -1, np.int64)
                grown[: len(self.slot_row)] = self.slot_row
                self.slot_row = grown
        self.slot_row[s] = row
        self.rows[row][key] = (s, pod)
        self.by_ns.setdefault(ns, set()).add(s)
        for k, v in labels.items():
            self.by_key.setdefault((ns, k), set()).add(s)
            self.by_label.setdefault((ns, k, v), set()).add(s)

    def _remove(self, row: int, key: str) -> None:
        s, _ = self.rows[row].pop(key)
        if s >= 0:
            self._release(s)

    def _release(self, s: int) -> None:
        ns, labels = self.slot_ns[s], self.slot_labels[s]
        _discard(self.by_ns, ns, s)
        for k, v in labels.items():
            _discard(self.by_key, (ns, k), s)
            _discard(self.by_label, (ns, k, v), s)
        self.slot_row[s] = -1
        self.slot_labels[s] = {}
        self.free.append(s)

    # --- counting ---------------------------------------------------------------------------------
    def _matching(self, ns: str, selector: Requirements) -> list[int]:
        """The slots the selector matches. Equalities (``In`` one value) intersect their posting
        lists, exactly; other requirements are checked on the smallest candidate list."""
        exact: list[Slots] = []
        rest: list[Requirement] = []
        best: Slots | None = None
        for r in selector:
            if r.operator == OP_IN and len(r.values) == 1:
                exact.append(self.by_label.get((ns, r.key, r.values[0])) or _NONE)
                continue
            rest.append(r)
            if r.operator == OP_IN:
                found: Slots = set().union(*(self.by_label.get((ns, r.key, v)) or _NONE for v in r.values))
            elif r.operator == OP_EXISTS:
                found = self.by_key.get((ns, r.key)) or _NONE
            else:
                continue
            if best is None or len(found) < len(best):
                best = found
        if exact:
            exact.sort(key=len)
            slots = exact[0].intersection(*exact[1:]) if len(exact) > 1 else exact[0]
            if best is not None and len(best) < len(slots):
                slots = best.intersection(slots)
        else:
            slots = (self.by_ns.get(ns) or _NONE) if best is None else best
        if not rest:
            return list(slots)
        labels = self.slot_labels
        return [s for s in slots if all(r.matches(labels[s]) for r in rest)]

    def counts(self, ns: str, selector: Requirements | None) -> I64:
        """Matching pods per row (kept: callers must not modify it)."""
        if selector is None:  # an unset selector matches nothing
            return np.zeros(self.n, np.int64)

        def rule(rows: npt.NDArray[np.intp] | None) -> I64:
            if rows is None or len(rows) > ROW_SCAN_LIMIT:
                # the posting lists touch only matching pods; scanning stale rows touches every pod
                # on them (thousands of rows between evaluations under churn: seconds per cycle)
                hits = self._matching(ns, selector)
                every = np.bincount(self.slot_row[hits], minlength=self.n).astype(np.int64)
                return every if rows is None else every[rows]
            out = np.zeros(len(rows), np.int64)
            for j, i in enumerate(rows.tolist()):
                out[j] = sum(
                    1
                    for s, _ in self.rows[i].values()
                    if s >= 0 and self.slot_ns[s] == ns and matches(selector, self.slot_labels[s])
                )
            return out

        return self.results.get((ns, selector), rule)


def _discard(index: dict[Any, set[int]], key: Any, s: int) -> None:
    found = index.get(key)
    if found is not None:
        found.discard(s)
        if not found:
            del index[key]


def pod_index(snapshot: Snapshot) -> PodIndex:
    return snapshot.view(VIEW_KEY, PodIndex)


class CodeColumn:
    """``fn(Node)`` over all rows as codes into ``values`` (-1: the empty string, no value)."""

    reads_pods = False

    def __init__(self, fn: Callable[[Node], str]) -> None:
        self.fn = fn
        self.codes: npt.NDArray[np.int32] = np.zeros(0, np.int32)
        self.values: list[str] = []
        self.index: dict[str, int] = {}

    def _code(self, node: Node) -> int:
        value = self.fn(node)
        if not value:
            return -1
        c = self.index.get(value)
        if c is None:
            c = self.index[value] = len(self.values)
            self.values.append(value)
        return c

    def rebuild(self, snapshot: Snapshot) -> None:
        self.values, self.index = [], {}
        self.codes = np.fromiter((self._code(info.node) for info in snapshot.infos), np.int32, snapshot.n)

    def refresh(self, snapshot: Snapshot, rows: Sequence[int]) -> None:
        for i in rows:
            self.codes[i] = self._code(snapshot.infos[i].node)
        if len(self.values) > 2 * snapshot.n + 64:
            self.rebuild(snapshot)

    def resize(self, snapshot: Snapshot, change: RowChange) -> None:
        self.codes = change.array(self.codes, -1)
