"""Results of a vectorised rule kept per input, so a pod shaped like a recent one costs a copy.

A rule's result over every row depends on its input (a pod's requests, estimate, ...) and on the rows'
data. ``RowResults`` keeps one result array per recent input key; the view that owns the rows reports
each row it rewrites (``changed``), and an entry read after such changes has exactly those rows
recomputed by the same rule, over just those rows. Every value therefore equals a fresh evaluation.
When nodes join or leave in place (``resize``, a snapshot ``RowChange``) every entry and the pending
rows follow the new layout; the owner then reports the new rows as changed.

Row-aligned arrays follow a change through ``RowChange.array`` (in place while the array's buffer has
room, docs/scheduler-scale.md#node-list).
Imports: numpy, scheduler.framework.rows (RowChange).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from scheduler.framework.rows import RowChange

Rows = npt.NDArray[np.intp]
#: ``rule(None)`` evaluates every row; ``rule(rows)`` only ``rows`` (ascending, distinct), in that order;
#: rows are the last axis of the result.
Rule = Callable[[Rows | None], npt.NDArray[Any]]
LOG_LIMIT: Final = 1 << 14  # rewritten rows remembered before every entry is dropped instead
_PYTHON_REMAP: Final = 512  # pending rows renumbered in Python (beyond: with numpy, O(rows))
_PYTHON_DISTINCT: Final = 24  # pending rows deduplicated in Python (beyond: sorted in C, ~3x faster at 50)


class RowResults:
    """Result arrays by input key, least recently used dropped beyond ``limit``."""

    def __init__(self, n: int, budget: int = 4_000_000) -> None:
        self.budget = budget
        self.limit = max(4, min(64, budget // max(n, 1)))  # entries of n values each
        self.entries: dict[Hashable, tuple[npt.NDArray[Any], int]] = {}  # key → (values, log length)
        self.log: list[int] = []

    def reset(self) -> None:
        """Rows were rebuilt: nothing kept is valid."""
        self.entries.clear()
        self.log.clear()

    def changed(self, rows: Iterable[int]) -> None:
        if self.entries:
            self.log.extend(rows)
            if len(self.log) > LOG_LIMIT:
                self.reset()

    def resize(self, change: RowChange) -> None:
        """Nodes joined or left: every entry moves to the new layout (new rows hold 0 until the owner
        reports them changed) and the pending rows are renumbered, those of removed rows dropped."""
        self.limit = max(4, min(64, self.budget // max(change.n, 1)))
        while len(self.entries) > self.limit:
            del self.entries[next(iter(self.entries))]
        if not self.entries:
            self.log.clear()
            return
        first = min(seen for _, seen in self.entries.values())  # the log before it is read by none
        log = self.log[first:]
        if len(log) <= _PYTHON_REMAP:  # O(moves + log) in Python
            new_of = dict(change.moves)
            gone = set(change.removed)
            kept = [r not in gone for r in log]
            self.log = [new_of.get(r, r) for r, k in zip(log, kept, strict=True) if k]
            seen_of = np.concatenate(([0], np.cumsum(np.array(kept, np.bool_), dtype=np.int64)))
        else:  # O(n + log) in C
            new_at = np.full(change.old_n, -1, np.int64)  # old row -> new row (-1: removed)
            survivors = change.take >= 0
            new_at[change.take[survivors]] = np.flatnonzero(survivors)
            mapped = new_at[np.array(log, np.int64)]
            self.log = mapped[mapped >= 0].tolist()
            seen_of = np.concatenate(([0], np.cumsum(mapped >= 0, dtype=np.int64)))
        # an entry had seen the first `seen` log items: it has seen as many of the kept ones
        for key, (values, seen) in self.entries.items():
            self.entries[key] = (change.array(values), int(seen_of[seen - first]))

    def get(self, key: Hashable, rule: Rule) -> npt.NDArray[Any]:
        """The result of ``rule`` for ``key`` over every row (kept: callers must not modify it)."""
        found = self.entries.pop(key, None)
        if found is None:
            values = rule(None)
            if len(self.entries) >= self.limit:
                del self.entries[next(iter(self.entries))]
        else:
            values, seen = found
            if seen < len(self.log):
                rows = _distinct(self.log, seen)
                values[..., rows] = rule(rows)
        self.entries[key] = (values, len(self.log))
        return values


def _distinct(log: list[int], start: int) -> Rows:
    """The distinct rows of ``log[start:]``, ascending (a few in Python; more sorted in C)."""
    m = len(log) - start
    if m < _PYTHON_DISTINCT:
        return np.array(sorted(set(log[start:])), np.intp)
    rows = np.fromiter(log[start:], np.intp, m)
    rows.sort()
    keep = np.empty(m, np.bool_)
    keep[0] = True
    np.not_equal(rows[1:], rows[:-1], out=keep[1:])
    return rows[keep]
