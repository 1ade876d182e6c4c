"""Storage of the metric cache's ring buffers: series of one capacity as rows of shared 2-D arrays, so a
collector round of ~1,000 points is written with a dozen numpy operations instead of a Python call per
point.

A ``SeriesBlock`` holds up to ``ROW_STRIDE`` rows of one capacity: timestamps (int32 offsets in ms from
the block's base; the base moves forward when a point would not fit, about once per 25 days, and a block
whose retained points lie too far apart for any int32 base switches to int64 for good), values (float64),
and per row the number of points held, the ring head (index of the oldest point once full), the length of
the trailing run of points written in timestamp order (``run``; the row is ordered while it covers every
point), the last timestamp and the writer's recency stamp. The 2-D arrays live in anonymous ``mmap``s:
pages of rows never written are never resident (``np.zeros`` would not promise that: once glibc has freed
a big block its mmap threshold rises, and calloc then zeroes heap memory, touching every page).
A ``SeriesPool`` hands out rows (global id = block index × ``ROW_STRIDE`` + row), takes them back, and
writes a batch of points addressed by global id.
Not thread-safe: the metric cache serialises access.

Imports: standard library, numpy.
"""

from __future__ import annotations

import mmap
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["ROW_STRIDE", "SeriesBlock", "SeriesPool"]

ROW_STRIDE = 4096
"""Rows per block at most; a global row id is ``block index * ROW_STRIDE + row``."""
_BLOCK_BYTES = 16 << 20  # a block of long series gets fewer rows (virtual size, resident only when written)
_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1
INT64_MIN = -(2**63)

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def lazy_zeros(shape: tuple[int, int], dtype: type[np.generic]) -> npt.NDArray[Any]:
    """A zeroed array on its own anonymous mapping (unmapped when the array goes)."""
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    return np.ndarray(shape, dtype=dtype, buffer=mmap.mmap(-1, max(size, 1)))


def rows_per_block(capacity: int) -> int:
    return max(1, min(ROW_STRIDE, _BLOCK_BYTES // (12 * capacity)))


class SeriesBlock:
    """Up to ``rows`` ring buffers of ``capacity`` points each (see the module docstring)."""

    __slots__ = ("base", "capacity", "count", "free", "head", "index", "last", "run", "stamp", "ts", "vals")

    def __init__(self, capacity: int, rows: int, index: int = 0) -> None:
        if capacity < 1:
            raise ValueError(f"series capacity must be ≥ 1, got {capacity}")
        self.capacity = capacity
        self.index = index
        self.ts: npt.NDArray[np.int32] | IntArray = lazy_zeros((rows, capacity), np.int32)
        self.vals: FloatArray = lazy_zeros((rows, capacity), np.float64)
        self.count: IntArray = np.zeros(rows, dtype=np.int64)
        self.head: IntArray = np.zeros(rows, dtype=np.int64)
        self.run: IntArray = np.zeros(rows, dtype=np.int64)
        self.last: IntArray = np.full(rows, INT64_MIN, dtype=np.int64)
        self.stamp: IntArray = np.zeros(rows, dtype=np.int64)
        self.base: int | None = None  # set by the block's first point
        self.free = list(range(rows - 1, -1, -1))

    @property
    def wide(self) -> bool:
        return self.ts.dtype == np.int64

    def take(self) -> int | None:
        """A free row, emptied; None when the block is full."""
        if not self.free:
            return None
        row = self.free.pop()
        self.count[row] = self.head[row] = self.run[row] = 0
        self.last[row] = INT64_MIN
        return row

    def give_back(self, row: int) -> None:
        self.count[row] = 0
        self.free.append(row)

    # ------------------------------------------------------------------ timestamps

    def absolute(self, raw: npt.NDArray[np.int32] | IntArray) -> IntArray:
        """A new int64 array of absolute ms from stored timestamps."""
        out = raw.astype(np.int64)
        if self.base:
            out += self.base
        return out

    def fit(self, low: int, high: int) -> None:
        """Make timestamps in [low, high] representable: move the base to ``high`` when every retained
        point still fits around it, else switch the block to absolute int64 timestamps for good."""
        if self.base is None:
            self.base = high
        if self.wide or (low - self.base >= _I32_MIN and high - self.base <= _I32_MAX):
            return
        used = np.arange(self.capacity) < self.count[:, None]
        absolute = self.absolute(self.ts)
        held = absolute[used]
        lo = min(int(held.min()), low) if held.shape[0] else low
        hi = max(int(held.max()), high) if held.shape[0] else high
        if lo - high >= _I32_MIN and hi - high <= _I32_MAX:
            self.ts = np.where(used, absolute - high, 0).astype(np.int32)
            self.base = high
        else:
            self.ts = absolute
            self.base = 0

    # ------------------------------------------------------------------ writes

    def append(self, row: int, timestamp_ms: int, value: float, stamp: int = 0) -> None:
        """One point into one row (overwriting its oldest point when full)."""
        self.fit(timestamp_ms, timestamp_ms)
        assert self.base is not None
        n, cap = int(self.count[row]), self.capacity
        if n < cap:
            pos = n
            self.count[row] = n + 1
        else:
            pos = int(self.head[row])
            self.head[row] = (pos + 1) % cap
        self.ts[row, pos] = timestamp_ms - self.base
        self.vals[row, pos] = value
        self.run[row] = int(self.run[row]) + 1 if timestamp_ms >= int(self.last[row]) else 1
        self.last[row] = timestamp_ms
        self.stamp[row] = stamp

    def append_rows(self, rows: IntArray, ts: IntArray, vals: FloatArray, stamps: IntArray) -> None:
        """One point into each of ``rows`` (distinct), as ``append`` would write them one by one."""
        if not rows.shape[0]:
            return
        self.fit(int(ts.min()), int(ts.max()))
        assert self.base is not None
        count, head, cap = self.count[rows], self.head[rows], self.capacity
        full = count >= cap
        pos = np.where(full, head, count)
        self.ts[rows, pos] = ts - self.base
        self.vals[rows, pos] = vals
        self.head[rows] = np.where(full, (head + 1) % cap, head)
        self.count[rows] = np.minimum(count + 1, cap)
        self.run[rows] = np.where(ts >= self.last[rows], self.run[rows] + 1, 1)
        self.last[rows] = ts
        self.stamp[rows] = stamps

    def load(self, row: int, ts: IntArray, vals: FloatArray) -> None:
        """Fill an empty row with the newest ``capacity`` of the given points (in the given order)."""
        ts = np.asarray(ts, dtype=np.int64)[-self.capacity :]
        vals = np.asarray(vals, dtype=np.float64)[-self.capacity :]
        n = int(ts.shape[0])
        if n:
            self.fit(int(ts.min()), int(ts.max()))
            assert self.base is not None
            self.ts[row, :n] = ts - self.base
            self.vals[row, :n] = vals
            breaks = np.flatnonzero(ts[1:] < ts[:-1])
            self.run[row] = n - (int(breaks[-1]) + 1 if breaks.shape[0] else 0)
            self.last[row] = int(ts[-1])
        self.count[row] = n
        self.head[row] = 0


class SeriesPool:
    """Blocks of rows by capacity; rows addressed by global id."""

    def __init__(self) -> None:
        self.blocks: list[SeriesBlock] = []
        self._open: dict[int, list[SeriesBlock]] = {}  # capacity → blocks that may have a free row

    def take(self, capacity: int) -> tuple[SeriesBlock, int]:
        """A free row of ``capacity`` (a new block when every block of that capacity is full)."""
        candidates = self._open.setdefault(capacity, [])
        while candidates:
            row = candidates[-1].take()
            if row is not None:
                return candidates[-1], row
            candidates.pop()
        block = SeriesBlock(capacity, rows_per_block(capacity), len(self.blocks))
        self.blocks.append(block)
        candidates.append(block)
        row = block.take()
        assert row is not None
        return block, row

    def give_back(self, block: SeriesBlock, row: int) -> None:
        block.give_back(row)
        candidates = self._open.setdefault(block.capacity, [])
        if len(block.free) == 1:  # it was full: it has room again
            candidates.append(block)

    def append(self, gids: IntArray, ts: IntArray, vals: FloatArray, stamps: IntArray) -> None:
        """One point per distinct global row id."""
        block_ids = gids // ROW_STRIDE
        first, last = int(block_ids.min()), int(block_ids.max())
        if first == last:
            self.blocks[first].append_rows(gids % ROW_STRIDE, ts, vals, stamps)
            return
        order = np.argsort(block_ids, kind="stable")
        sorted_ids = block_ids[order]
        cuts = np.flatnonzero(sorted_ids[1:] != sorted_ids[:-1]) + 1
        for part in np.split(order, cuts):
            block = self.blocks[int(block_ids[part[0]])]
            block.append_rows(gids[part] % ROW_STRIDE, ts[part], vals[part], stamps[part])
