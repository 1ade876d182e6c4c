"""Topology values of the nodes for InterPodAffinity (docs/rules/scheduler-interpodaffinity.md#performance):
per topology key a snapshot view of value codes aligned to the rows (NodeAffinity's ``LabelColumn``,
registered under this plugin's own key), and the per-cycle maps (topologyKey, value) → count kept as
one int64 array per key indexed by value code, so a node's count is one gather over all rows. The
filter state keeps, per key, the value → code index its arrays were counted with (``Index``), so its
counts read on any snapshot (a one-row snapshot of a node changed by preemption or nominated pods,
docs/rules/scheduler-interpodaffinity.md#prefilter-extensions) and change by (key, value).
Imports: numpy, scheduler.framework, scheduler.plugins.nodeaffinity.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from scheduler.framework.interfaces import IntArray
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.nodeaffinity import LabelColumn

NAME: Final = "InterPodAffinity"

TopologyCounts = dict[str, IntArray]  # topology key → count per value code of that key's column
Index = dict[str, dict[str, int]]  # topology key → value → code of the counts (a column's, or a copy)


def column(snapshot: Snapshot, key: str) -> LabelColumn:
    """The rows' values of label ``key`` (codes; -1 where a node lacks it)."""
    return snapshot.view((NAME, "label", key), lambda: LabelColumn(key))


def add_rows(counts: TopologyCounts, snapshot: Snapshot, key: str, rows: IntArray, weight: int = 1) -> None:
    """``counts[key][value of row r] += weight`` for every r of ``rows`` whose node has label ``key``."""
    if not len(rows):
        return
    col = column(snapshot, key)
    codes = col.codes[rows]
    codes = codes[codes >= 0]
    if not len(codes):
        return
    found = np.bincount(codes, minlength=len(col.values)).astype(np.int64)
    if weight != 1:
        found *= weight
    have = counts.get(key)
    if have is None:
        counts[key] = found
    else:
        if len(have) < len(found):
            have = counts[key] = np.concatenate([have, np.zeros(len(found) - len(have), np.int64)])
        have[: len(found)] += found


def per_row(counts: TopologyCounts, snapshot: Snapshot, key: str, index: Index | None = None) -> IntArray:
    """Every row's count for its value of ``key`` (0 where the node lacks the label). ``index``: the
    codes ``counts`` use, when they may not be this snapshot's column's (translated value by value)."""
    col = column(snapshot, key)
    table = np.zeros(len(col.values) + 1, np.int64)  # the last slot: code -1, no label
    found = counts.get(key)
    if found is not None:
        own = None if index is None else index.get(key)
        if own is None or own is col.index:
            table[: len(found)] = found
        else:
            for value, c in col.index.items():
                k = own.get(value)
                if k is not None and k < len(found):
                    table[c] = found[k]
    return table[col.codes]


def columns_index(snapshot: Snapshot, counts: TopologyCounts, index: Index) -> None:
    """Records in ``index`` the codes of every key of ``counts`` (this snapshot's columns')."""
    for key in counts:
        index.setdefault(key, column(snapshot, key).index)


def bump(counts: TopologyCounts, index: Index, key: str, value: str, delta: int) -> None:
    """``counts[(key, value)] += delta``, copy on write: neither the arrays nor a column's index are
    ever written, so a cloned state shares them safely."""
    own = index.get(key)
    if own is None:
        own = index[key] = {}
    code = own.get(value)
    if code is None:  # a value the counts have no code for: a private index (codes stay dense)
        code = len(own)
        own = index[key] = {**own, value: code}
    have = counts.get(key)
    size = code + 1 if have is None else max(code + 1, len(have))
    out = np.zeros(size, np.int64)
    if have is not None:
        out[: len(have)] = have
    out[code] += delta
    counts[key] = out


def is_empty(counts: TopologyCounts) -> bool:
    """Whether no (key, value) pair has a non-zero count (kube's map holds no entry)."""
    return not any(np.count_nonzero(c) for c in counts.values())
