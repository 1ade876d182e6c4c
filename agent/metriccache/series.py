"""One time series of the metric cache: a fixed-capacity ring buffer of (timestamp ms int64, value
float64). Points live in ``array.array`` buffers (appending a Python scalar costs a fraction of a numpy
item assignment, and the collectors append ~1,000 points a second); queries view them as numpy arrays
without copying. Grows as points arrive up to its capacity, then overwrites the oldest point.
Not thread-safe on its own: the cache serialises access.

Imports: standard library, numpy.
"""

from __future__ import annotations

from array import array

import numpy as np
import numpy.typing as npt

INITIAL_ALLOCATION = 64  # kept for callers that size things by it; arrays grow geometrically anyway


class RingSeries:
    """Bounded ring buffer of points in write order."""

    __slots__ = ("_capacity", "_head", "_ts", "_vals")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"series capacity must be ≥ 1, got {capacity}")
        self._capacity = capacity
        self._ts: array[int] = array("q")
        self._vals: array[float] = array("d")
        self._head = 0  # index of the oldest point once the buffer is full (wrapped)

    @classmethod
    def from_points(
        cls, capacity: int, timestamps: npt.NDArray[np.int64], values: npt.NDArray[np.float64]
    ) -> RingSeries:
        """A series holding the newest ``capacity`` of the given points (in the given order)."""
        series = cls(capacity)
        ts = np.ascontiguousarray(np.asarray(timestamps, dtype=np.int64)[-capacity:])
        vals = np.ascontiguousarray(np.asarray(values, dtype=np.float64)[-capacity:])
        series._ts.frombytes(ts.tobytes())
        series._vals.frombytes(vals.tobytes())
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

    def append(self, timestamp_ms: int, value: float) -> None:
        """Add a point, overwriting the oldest one when the series is at capacity."""
        if len(self._ts) < self._capacity:
            self._ts.append(timestamp_ms)
            self._vals.append(value)
            return
        head = self._head
        self._ts[head] = timestamp_ms
        self._vals[head] = value
        self._head = (head + 1) % self._capacity

    def points(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Copies of all retained points, oldest written first."""
        ts = np.frombuffer(self._ts, dtype=np.int64) if self._ts else np.zeros(0, dtype=np.int64)
        vals = np.frombuffer(self._vals, dtype=np.float64) if self._vals else np.zeros(0, dtype=np.float64)
        if self._head == 0:
            return ts.copy(), vals.copy()
        return np.concatenate([ts[self._head :], ts[: self._head]]), np.concatenate(
            [vals[self._head :], vals[: self._head]]
        )

    def window(self, start_ms: int, end_ms: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Points with start_ms ≤ t ≤ end_ms, in timestamp order (stable: write order among equal times)."""
        ts, vals = self.points()
        mask = (ts >= start_ms) & (ts <= end_ms)
        ts, vals = ts[mask], vals[mask]
        order = np.argsort(ts, kind="stable")
        return ts[order], vals[order]
