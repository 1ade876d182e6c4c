"""Filter's and Score's per-row results for the estimates seen recently, kept between pods.

Before the expiry rule (applied per call, it depends on the clock) a row's result depends only on the
estimate and that row's columns of ``RowTable``. ``EstimateMemo`` keeps one result row per distinct
estimate in a matrix; rows of the table rewritten since (``RowTable.changes``) are recomputed for every
kept estimate at once by the same elementwise operations as a full evaluation, so every value equals
what a fresh evaluation would give.
Imports: the standard library, numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

Idx = npt.NDArray[np.intp]
#: ``block(estimates (K, R), rows or None for every row) -> (K, m)`` results.
Block = Callable[[npt.NDArray[Any], Idx | None], npt.NDArray[Any]]
SLOTS: Final = 128


class EstimateMemo:
    """Results by estimate key for a table of ``n`` rows; ``changes`` is the table's append-only log of
    rewritten rows (its length at the last patch is ``at``)."""

    def __init__(self, n: int, dtype: type[Any], width: int, est_dtype: type[Any], block: Block) -> None:
        self.block = block
        self.values: npt.NDArray[Any] = np.empty((SLOTS, n), dtype)
        self.ests: npt.NDArray[Any] = np.zeros((SLOTS, width), est_dtype)
        self.slots: dict[Hashable, int] = {}
        self.at = 0

    def get(self, key: Hashable, est: Sequence[Any], changes: list[int]) -> npt.NDArray[Any]:
        """The kept result row of ``key`` (estimate ``est``) after patching; callers must not mutate it."""
        k = len(self.slots)
        if self.at != len(changes):
            if k:
                pending = changes[self.at :]
                unique = pending if len(pending) == 1 else sorted(set(pending))
                rows: Idx = np.array(unique, np.intp)
                self.values[:k, rows] = self.block(self.ests[:k], rows)
            self.at = len(changes)
        slot = self.slots.get(key)
        if slot is None:
            if k >= SLOTS:
                self.slots.clear()
                k = 0
            slot = self.slots[key] = k
            self.ests[slot] = est
            self.values[slot] = self.block(self.ests[slot : slot + 1], None)[0]
        row: npt.NDArray[Any] = self.values[slot]
        return row
