"""The keyed append path (SeriesRef / SampleBatch) against the Sample path, the ordered-series window
against the generic one, and the reporter's batched window averages against ``query().avg()``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.metriccache import CacheConfig, MetricCache, MetricCacheError, Sample, SampleBatch, SeriesRef
from agent.metriccache.aggregate import avg
from agent.metriccache.series import RingSeries


def _batch(points: list[tuple[SeriesRef, int, float]]) -> SampleBatch:
    batch = SampleBatch()
    for ref, ts, value in points:
        batch.add(ref, ts, value)
    return batch


def test_batch_is_a_sequence_of_samples() -> None:
    ref = SeriesRef("pod_cpu_usage", {"pod_uid": "a"})
    batch = _batch([(ref, 5, 1.5)])
    assert batch == [Sample("pod_cpu_usage", {"pod_uid": "a"}, 5, 1.5)] and batch[0].value == 1.5
    assert len(batch) == 1 and list(batch[:1]) == list(batch) and SampleBatch() == []


def test_batch_and_samples_store_the_same() -> None:
    keyed, plain = (
        MetricCache(CacheConfig(capacity_override=4)),
        MetricCache(CacheConfig(capacity_override=4)),
    )
    refs = [SeriesRef("pod_cpu_usage", {"pod_uid": u}) for u in ("a", "b")]
    for t in range(7):
        points = [(ref, t * 1000, float(t + i)) for i, ref in enumerate(refs)]
        keyed.append(_batch(points))
        plain.append([Sample(r.kind, r.labels, ts, v) for r, ts, v in points])
    assert [(k, list(ts), list(v)) for k, ts, v in keyed.export()] == [
        (k, list(ts), list(v)) for k, ts, v in plain.export()
    ]


def test_batch_with_a_bad_ref_stores_nothing() -> None:
    cache = MetricCache()
    good = SeriesRef("pod_cpu_usage", {"pod_uid": "a"})
    bad = SeriesRef("pod_cpu_usage", {"container_id": "a"})
    with pytest.raises(MetricCacheError, match="label set mismatch"):
        cache.append(_batch([(good, 1, 1.0), (bad, 1, 1.0)]))
    assert cache.series_count() == 0
    with pytest.raises(MetricCacheError, match="value must be a number"):
        cache.append(_batch([(good, 1, "x")]))  # type: ignore[arg-type]
    cache.append(_batch([(good, 1, 2)]))  # an int value takes the generic path and is converted
    assert cache.query("pod_cpu_usage", {"pod_uid": "a"}, 0, 5).values.tolist() == [2.0]


def test_refs_rebind_after_drop_and_eviction() -> None:
    cache = MetricCache(CacheConfig(capacity_override=8, max_series=2))
    a, b, c = (SeriesRef("pod_cpu_usage", {"pod_uid": u}) for u in "abc")
    cache.append(_batch([(a, 1, 1.0), (b, 1, 1.0)]))
    assert cache.drop({"pod_uid": "a"}) == 1
    cache.append(_batch([(a, 2, 2.0)]))  # a new series for a
    assert cache.query("pod_cpu_usage", {"pod_uid": "a"}, 0, 9).values.tolist() == [2.0]
    cache.append(_batch([(c, 3, 3.0)]))  # evicts b, the least recently written
    assert cache.evicted_series == 1
    cache.append(_batch([(b, 4, 4.0)]))
    assert cache.query("pod_cpu_usage", {"pod_uid": "b"}, 0, 9).values.tolist() == [4.0]


def _reference(
    points: list[tuple[int, float]], capacity: int, lo: int, hi: int
) -> tuple[list[int], list[float]]:
    kept = points[-capacity:]
    inside = [(t, v) for t, v in kept if lo <= t <= hi]
    inside.sort(key=lambda p: p[0])  # stable: write order among equal timestamps
    return [t for t, _ in inside], [v for _, v in inside]


@settings(max_examples=300, deadline=None)
@given(
    capacity=st.integers(1, 6),
    steps=st.lists(st.tuples(st.integers(-3, 4), st.floats(-1e3, 1e3)), max_size=20),
    lo=st.integers(-5, 60),
    width=st.integers(0, 40),
)
def test_window_equals_reference(capacity: int, steps: list[tuple[int, float]], lo: int, width: int) -> None:
    series = RingSeries(capacity)
    points: list[tuple[int, float]] = []
    t = 0
    for dt, value in steps:  # mostly forward, sometimes back in time
        t += dt
        series.append(t, value)
        points.append((t, value))
    ts, vals = series.window(lo, lo + width)
    assert (ts.tolist(), vals.tolist()) == _reference(points, capacity, lo, lo + width)
    expected = None if not vals.shape[0] else avg(vals)
    assert series.window_avg(lo, lo + width) == expected
    restored = RingSeries.from_points(capacity, *series.points())
    assert restored.window(lo, lo + width)[0].tolist() == ts.tolist()


def test_window_avgs_equal_query_avg() -> None:
    cache = MetricCache(CacheConfig(capacity_override=5))
    rng = np.random.default_rng(1)
    for t in range(9):
        cache.append([Sample("pod_cpu_usage", {"pod_uid": u}, t * 10, float(rng.random())) for u in "ab"])
    labels = [{"pod_uid": "a"}, {"pod_uid": "b"}, {"pod_uid": "zz"}]
    got = cache.window_avgs("pod_cpu_usage", labels, 45, 80)
    assert (
        got[:2] == [cache.query("pod_cpu_usage", one, 45, 80).avg() for one in labels[:2]] and got[2] is None
    )
    assert cache.window_avgs("pod_cpu_usage", labels, 1000, 2000) == [None, None, None]
    with pytest.raises(MetricCacheError):
        cache.window_avgs("container_psi", [{"pod_uid": "a"}], 0, 1)


@settings(max_examples=250, deadline=None)
@given(
    capacity=st.integers(1, 40),
    series=st.lists(
        st.lists(
            st.tuples(
                st.integers(0, 3),  # step to the next timestamp (0: equal times)
                st.sampled_from([0.0, -0.0, 1.5, -2.25, 1e16, 1e-3, 3.0, 0.1, float("nan")]),
            ),
            max_size=60,
        ),
        min_size=1,
        max_size=6,
    ),
    shuffled=st.booleans(),
    window=st.tuples(st.integers(-5, 60), st.integers(0, 60)),
)
def test_batched_window_avgs_equal_query_avg(
    capacity: int, series: list[list[tuple[int, float]]], shuffled: bool, window: tuple[int, int]
) -> None:
    """Many series in one block, wrapped rings, equal timestamps, −0.0 and NaN: the block-at-a-time
    averages are bit for bit what query().avg() gives (unordered series take the one-by-one path)."""
    cache = MetricCache(CacheConfig(capacity_override=capacity))
    for n, points in enumerate(series):
        t = 0
        stamps = []
        for step, _ in points:
            t += step
            stamps.append(t)
        if shuffled and n % 2:
            stamps.reverse()
        for ts, (_, value) in zip(stamps, points, strict=True):
            cache.append([Sample("pod_cpu_usage", {"pod_uid": f"u{n}"}, ts, value)])
    labels = [{"pod_uid": f"u{n}"} for n in range(len(series))]
    lo, width = window
    got = cache.window_avgs("pod_cpu_usage", labels, lo, lo + width)
    for one, mean in zip(labels, got, strict=True):
        result = cache.query("pod_cpu_usage", one, lo, lo + width)
        if not result.count():
            assert mean is None
        else:
            want = result.avg()
            assert mean is not None
            assert np.float64(mean).tobytes() == np.float64(want).tobytes()  # same bits: NaN and −0.0 too
