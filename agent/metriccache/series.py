"""One time series of the metric cache: a fixed-capacity ring buffer of (timestamp ms, value float64).

Timestamps are kept as int32 offsets in ms from the series' base: ±24.8 days, far beyond any retention,
and half the memory of int64 (~2 MiB at 150 pods). The base moves forward when a point would not fit
(once per ~25 days of uptime); points weeks apart switch the series to plain int64 for good. Queries
always answer int64 ms. Points live in ``array.array`` buffers (appending a Python scalar costs a
fraction of a numpy item assignment, and the collectors append ~1,000 points a second); queries view
them as numpy arrays. Grows as points arrive up to its capacity, then overwrites the oldest point.
A series whose points were all written in timestamp order (the collectors' case) answers window queries
with two binary searches and copies only the window; otherwise with a mask and a stable sort.
Not thread-safe on its own: the cache serialises access.

Imports: standard library, numpy.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right

import numpy as np
import numpy.typing as npt

_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1
INITIAL_ALLOCATION = 64  # kept for callers that size things by it; arrays grow geometrically anyway


class RingSeries:
    """Bounded ring buffer of points in write order."""

    __slots__ = ("_base", "_capacity", "_head", "_last", "_run", "_ts", "_vals")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"series capacity must be ≥ 1, got {capacity}")
        self._capacity = capacity
        self._ts: array[int] = array("i")  # offsets from _base ("q" with _base 0 once widened)
        self._base = 0
        self._vals: array[float] = array("d")
        self._head = 0  # index of the oldest point once the buffer is full (wrapped)
        # The last ``_run`` points were each written at a timestamp ≥ the one before: the series is in
        # timestamp order while ``_run`` covers every point it holds.
        self._run = 0
        self._last = -(2**63)

    @classmethod
    def from_points(
        cls, capacity: int, timestamps: npt.NDArray[np.int64], values: npt.NDArray[np.float64]
    ) -> RingSeries:
        """A series holding the newest ``capacity`` of the given points (in the given order)."""
        series = cls(capacity)
        ts = np.ascontiguousarray(np.asarray(timestamps, dtype=np.int64)[-capacity:])
        vals = np.ascontiguousarray(np.asarray(values, dtype=np.float64)[-capacity:])
        if ts.shape[0]:
            base = int(ts[-1])
            offsets = ts - base
            if int(offsets.min()) >= _I32_MIN and int(offsets.max()) <= _I32_MAX:
                series._base = base
                series._ts.frombytes(offsets.astype(np.int32).tobytes())
            else:
                series._ts = array("q", ts.tobytes())
        series._vals.frombytes(vals.tobytes())
        if ts.shape[0]:
            breaks = np.flatnonzero(ts[1:] < ts[:-1])
            series._run = int(ts.shape[0] - (breaks[-1] + 1 if breaks.shape[0] else 0))
            series._last = int(ts[-1])
        return series

    @property
    def capacity(self) -> int:
        return self._capacity

    def resize(self, capacity: int) -> None:
        """Change the capacity; shrinking keeps the newest points."""
        if capacity < 1:
            raise ValueError(f"series capacity must be ≥ 1, got {capacity}")
        if self._head:
            # Unwrap so the buffers are oldest-first again.
            self._ts = self._ts[self._head :] + self._ts[: self._head]
            self._vals = self._vals[self._head :] + self._vals[: self._head]
            self._head = 0
        if len(self._ts) > capacity:
            del self._ts[: len(self._ts) - capacity]
            del self._vals[: len(self._vals) - capacity]
        self._capacity = capacity

    def __len__(self) -> int:
        return len(self._ts)

    @property
    def allocated(self) -> int:
        """Number of points held (the buffers grow with them, never beyond the capacity)."""
        return len(self._ts)

    def _rebase(self, timestamp_ms: int) -> None:
        """Make room for ``timestamp_ms``: move the base to it when every retained point still fits
        (an agent up for 25 days: once per ~25 days, O(points)); else absolute int64 timestamps for good
        (points weeks apart, e.g. an old cache file)."""
        old = self._base
        absolute = [t + old for t in self._ts]
        if all(_I32_MIN <= t - timestamp_ms <= _I32_MAX for t in absolute):
            self._ts = array("i", [t - timestamp_ms for t in absolute])
            self._base = timestamp_ms
        else:
            self._ts = array("q", absolute)
            self._base = 0

    def append(self, timestamp_ms: int, value: float) -> None:
        """Add a point, overwriting the oldest one when the series is at capacity."""
        self._run = self._run + 1 if timestamp_ms >= self._last else 1
        self._last = timestamp_ms
        if not self._ts and self._ts.typecode == "i":
            self._base = timestamp_ms
        offset = timestamp_ms - self._base
        if not _I32_MIN <= offset <= _I32_MAX and self._ts.typecode == "i":
            self._rebase(timestamp_ms)
            offset = timestamp_ms - self._base
        if len(self._ts) < self._capacity:
            self._ts.append(offset)
            self._vals.append(value)
            if len(self._ts) == self._capacity:  # full: it never grows again, drop the growth slack
                self._ts, self._vals = array(self._ts.typecode, self._ts), array("d", self._vals)
            return
        head = self._head
        self._ts[head] = offset
        self._vals[head] = value
        self._head = (head + 1) % self._capacity

    def points(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Copies of all retained points, oldest written first."""
        ts = self._raw_ts()
        vals = np.frombuffer(self._vals, dtype=np.float64) if self._vals else np.zeros(0, dtype=np.float64)
        if self._head == 0:
            return self._absolute(ts), vals.copy()
        return self._absolute(np.concatenate([ts[self._head :], ts[: self._head]])), np.concatenate(
            [vals[self._head :], vals[: self._head]]
        )

    def _raw_ts(self) -> npt.NDArray[np.int64] | npt.NDArray[np.int32]:
        if not self._ts:
            return np.zeros(0, dtype=np.int64)
        if self._ts.typecode == "i":
            return np.frombuffer(self._ts, dtype=np.int32)
        return np.frombuffer(self._ts, dtype=np.int64)

    def _absolute(self, raw: npt.NDArray[np.int64] | npt.NDArray[np.int32]) -> npt.NDArray[np.int64]:
        """A new int64 array of absolute ms from stored timestamps."""
        out = raw.astype(np.int64)
        if self._base:
            out += self._base
        return out

    def window(self, start_ms: int, end_ms: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Points with start_ms ≤ t ≤ end_ms, in timestamp order (stable: write order among equal times)."""
        if self._run >= len(self._ts):
            return self._ordered_window(start_ms, end_ms)
        ts, vals = self.points()
        mask = (ts >= start_ms) & (ts <= end_ms)
        ts, vals = ts[mask], vals[mask]
        order = np.argsort(ts, kind="stable")
        return ts[order], vals[order]

    def _ordered_window(
        self, start_ms: int, end_ms: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """``window`` of an ordered series: its two physical runs ([head:], then [:head]) are each sorted."""
        raw_ts, n, head, base = self._ts, len(self._ts), self._head, self._base
        lo_key, hi_key = start_ms - base, end_ms - base
        parts: list[tuple[int, int]] = []
        for lo, hi in ((head, n), (0, head)) if head else ((0, n),):
            a = bisect_left(raw_ts, lo_key, lo, hi)
            b = bisect_right(raw_ts, hi_key, a, hi)
            if a < b:
                parts.append((a, b))
        if not parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        ts = self._raw_ts()
        vals = np.frombuffer(self._vals, dtype=np.float64)
        if len(parts) == 1:
            a, b = parts[0]
            return self._absolute(ts[a:b]), vals[a:b].copy()
        return (
            self._absolute(np.concatenate([ts[a:b] for a, b in parts])),
            np.concatenate([vals[a:b] for a, b in parts]),
        )

    def window_avg(self, start_ms: int, end_ms: int) -> float | None:
        """``avg`` of ``window(start_ms, end_ms)``'s values (the same float64 running sum in timestamp order),
        without building the window arrays when the series is ordered; None when no point is in it."""
        raw_ts, n, head = self._ts, len(self._ts), self._head
        if self._run < n:
            vals = self.window(start_ms, end_ms)[1]
        else:
            # The older run [head:n], then the newer run [0:head]; each sorted (offsets from the base).
            lo_key, hi_key = start_ms - self._base, end_ms - self._base
            a1 = bisect_left(raw_ts, lo_key, head, n)
            b1 = bisect_right(raw_ts, hi_key, a1, n)
            a2 = bisect_left(raw_ts, lo_key, 0, head) if head else 0
            b2 = bisect_right(raw_ts, hi_key, a2, head) if head else 0
            view = np.frombuffer(self._vals, dtype=np.float64) if n else np.zeros(0, dtype=np.float64)
            if a2 >= b2:
                vals = view[a1:b1]
            elif a1 >= b1:
                vals = view[a2:b2]
            else:
                vals = np.concatenate((view[a1:b1], view[a2:b2]))
        n_points = int(vals.shape[0])
        if n_points == 0:
            return None
        return float(vals.cumsum(dtype=np.float64)[-1]) / n_points
