"""Topology values of the nodes for InterPodAffinity (docs/rules/scheduler-interpodaffinity.md#performance):
per topology key a snapshot view of value codes aligned to the rows (NodeAffinity's ``LabelColumn``,
registered under this plugin's own key), and the per-cycle maps (topologyKey, value) → count kept as
one int64 array per key indexed by value code, so a node's count is one gather over all rows.
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


def per_row(counts: TopologyCounts, snapshot: Snapshot, key: str) -> IntArray:
    """Every row's count for its value of ``key`` (0 where the node lacks the label)."""
    col = column(snapshot, key)
    table = np.zeros(len(col.values) + 1, np.int64)  # the last slot: code -1, no label
    found = counts.get(key)
    if found is not None:
        table[: len(found)] = found
    return table[col.codes]


def is_empty(counts: TopologyCounts) -> bool:
    """Whether no (key, value) pair has a non-zero count (kube's map holds no entry)."""
    return not any(np.count_nonzero(c) for c in counts.values())
