"""koordlet metric cache (docs/rules/koordlet.md#metric-cache): in-memory bounded time series per (metric
kind, labels) with avg / percentile / last / count queries over inclusive millisecond windows.

Imports: standard library, numpy, and the submodules of this package.
(The `aggregate` function is not re-exported here: it would shadow the `aggregate` submodule.)
"""

from agent.metriccache.aggregate import (
    AggregationType,
    EmptyInputError,
    avg,
    count,
    is_cold_start,
    last,
    percentile,
    percentile_index,
)
from agent.metriccache.cache import CacheConfig, MetricCache, Result
from agent.metriccache.kinds import KINDS, LabelSetError, MetricCacheError, MetricKind, UnknownKindError
from agent.metriccache.sample import Sample, SampleBatch, SeriesRef

__all__ = [
    "KINDS",
    "AggregationType",
    "CacheConfig",
    "EmptyInputError",
    "LabelSetError",
    "MetricCache",
    "MetricCacheError",
    "MetricKind",
    "Result",
    "Sample",
    "SampleBatch",
    "SeriesRef",
    "UnknownKindError",
    "avg",
    "count",
    "is_cold_start",
    "last",
    "percentile",
    "percentile_index",
]
