"""Pure aggregations of the metric cache (docs/rules/koordlet.md#metric-cache) and the reporter's cold-start
rule (docs/rules/koordlet.md#reporter).

Inputs are numpy arrays in storage order (series after series, each in timestamp order). `avg` is a
float64 running sum in storage order divided by n; percentiles are the nearest-rank *lower* index
`int(float32(n) × float32(p)) − 1` of the ascending sort (clamped ≥ 0), computed in float32 exactly
as upstream Go does; `last` is the value at the greatest timestamp (first encountered on ties).

Imports: standard library, numpy, agent.metriccache.kinds (error base class).
"""

from __future__ import annotations

import enum

import numpy as np
import numpy.typing as npt

from agent.metriccache.kinds import MetricCacheError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

EMPTY_INPUT_MESSAGE = "metric input is empty"


class EmptyInputError(MetricCacheError):
    """avg / percentile / last of no points."""

    def __init__(self) -> None:
        super().__init__(EMPTY_INPUT_MESSAGE)


class AggregationType(enum.Enum):
    """Aggregation types a query result can be reduced with."""

    AVG = "avg"
    P50 = "p50"
    P90 = "p90"
    P95 = "p95"
    P99 = "p99"
    LAST = "last"
    COUNT = "count"


PERCENTILES: dict[AggregationType, np.float32] = {
    AggregationType.P50: np.float32(0.5),
    AggregationType.P90: np.float32(0.9),
    AggregationType.P95: np.float32(0.95),
    AggregationType.P99: np.float32(0.99),
}


def count(values: FloatArray) -> int:
    """Number of points (0 on empty input, not an error)."""
    return int(values.shape[0])


def avg(values: FloatArray) -> float:
    """Arithmetic mean: float64 running (sequential) sum in storage order, divided by n."""
    n = int(values.shape[0])
    if n == 0:
        raise EmptyInputError()
    total = float(np.cumsum(values, dtype=np.float64)[-1])
    return total / n


def percentile_index(n: int, p: np.float32) -> int:
    """Index into the ascending sort: `int(float32(n) × p) − 1` with the product rounded in float32, ≥ 0."""
    product = np.float32(np.float32(n) * np.float32(p))
    return max(int(product) - 1, 0)


def percentile(values: FloatArray, p: np.float32) -> float:
    """Nearest-rank lower percentile `p` (a float32 constant) of the values."""
    n = int(values.shape[0])
    if n == 0:
        raise EmptyInputError()
    ordered = np.sort(values, kind="stable")
    return float(ordered[percentile_index(n, p)])


def last(timestamps: IntArray, values: FloatArray) -> float:
    """Value at the greatest timestamp; on equal timestamps the first encountered wins."""
    if values.shape[0] == 0:
        raise EmptyInputError()
    return float(values[int(np.argmax(timestamps))])


def aggregate(kind: AggregationType, timestamps: IntArray, values: FloatArray) -> float:
    """Reduce the points with aggregation `kind` (`count` returned as a float)."""
    if kind is AggregationType.AVG:
        return avg(values)
    if kind is AggregationType.LAST:
        return last(timestamps, values)
    if kind is AggregationType.COUNT:
        return float(count(values))
    return percentile(values, PERCENTILES[kind])


def time_range_duration_ms(timestamps: IntArray) -> int:
    """max − min timestamp (ms) of one series' points; 0 when there are none."""
    if timestamps.shape[0] == 0:
        return 0
    return int(timestamps.max()) - int(timestamps.min())


def is_cold_start(time_range_ms: int, window_seconds: float) -> bool:
    """Cold-start filter: the series covers less than half the window (float comparison).

    A True answer means the aggregated ResourceMap for that type is left empty
    (docs/rules/koordlet.md#reporter).
    """
    return time_range_ms / 1000.0 < 0.5 * float(window_seconds)
