"""What collectors hand the metric cache: ``Sample`` points, and the keyed batch path for the per-tick bulk.

A ``SeriesRef`` names one series (metric kind + label set) and is created once per pod/container lifetime
by the collector that writes it; the cache validates its labels once and binds it to the series' ring
buffer, so appending a point through it is an attribute check and a ring-buffer append, with no label
tuple, dict or ``Sample`` built per point. A ``SampleBatch`` holds one collector round as parallel lists
(ref, timestamp, value) and behaves as a read-only sequence of ``Sample`` (built on demand, for tests and
the generic path). ``MetricCache.append`` accepts either form with the same checks and errors.

Imports: standard library, numpy (the cache's ring-buffer type for annotations).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple, overload

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from agent.metriccache.series import RingSeries

__all__ = ["Sample", "SampleBatch", "SeriesKey", "SeriesRef"]

SeriesKey = tuple[str, tuple[tuple[str, str], ...]]


class Sample(NamedTuple):
    """One point of metric `kind` with its property labels (a NamedTuple: collectors create ~1,000 a
    second and a frozen dataclass costs several times more to construct)."""

    kind: str
    labels: Mapping[str, str]
    timestamp_ms: int
    value: float


class SeriesRef:
    """A handle on the series (``kind``, ``labels``); ``labels`` must not change after creation.

    ``key``, ``token``, ``series`` and ``gid`` belong to the metric cache: the validated series key (None
    until validated), and the ring buffer it is bound to (and that buffer's row id), valid while ``token``
    is the cache's current token (the cache renews its token whenever it removes or moves series). A ref
    still bound to a removed series keeps that (released) series object until it is rebound (its next
    append) or dropped with its collector's state.
    """

    __slots__ = ("gid", "key", "kind", "labels", "series", "token")

    def __init__(self, kind: str, labels: Mapping[str, str]) -> None:
        self.kind = kind
        self.labels = labels
        self.key: SeriesKey | None = None
        self.token: object | None = None
        self.series: RingSeries | None = None
        self.gid = -1  # the bound series' row in the cache's pool

    def __repr__(self) -> str:
        return f"SeriesRef({self.kind!r}, {dict(self.labels)!r})"


class SampleBatch(Sequence[Sample]):
    """One collector round: parallel lists of series refs, ms timestamps and values."""

    __slots__ = ("arrays", "refs", "timestamps", "values")

    def __init__(self) -> None:
        self.refs: list[SeriesRef] = []
        self.timestamps: list[int] = []
        self.values: list[float] = []
        self.arrays: tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]] | None = None
        """A round computed in numpy: (int64 ms, float64 values), in place of the two lists."""

    @classmethod
    def from_arrays(
        cls, refs: list[SeriesRef], timestamps: npt.NDArray[np.int64], values: npt.NDArray[np.float64]
    ) -> SampleBatch:
        """A round already in numpy, handed to the cache without converting it back to Python numbers."""
        batch = cls()
        batch.refs = refs
        batch.arrays = (timestamps, values)
        return batch

    def _columns(self) -> tuple[Sequence[int], Sequence[float]]:
        if self.arrays is not None:
            return self.arrays[0].tolist(), self.arrays[1].tolist()
        return self.timestamps, self.values

    def add(self, ref: SeriesRef, timestamp_ms: int, value: float) -> None:
        self.refs.append(ref)
        self.timestamps.append(timestamp_ms)
        self.values.append(value)

    def __len__(self) -> int:
        return len(self.refs)

    def __iter__(self) -> Iterator[Sample]:
        stamps, values = self._columns()
        for ref, ts, value in zip(self.refs, stamps, values, strict=True):
            yield Sample(ref.kind, ref.labels, ts, value)

    @overload
    def __getitem__(self, index: int) -> Sample: ...

    @overload
    def __getitem__(self, index: slice) -> list[Sample]: ...

    def __getitem__(self, index: int | slice) -> Sample | list[Sample]:
        if isinstance(index, slice):
            return list(self)[index]
        ref = self.refs[index]
        stamps, values = self._columns()
        return Sample(ref.kind, ref.labels, stamps[index], values[index])

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence of the same samples (``batch == []`` on an empty round)."""
        if isinstance(other, SampleBatch | list | tuple):
            return list(self) == list(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"SampleBatch({list(self)!r})"
