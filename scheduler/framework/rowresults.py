"""Results of a vectorised rule kept per input, so a pod shaped like a recent one costs a copy.

A rule's result over every row depends on its input (a pod's requests, estimate, ...) and on the rows'
data. ``RowResults`` keeps one result array per recent input key; the view that owns the rows reports
each row it rewrites (``changed``), and an entry read after such changes has exactly those rows
recomputed by the same rule, over just those rows. Every value therefore equals a fresh evaluation.
Imports: numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any, Final

import numpy as np
import numpy.typing as npt

Rows = npt.NDArray[np.intp]
#: ``rule(None)`` evaluates every row; ``rule(rows)`` only ``rows`` (ascending, distinct), in that order;
#: rows are the last axis of the result.
Rule = Callable[[Rows | None], npt.NDArray[Any]]
LOG_LIMIT: Final = 1 << 14  # rewritten rows remembered before every entry is dropped instead


class RowResults:
    """Result arrays by input key, least recently used dropped beyond ``limit``."""

    def __init__(self, n: int, budget: int = 4_000_000) -> None:
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
                pending = self.log[seen:]
                rows: Rows = np.array(pending if len(pending) == 1 else sorted(set(pending)), np.intp)
                values[..., rows] = rule(rows)
        self.entries[key] = (values, len(self.log))
        return values
