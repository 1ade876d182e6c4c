"""One time series of the metric cache: a fixed-capacity ring buffer of (timestamp ms, value float64),
stored as one row of a ``SeriesBlock`` (block.py), so the cache can write a whole collector round into
many series at once.

``RingSeries(capacity)`` is a series on its own (a private one-row block); the cache makes its series
from a shared ``SeriesPool`` (``RingSeries.in_pool``) and hands the row back when the series goes
(``release``). Queries always answer int64 ms. A series whose points were all written in timestamp
order (the collectors' case) answers window queries with two binary searches and copies only the
window; otherwise with a mask and a stable sort. Not thread-safe on its own: the cache serialises access.

Imports: standard library, numpy, agent.metriccache.block, agent.system.accel (the optional C window sum).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

import numpy as np
import numpy.typing as npt

from agent.metriccache.block import ROW_STRIDE, SeriesBlock, SeriesPool
from agent.system.accel import cgparse

__all__ = ["RingSeries"]

_window_sum = cgparse.window_sum if cgparse is not None else None
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


class RingSeries:
    """Bounded ring buffer of points in write order (one row of a block)."""

    __slots__ = ("_block", "_pool", "_row", "gid")

    def __init__(self, capacity: int) -> None:
        self._pool: SeriesPool | None = None
        self._block = SeriesBlock(capacity, 1)
        self._row = 0
        self._block.take()
        self.gid = 0
        """Global row id in the pool (block index × ROW_STRIDE + row)."""

    @classmethod
    def in_pool(cls, pool: SeriesPool, capacity: int) -> RingSeries:
        """An empty series on a row of ``pool``."""
        series = cls.__new__(cls)
        series._pool = pool
        series._place(capacity)
        return series

    def _place(self, capacity: int) -> None:
        if self._pool is None:
            self._block, self._row = SeriesBlock(capacity, 1), 0
            self._block.take()
        else:
            self._block, self._row = self._pool.take(capacity)
        self.gid = self._block.index * ROW_STRIDE + self._row

    def release(self) -> None:
        """Hand the row back to the pool (the series must not be used afterwards)."""
        if self._pool is not None:
            self._pool.give_back(self._block, self._row)

    @classmethod
    def from_points(
        cls,
        capacity: int,
        timestamps: npt.NDArray[np.int64],
        values: npt.NDArray[np.float64],
        pool: SeriesPool | None = None,
    ) -> RingSeries:
        """A series holding the newest ``capacity`` of the given points (in the given order)."""
        series = cls(capacity) if pool is None else cls.in_pool(pool, capacity)
        series._block.load(series._row, timestamps, values)
        return series

    @property
    def capacity(self) -> int:
        return self._block.capacity

    @property
    def timestamp_dtype(self) -> np.dtype[np.int32] | np.dtype[np.int64]:
        """How timestamps are stored: int32 offsets from the block's base, or int64 once widened."""
        return self._block.ts.dtype

    @property
    def last_write_stamp(self) -> int:
        """The stamp given with the latest write (the cache's recency order)."""
        return int(self._block.stamp[self._row])

    def touch(self, stamp: int) -> None:
        """Set the recency stamp without writing a point."""
        self._block.stamp[self._row] = stamp

    def resize(self, capacity: int) -> None:
        """Change the capacity; shrinking keeps the newest points."""
        if capacity < 1:
            raise ValueError(f"series capacity must be ≥ 1, got {capacity}")
        if capacity == self.capacity:
            return
        ts, vals = self.points()
        stamp = self.last_write_stamp
        old_block, old_row = self._block, self._row
        self._place(capacity)
        self._block.load(self._row, ts, vals)
        self._block.stamp[self._row] = stamp
        if self._pool is not None:
            self._pool.give_back(old_block, old_row)

    def __len__(self) -> int:
        return int(self._block.count[self._row])

    @property
    def allocated(self) -> int:
        """Number of points held (never beyond the capacity)."""
        return len(self)

    def append(self, timestamp_ms: int, value: float, stamp: int = 0) -> None:
        """Add a point, overwriting the oldest one when the series is at capacity."""
        self._block.append(self._row, timestamp_ms, value, stamp)

    def _state(self) -> tuple[int, int, int]:
        block, row = self._block, self._row
        return int(block.count[row]), int(block.head[row]), int(block.run[row])

    def points(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Copies of all retained points, oldest written first."""
        n, head, _ = self._state()
        block, row = self._block, self._row
        ts, vals = block.ts[row, :n], block.vals[row, :n]
        if head == 0:
            return block.absolute(ts), vals.copy()
        return (
            block.absolute(np.concatenate([ts[head:], ts[:head]])),
            np.concatenate([vals[head:], vals[:head]]),
        )

    def window(self, start_ms: int, end_ms: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Points with start_ms ≤ t ≤ end_ms, in timestamp order (stable: write order among equal times)."""
        n, head, run = self._state()
        if run >= n:
            return self._ordered_window(start_ms, end_ms, n, head)
        ts, vals = self.points()
        mask = (ts >= start_ms) & (ts <= end_ms)
        ts, vals = ts[mask], vals[mask]
        order = np.argsort(ts, kind="stable")
        return ts[order], vals[order]

    def _runs(self, start_ms: int, end_ms: int, n: int, head: int) -> list[tuple[int, int]]:
        """Index ranges of the window in an ordered row: its two physical runs ([head:], then [:head]) are
        each sorted."""
        block = self._block
        raw = memoryview(block.ts[self._row])  # a C-contiguous 1-D row
        base = block.base or 0
        lo_key, hi_key = start_ms - base, end_ms - base
        parts: list[tuple[int, int]] = []
        for lo, hi in ((head, n), (0, head)) if head else ((0, n),):
            a = bisect_left(raw, lo_key, lo, hi)
            b = bisect_right(raw, hi_key, a, hi)
            if a < b:
                parts.append((a, b))
        return parts

    def _ordered_window(
        self, start_ms: int, end_ms: int, n: int, head: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        parts = self._runs(start_ms, end_ms, n, head)
        if not parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        block, row = self._block, self._row
        ts, vals = block.ts[row], block.vals[row]
        if len(parts) == 1:
            a, b = parts[0]
            return block.absolute(ts[a:b]), vals[a:b].copy()
        return (
            block.absolute(np.concatenate([ts[a:b] for a, b in parts])),
            np.concatenate([vals[a:b] for a, b in parts]),
        )

    def window_avg(self, start_ms: int, end_ms: int) -> float | None:
        """``avg`` of ``window(start_ms, end_ms)``'s values (the same float64 running sum in timestamp order),
        without building the window arrays when the series is ordered; None when no point is in it."""
        n, head, run = self._state()
        if run >= n and _window_sum is not None:  # one C call: two binary searches and the running sum
            block, row = self._block, self._row
            base = block.base or 0
            total, count = _window_sum(
                block.ts[row],
                block.vals[row],
                n,
                head,
                max(start_ms - base, _I64_MIN),
                min(end_ms - base, _I64_MAX),
            )
            return total / count if count else None
        if run < n:
            vals = self.window(start_ms, end_ms)[1]
        else:
            parts = self._runs(start_ms, end_ms, n, head)
            if not parts:
                return None
            view = self._block.vals[self._row]
            if len(parts) == 1:
                vals = view[parts[0][0] : parts[0][1]]
            else:
                vals = np.concatenate([view[a:b] for a, b in parts])
        n_points = int(vals.shape[0])
        if n_points == 0:
            return None
        return float(vals.cumsum(dtype=np.float64)[-1]) / n_points
