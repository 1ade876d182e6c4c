"""The metric cache's value types: ``CacheConfig`` (how many points a series keeps) and ``Result`` (the
points a query pooled, with the docs/rules/koordlet.md#metric-cache aggregations over them).

Imports: standard library, numpy, agent.metriccache.aggregate.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from agent.metriccache.aggregate import (
    PERCENTILES,
    AggregationType,
    FloatArray,
    IntArray,
    percentile_index,
)
from agent.metriccache.aggregate import aggregate as _aggregate
from agent.metriccache.aggregate import avg as _avg
from agent.metriccache.aggregate import count as _count
from agent.metriccache.aggregate import is_cold_start as _is_cold_start
from agent.metriccache.aggregate import last as _last
from agent.metriccache.aggregate import percentile as _percentile
from agent.metriccache.aggregate import time_range_duration_ms as _time_range_duration_ms

__all__ = [
    "DEFAULT_COLLECT_INTERVAL_SECONDS",
    "DEFAULT_MAX_SERIES",
    "DEFAULT_RETENTION_SECONDS",
    "CacheConfig",
    "Result",
]

DEFAULT_RETENTION_SECONDS = 12 * 3600.0
DEFAULT_COLLECT_INTERVAL_SECONDS = 1.0
DEFAULT_MAX_SERIES = 8192

_ENTITY_LABELS = frozenset({"pod_uid", "container_id", "interface"})


@dataclass(frozen=True)
class CacheConfig:
    """Sizing: per-series capacity = ceil(retention / collect interval) points (at least 1).

    Series of pods, containers and network interfaces (``pod_uid``, ``container_id``, ``interface``) may
    keep a shorter history
    (``entity_retention_seconds``): the node keeps hours for its aggregated windows, while a pod only
    needs the NodeMetric aggregation window and the QoS windows, and there may be hundreds of pods.
    """

    retention_seconds: float = DEFAULT_RETENTION_SECONDS
    collect_interval_seconds: float = DEFAULT_COLLECT_INTERVAL_SECONDS
    max_series: int = DEFAULT_MAX_SERIES
    capacity_override: int | None = None
    entity_retention_seconds: float | None = None

    @property
    def series_capacity(self) -> int:
        if self.capacity_override is not None:
            return self.capacity_override
        return max(1, int(np.ceil(self.retention_seconds / self.collect_interval_seconds)))

    @property
    def entity_series_capacity(self) -> int:
        if self.capacity_override is not None or self.entity_retention_seconds is None:
            return self.series_capacity
        return max(1, int(np.ceil(self.entity_retention_seconds / self.collect_interval_seconds)))

    def capacity_for(self, labels: Iterable[str]) -> int:
        """Capacity of a series with these label names."""
        names = set(labels)
        if names & _ENTITY_LABELS:
            return self.entity_series_capacity
        return self.series_capacity

    def __post_init__(self) -> None:
        if self.collect_interval_seconds <= 0 or self.retention_seconds <= 0:
            raise ValueError("retention and collect interval must be > 0")
        if self.max_series < 1:
            raise ValueError("max_series must be ≥ 1")
        if self.capacity_override is not None and self.capacity_override < 1:
            raise ValueError("capacity_override must be ≥ 1")
        if self.entity_retention_seconds is not None and self.entity_retention_seconds <= 0:
            raise ValueError("entity_retention_seconds must be > 0")


@dataclass
class Result:
    """Points pooled from all matching series, in storage order."""

    timestamps: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    values: FloatArray = field(default_factory=lambda: np.zeros(0, dtype=np.float64))
    series_count: int = 0
    time_range_duration_ms: int = 0
    """max − min timestamp of the last series added (0 when no series matched)."""

    _sorted: FloatArray | None = field(default=None, init=False, repr=False, compare=False)
    """The values sorted once for every percentile asked of this result (a report asks four)."""

    def add_series(self, timestamps: IntArray, values: FloatArray) -> None:
        self.timestamps = np.concatenate([self.timestamps, timestamps.astype(np.int64, copy=False)])
        self.values = np.concatenate([self.values, values.astype(np.float64, copy=False)])
        self._sorted = None
        self.series_count += 1
        self.time_range_duration_ms = _time_range_duration_ms(timestamps)

    @property
    def time_range_seconds(self) -> float:
        return self.time_range_duration_ms / 1000.0

    def count(self) -> int:
        return _count(self.values)

    def avg(self) -> float:
        return _avg(self.values)

    def last(self) -> float:
        return _last(self.timestamps, self.values)

    def percentile(self, p: float) -> float:
        return _percentile(self.values, np.float32(p))

    def aggregate(self, kind: AggregationType) -> float:
        p = PERCENTILES.get(kind)
        if p is None or not self.values.shape[0]:
            return _aggregate(kind, self.timestamps, self.values)
        if self._sorted is None or self._sorted.shape != self.values.shape:
            self._sorted = np.sort(self.values, kind="stable")
        return float(self._sorted[percentile_index(int(self.values.shape[0]), p)])  # as aggregate.percentile

    def is_cold_start(self, window_seconds: float) -> bool:
        """True when this result must be reported as empty for a window of that length (cold start,
        docs/rules/koordlet.md#reporter)."""
        return _is_cold_start(self.time_range_duration_ms, window_seconds)
