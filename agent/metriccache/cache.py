"""The koordlet metric cache (docs/rules/koordlet.md#metric-cache): thread-safe in-memory store of time series
keyed by (metric kind, label values), each a bounded ring buffer (series.py), with a bound on the number of
series (least-recently-written evicted beyond it) and explicit `drop` for deleted pods/containers,
so memory stays bounded whatever the pod churn.

A query selects the series of one kind whose labels equal the given (registered) subset, pools their
points in `[start_ms, end_ms]` (both inclusive) into a `Result`, series ordered by their sorted label
values (like a TSDB series set), each series' points in timestamp order.

Collectors write either ``Sample`` lists or, for the per-tick bulk, a ``SampleBatch`` of ``SeriesRef``
handles (sample.py): a ref is validated and bound to its ring buffer once; a batch of bound refs is then
written into the series' shared blocks (block.py) with a few numpy operations. Recency for the eviction
bound is a write stamp per series (a counter per point), not a reordering per write.

``CacheConfig`` and ``Result`` live in result.py (re-exported here).

Imports: standard library, numpy, agent.metriccache.{aggregate,block,kinds,result,sample,series}.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from agent.metriccache.aggregate import FloatArray, IntArray
from agent.metriccache.block import SeriesPool
from agent.metriccache.kinds import (
    MetricCacheError,
    validate_query_labels,
    validate_sample_labels,
)
from agent.metriccache.result import (
    DEFAULT_COLLECT_INTERVAL_SECONDS,
    DEFAULT_MAX_SERIES,
    DEFAULT_RETENTION_SECONDS,
    CacheConfig,
    Result,
)
from agent.metriccache.sample import Sample, SampleBatch, SeriesKey, SeriesRef
from agent.metriccache.series import RingSeries

__all__ = [
    "DEFAULT_COLLECT_INTERVAL_SECONDS",
    "DEFAULT_MAX_SERIES",
    "DEFAULT_RETENTION_SECONDS",
    "CacheConfig",
    "MetricCache",
    "Result",
    "Sample",
    "SampleBatch",
    "SeriesKey",
    "SeriesRef",
]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


_FLOAT: frozenset[type] = frozenset({float})
_INT: frozenset[type] = frozenset({int})
_MAX_LAYOUTS = 64


def _series_key(kind: str, labels: Mapping[str, str]) -> SeriesKey:
    return kind, tuple(sorted(labels.items()))


def _check_point(s: Sample) -> tuple[int, float]:
    ts0, v0 = s.timestamp_ms, s.value
    # Fast path for what collectors write (a plain int and a plain float); the checks below cover the rest.
    if type(ts0) is int and type(v0) is float and INT64_MIN <= ts0 <= INT64_MAX:
        return ts0, v0
    if isinstance(s.timestamp_ms, bool) or not isinstance(s.timestamp_ms, int | np.integer):
        raise MetricCacheError(f"metric {s.kind}: timestamp must be an int (ms), got {s.timestamp_ms!r}")
    ts = int(s.timestamp_ms)
    if not INT64_MIN <= ts <= INT64_MAX:
        raise MetricCacheError(f"metric {s.kind}: timestamp {ts} out of int64 range")
    if isinstance(s.value, bool) or not isinstance(s.value, int | float | np.integer | np.floating):
        raise MetricCacheError(f"metric {s.kind}: value must be a number, got {s.value!r}")
    return ts, float(s.value)


class MetricCache:
    """Thread-safe bounded in-memory metric store."""

    def __init__(self, config: CacheConfig | None = None) -> None:
        self._config = config or CacheConfig()
        self._lock = threading.Lock()
        self._series: dict[SeriesKey, RingSeries] = {}
        self._pool = SeriesPool()
        # Write stamps: every point written gets the next one, so the series with the smallest stamp is
        # the least recently written; restored series get ever smaller negative ones (older than any write).
        self._stamp = 0
        self._restore_stamp = -1
        self._by_kind: dict[str, set[SeriesKey]] = {}
        self._evicted = 0
        # (kind, labels as given) → validated series key: collectors write the same label sets every
        # tick, so validation and sorting happen once per series. Bounded: cleared when it grows past
        # a multiple of the series bound (pods come and go).
        self._key_memo: dict[tuple[str, tuple[tuple[str, str], ...]], SeriesKey] = {}
        # SeriesRef bindings are valid while they hold this token; renewed whenever series are removed.
        self._token = object()
        # (round size, id of its first ref) → (the round's refs, the token they were bound under, their rows):
        # collectors write the same refs in the same order every tick.
        self._layouts: dict[tuple[int, int], tuple[list[SeriesRef], object, IntArray]] = {}
        # (kind, label names) of queries already validated → whether they name every label of the kind.
        self._query_memo: dict[tuple[str, tuple[str, ...]], bool] = {}

    @property
    def config(self) -> CacheConfig:
        return self._config

    def series_count(self) -> int:
        with self._lock:
            return len(self._series)

    @property
    def evicted_series(self) -> int:
        """Series evicted so far because of the series-count bound."""
        return self._evicted

    def series_keys(self) -> list[SeriesKey]:
        """Keys of stored series, least recently written first."""
        with self._lock:
            return [key for key, _ in self._by_recency()]

    def _by_recency(self) -> list[tuple[SeriesKey, RingSeries]]:
        return sorted(self._series.items(), key=lambda item: item[1].last_write_stamp)

    def append(self, samples: Iterable[Sample]) -> None:
        """Store a batch; if any sample is invalid nothing is stored (MetricCacheError)."""
        if isinstance(samples, SampleBatch) and self._append_batch(samples):
            return
        checked: list[tuple[SeriesKey, int, float]] = []
        memo = self._key_memo
        for s in samples:
            raw = (s.kind, tuple(s.labels.items()))
            key = memo.get(raw)
            if key is None:
                validate_sample_labels(s.kind, s.labels)
                key = _series_key(s.kind, s.labels)
                if len(memo) >= 4 * self._config.max_series:
                    memo.clear()
                memo[raw] = key
            ts, value = _check_point(s)
            checked.append((key, ts, value))
        with self._lock:
            for key, ts, value in checked:
                series = self._series.get(key)
                if series is None:
                    series = self._create(key)
                series.append(ts, value, self._stamp)
                self._stamp += 1

    def _append_batch(self, batch: SampleBatch) -> bool:
        """The keyed path; False (nothing stored) when a point needs the generic path (conversion, error)."""
        refs = batch.refs
        if not refs:
            return True
        arrays = batch.arrays
        if arrays is not None:  # already int64 ms and float64 values (checked, not converted)
            ts_array, values_array = arrays
            n = len(refs)
            if not (ts_array.dtype == np.int64 and values_array.dtype == np.float64):
                return False
            if ts_array.shape != (n,) or values_array.shape != (n,):
                return False
            return self._append_arrays(refs, ts_array, values_array)
        stamps, values = batch.timestamps, batch.values
        if not (set(map(type, values)) <= _FLOAT and set(map(type, stamps)) <= _INT):
            return False
        try:
            ts_array = np.array(stamps, dtype=np.int64)
        except OverflowError:
            return False  # the generic path names the point out of int64 range
        return self._append_arrays(refs, ts_array, np.array(values, dtype=np.float64))

    def _append_arrays(self, refs: list[SeriesRef], ts_array: IntArray, values: FloatArray) -> bool:
        """The vectorised write of a checked round (int64 ms, float64 values)."""
        layout_key = (len(refs), id(refs[0]))
        with self._lock:
            layout = self._layouts.get(layout_key)
            if layout is not None and layout[1] is self._token and layout[0] == refs:
                # The same refs as this collector's last round (identity, element by element), all still
                # bound and distinct: their rows are known.
                self._write(layout[2], ts_array, values)
                return True
        for ref in [r for r in refs if r.key is None]:  # each ref's labels are validated once
            validate_sample_labels(ref.kind, ref.labels)
            ref.key = _series_key(ref.kind, ref.labels)
        with self._lock:
            token = self._token
            stale = [ref for ref in refs if ref.token is not token]
            if len(self._series) + len(stale) > self._config.max_series:
                # Creating series may evict others, maybe some written earlier in this very batch: point by
                # point, exactly in order.
                self._append_in_order(refs, ts_array.tolist(), values.tolist())
                return True
            for ref in stale:  # creates at most len(stale) series: no eviction
                if ref.token is not token:
                    self._bind(ref)
            gids = [ref.gid for ref in refs]
            if len(set(gids)) != len(gids):  # a series twice in one round: its points in order
                self._append_in_order(refs, ts_array.tolist(), values.tolist())
                return True
            gid_array = np.array(gids, dtype=np.int64)
            if len(self._layouts) >= _MAX_LAYOUTS:
                self._layouts.clear()
            self._layouts[layout_key] = (list(refs), self._token, gid_array)
            self._write(gid_array, ts_array, values)
        return True

    def _write(self, gids: IntArray, ts: IntArray, values: FloatArray) -> None:
        """Under the lock: one point into each of the (distinct, bound) rows ``gids``."""
        n, first = gids.shape[0], self._stamp
        self._stamp += n
        self._pool.append(gids, ts, values, np.arange(first, first + n, dtype=np.int64))

    def _append_in_order(self, refs: list[SeriesRef], stamps: Sequence[int], values: Sequence[float]) -> None:
        """Under the lock: the batch point by point (binding refs as they come)."""
        token = self._token
        for ref, ts, value in zip(refs, stamps, values, strict=True):
            series = ref.series
            if ref.token is not token or series is None:
                series = self._bind(ref)
                token = self._token  # creating a series may have evicted others
            series.append(ts, value, self._stamp)
            self._stamp += 1

    def _bind(self, ref: SeriesRef) -> RingSeries:
        """Under the lock: the series of ``ref`` (created when absent), remembered in the ref."""
        key = ref.key
        assert key is not None
        series = self._series.get(key)
        if series is None:
            series = self._create(key)
        ref.series, ref.token, ref.gid = series, self._token, series.gid
        return series

    def _create(self, key: SeriesKey) -> RingSeries:
        """Under the lock: a new series for ``key``; evicts the least recently written beyond the bound."""
        series = RingSeries.in_pool(self._pool, self._config.capacity_for(name for name, _ in key[1]))
        series.touch(self._stamp)  # the newest: never its own creation's victim
        self._stamp += 1
        self._series[key] = series
        self._by_kind.setdefault(key[0], set()).add(key)
        while len(self._series) > self._config.max_series:
            old_key = min(self._series, key=lambda k: self._series[k].last_write_stamp)
            self._series.pop(old_key).release()
            self._forget_kind(old_key)
            self._evicted += 1
            self._token = object()
        return series

    def _forget_kind(self, key: SeriesKey) -> None:
        keys = self._by_kind.get(key[0])
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_kind[key[0]]

    def _complete(self, kind: str, labels: Mapping[str, str]) -> bool:
        """Validate query labels (``MetricCacheError``); True when they name every label of ``kind``."""
        names = (kind, tuple(labels))
        complete = self._query_memo.get(names)
        if complete is None:
            complete = len(labels) == len(validate_query_labels(kind, labels).labels)
            if len(self._query_memo) < 1024:
                self._query_memo[names] = complete
        return complete

    def query(self, kind: str, labels: Mapping[str, str], start_ms: int, end_ms: int) -> Result:
        """Pool the points of every series of `kind` matching `labels` within [start_ms, end_ms]."""
        if self._complete(kind, labels):
            # Every label given (e.g. one pod's series): one direct lookup instead of a scan of the kind,
            # which would make a report over all pods quadratic in the pod count.
            key = _series_key(kind, labels)
            with self._lock:
                series = self._series.get(key)
                if series is None:
                    return Result()
                ts, vals = series.window(start_ms, end_ms)
            if not ts.shape[0]:
                return Result()
            # One series: its fresh arrays are the result (no concatenation); ts is in timestamp order.
            return Result(ts, vals, 1, int(ts[-1]) - int(ts[0]))
        result = Result()
        wanted = set(labels.items())
        with self._lock:
            keys = sorted(k for k in self._by_kind.get(kind, ()) if wanted.issubset(k[1]))
            for key in keys:
                ts, vals = self._series[key].window(start_ms, end_ms)
                if ts.shape[0]:
                    result.add_series(ts, vals)
        return result

    def window_avgs(
        self, kind: str, label_sets: Sequence[Mapping[str, str]], start_ms: int, end_ms: int
    ) -> list[float | None]:
        """For each complete label set of ``kind``: ``query(kind, labels, start_ms, end_ms).avg()``, or None
        where that query has no point (the reporter's per-pod averages, in one call)."""
        for labels in label_sets:
            if not self._complete(kind, labels):
                raise MetricCacheError(f"metric {kind}: window_avgs needs every label, got {sorted(labels)}")
        keys = [_series_key(kind, labels) for labels in label_sets]
        out: list[float | None] = []
        with self._lock:
            get = self._series.get
            for key in keys:
                series = get(key)
                out.append(None if series is None else series.window_avg(start_ms, end_ms))
        return out

    def drop(self, labels: Mapping[str, str], kind: str | None = None) -> int:
        """Remove every series (of `kind`, or of any kind) whose labels include all of `labels`.

        Returns the number of series removed. Empty `labels` with no `kind` is refused
        (it would drop everything).
        """
        if not labels and kind is None:
            raise MetricCacheError("drop needs labels or a kind")
        if kind is not None:
            validate_query_labels(kind, labels)
        wanted = set(labels.items())
        with self._lock:
            candidates = list(self._by_kind.get(kind, ())) if kind is not None else list(self._series)
            doomed = [k for k in candidates if wanted.issubset(k[1])]
            for key in doomed:
                self._series.pop(key).release()
                self._forget_kind(key)
            if doomed:
                self._token = object()
            return len(doomed)

    def set_retention(self, node_seconds: float | None = None, entity_seconds: float | None = None) -> None:
        """Change how long node series and pod/container/interface series keep points, resizing the
        existing series in place (windows of the NodeMetric spec can change at run time)."""
        config = self._config
        if node_seconds is not None:
            config = replace(config, retention_seconds=node_seconds)
        if entity_seconds is not None:
            config = replace(config, entity_retention_seconds=entity_seconds)
        with self._lock:
            if config == self._config:
                return
            self._config = config
            for key, series in self._series.items():
                capacity = config.capacity_for(name for name, _ in key[1])
                if series.capacity != capacity:
                    series.resize(capacity)  # a new row: bound refs must rebind
                    self._token = object()

    def set_entity_retention(self, seconds: float) -> None:
        self.set_retention(entity_seconds=seconds)

    def export(self) -> list[tuple[SeriesKey, IntArray, FloatArray]]:
        """Every series with copies of its points (oldest written first), least recently written first."""
        with self._lock:
            return [(key, *series.points()) for key, series in self._by_recency()]

    def restore(self, items: Iterable[tuple[SeriesKey, IntArray, FloatArray]]) -> int:
        """Add previously exported series (labels validated like samples); returns the points stored.

        Meant for start-up, before collectors write: a series already present is left as it is.
        Points beyond a series' capacity keep only the newest.
        """
        stored = 0
        for (kind, labels), ts, vals in items:
            validate_sample_labels(kind, dict(labels))
            if ts.shape != vals.shape or ts.ndim != 1:
                raise MetricCacheError(f"metric {kind}: timestamps and values differ in shape")
            key: SeriesKey = (kind, tuple(sorted(labels)))
            with self._lock:
                if key in self._series or self._config.max_series <= len(self._series):
                    continue
                series = RingSeries.from_points(
                    self._config.capacity_for(name for name, _ in key[1]), ts, vals, self._pool
                )
                series.touch(self._restore_stamp)  # restored history is older than live writes
                self._restore_stamp -= 1
                self._series[key] = series
                self._by_kind.setdefault(kind, set()).add(key)
                stored += len(series)
        return stored
