"""VolumeBinding's Filter over every row at once (docs/rules/scheduler-volumes.md#volumebinding): the
per-node FindPodVolumes as masks. Node affinity and allowedTopologies become row sets through a
per-label-key index of the rows' values (a snapshot view), so a PV with ``hostname In [n]`` costs a dict
lookup, not a pass over the rows; for each delayed claim the best PV of every row (the smallest that
fits, not chosen for an earlier claim of the pod on that row) is one numpy step per candidate PV.
Imports: numpy, scheduler.framework, scheduler.plugins.volume.matching.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from scheduler.framework.rows import RowChange
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.volume.common import labels_of
from scheduler.plugins.volume.matching import (
    DOES_NOT_EXIST,
    EXISTS,
    GT,
    IN,
    NOT_IN,
    Req,
    Term,
    parse_int64,
)

I64 = npt.NDArray[np.int64]
Bool = npt.NDArray[np.bool_]


class LabelIndex:
    """For one label key: each row's value code (-1: absent), and the rows of each value."""

    reads_pods = False

    def __init__(self, key: str) -> None:
        self.key = key
        self.values: list[str] = []
        self.index: dict[str, int] = {}
        self.codes = np.zeros(0, np.int32)
        self._rows: dict[int, I64] | None = None

    def _code(self, node: Mapping[str, Any]) -> int:
        v = labels_of(node).get(self.key)
        if v is None:
            return -1
        c = self.index.get(v)
        if c is None:
            c = self.index[v] = len(self.values)
            self.values.append(v)
        return c

    def rebuild(self, snapshot: Snapshot) -> None:
        self.values, self.index, self._rows = [], {}, None
        self.codes = np.fromiter((self._code(i.node) for i in snapshot.infos), np.int32, snapshot.n)

    def refresh(self, snapshot: Snapshot, rows: Sequence[int]) -> None:
        for i in rows:
            self.codes[i] = self._code(snapshot.infos[i].node)
        self._rows = None

    def resize(self, snapshot: Snapshot, change: RowChange) -> None:
        self.codes = change.array(self.codes, -1)
        self._rows = None

    def rows_of(self, values: frozenset[str]) -> I64:
        """The rows whose value is one of `values`, ascending."""
        if self._rows is None:
            order = np.argsort(self.codes, kind="stable")
            bounds = np.searchsorted(self.codes[order], np.arange(len(self.values) + 1))
            spans = itertools.pairwise(bounds)
            self._rows = {c: order[a:b].astype(np.int64) for c, (a, b) in enumerate(spans)}
        parts = [self._rows[c] for v in values if (c := self.index.get(v)) is not None]
        if not parts:
            return np.zeros(0, np.int64)
        return parts[0] if len(parts) == 1 else np.unique(np.concatenate(parts))

    def mask(self, req: Req) -> Bool:
        if req.op == EXISTS:
            return self.codes >= 0
        if req.op == DOES_NOT_EXIST:
            return self.codes < 0
        table = np.zeros(len(self.values) + 1, np.bool_)  # the last slot is "absent" (code -1)
        for c, v in enumerate(self.values):
            if req.op in (IN, NOT_IN):
                table[c] = v in req.values
            else:
                x = parse_int64(v)
                table[c] = x is not None and (x > req.bound if req.op == GT else x < req.bound)
        if req.op == NOT_IN:
            table[:-1] = ~table[:-1]
            table[-1] = True
        return table[self.codes]


def label_index(snapshot: Snapshot, key: str) -> LabelIndex:
    return snapshot.view(("VolumeBinding", "label", key), lambda: LabelIndex(key))


def term_rows(snapshot: Snapshot, term: Term) -> I64:
    """The rows a node selector term matches (labels; fields read the name as "")."""
    rows: I64 | None = None
    masks: list[Bool] = []
    for r in term:
        if r.field:
            if ("" in r.values) != (r.op == IN):
                return np.zeros(0, np.int64)
            continue
        if r.op == IN:
            found = label_index(snapshot, r.key).rows_of(r.values)
            rows = found if rows is None else np.intersect1d(rows, found, assume_unique=True)
        else:
            masks.append(label_index(snapshot, r.key).mask(r))
    if masks:
        m = np.logical_and.reduce(masks)
        rows = np.flatnonzero(m) if rows is None else rows[m[rows]]
    return np.arange(snapshot.n, dtype=np.int64) if rows is None else rows


def terms_rows(snapshot: Snapshot, terms: tuple[Term, ...] | None) -> I64:
    """Rows matching any term (None: every row), ascending."""
    if terms is None:
        return np.arange(snapshot.n, dtype=np.int64)
    parts = [term_rows(snapshot, t) for t in terms]
    if len(parts) == 1:
        return parts[0]
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)


def terms_mask(snapshot: Snapshot, terms: tuple[Term, ...] | None) -> Bool:
    """Rows matching any term (None: every row)."""
    mask = np.zeros(snapshot.n, np.bool_)
    if terms is None:
        mask[:] = True
        return mask
    for t in terms:
        mask[term_rows(snapshot, t)] = True
    return mask


def topology_terms(raw: list[list[tuple[str, frozenset[str]]]] | None) -> tuple[Term, ...] | None:
    """allowedTopologies as node selector terms of In requirements (an empty term matches nothing)."""
    if raw is None:
        return None
    return tuple(tuple(Req(k, IN, vs) for k, vs in t) for t in raw if t)


def best_candidates(snapshot: Snapshot, rows_of: list[I64], taken: list[I64], ids: list[int]) -> I64:
    """Per row the index of the first candidate (in the given order) whose rows include it and that no
    earlier claim took there (`taken`: per earlier claim, the candidate id chosen per row), else -1."""
    best = np.full(snapshot.n, -1, np.int64)
    for k, rows in enumerate(rows_of):
        free = rows[best[rows] < 0]
        for t in taken:
            free = free[t[free] != ids[k]]
        best[free] = k
    return best
