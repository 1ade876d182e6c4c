"""One time series of the metric cache: a fixed-capacity ring buffer of (timestamp ms int64, value
float64) held in numpy arrays, growing by doubling up to its capacity, then overwriting the oldest
point. Not thread-safe on its own: the cache serialises access.

Imports: standard library, numpy.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

INITIAL_ALLOCATION = 64


class RingSeries:
    """Bounded ring buffer of points in write order."""

    __slots__ = ("_capacity", "_head", "_size", "_ts", "_vals")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"series capacity must be ≥ 1, got {capacity}")
        self._capacity = capacity
        alloc = min(capacity, INITIAL_ALLOCATION)
        self._ts: npt.NDArray[np.int64] = np.zeros(alloc, dtype=np.int64)
        self._vals: npt.NDArray[np.float64] = np.zeros(alloc, dtype=np.float64)
        self._head = 0  # index of the oldest point once the buffer is full (wrapped)
        self._size = 0

    @classmethod
    def from_points(
        cls, capacity: int, timestamps: npt.NDArray[np.int64], values: npt.NDArray[np.float64]
    ) -> RingSeries:
        """A series holding the newest ``capacity`` of the given points (in the given order)."""
        series = cls(capacity)
        ts = np.asarray(timestamps, dtype=np.int64)[-capacity:]
        vals = np.asarray(values, dtype=np.float64)[-capacity:]
        if ts.shape[0] > series._ts.shape[0]:
            series._ts = ts.copy()
            series._vals = vals.copy()
        else:
            series._ts[: ts.shape[0]] = ts
            series._vals[: ts.shape[0]] = vals
        series._size = int(ts.shape[0])
        return series

    @property
    def capacity(self) -> int:
        return self._capacity

    def __len__(self) -> int:
        return self._size

    @property
    def allocated(self) -> int:
        """Number of point slots currently allocated (≤ capacity)."""
        return int(self._ts.shape[0])

    def append(self, timestamp_ms: int, value: float) -> None:
        """Add a point, overwriting the oldest one when the series is at capacity."""
        if self._size < self._capacity:
            if self._size == self._ts.shape[0]:
                new_alloc = min(self._capacity, 2 * self._size)
                self._ts = np.resize(self._ts, new_alloc)
                self._vals = np.resize(self._vals, new_alloc)
            self._ts[self._size] = timestamp_ms
            self._vals[self._size] = value
            self._size += 1
            return
        self._ts[self._head] = timestamp_ms
        self._vals[self._head] = value
        self._head = (self._head + 1) % self._capacity

    def points(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Copies of all retained points, oldest written first."""
        if self._size < self._capacity or self._head == 0:
            return self._ts[: self._size].copy(), self._vals[: self._size].copy()
        order = np.r_[self._head : self._capacity, 0 : self._head]
        return self._ts[order], self._vals[order]

    def window(self, start_ms: int, end_ms: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Points with start_ms ≤ t ≤ end_ms, in timestamp order (stable: write order among equal times)."""
        ts, vals = self.points()
        mask = (ts >= start_ms) & (ts <= end_ms)
        ts, vals = ts[mask], vals[mask]
        order = np.argsort(ts, kind="stable")
        return ts[order], vals[order]
