"""Pure aggregations: avg, float32 nearest-rank-lower percentiles, last (ties), count, empty input,
time range of one series, the cold-start rule."""

from __future__ import annotations

import numpy as np
import pytest

from agent.metriccache.aggregate import (
    EMPTY_INPUT_MESSAGE,
    PERCENTILES,
    AggregationType,
    EmptyInputError,
    aggregate,
    avg,
    count,
    is_cold_start,
    last,
    percentile,
    percentile_index,
    time_range_duration_ms,
)


def f64(*xs: float) -> np.ndarray:
    return np.array(xs, dtype=np.float64)


def i64(*xs: int) -> np.ndarray:
    return np.array(xs, dtype=np.int64)


def test_avg_known_and_running_sum_order() -> None:
    assert avg(f64(1, 2, 3, 4)) == 2.5
    # Sequential float64 sum in storage order (not pairwise, not exact).
    vals = f64(1e16, 1.0, -1e16, 1.0)
    running = 0.0
    for v in vals.tolist():
        running += v
    assert avg(vals) == running / 4 == 0.25


def test_percentiles_known_series() -> None:
    vals = f64(*range(100, 0, -1))  # 1..100 unsorted
    assert percentile(vals, np.float32(0.5)) == 50.0
    assert percentile(vals, np.float32(0.9)) == 90.0
    # float32(100) * float32(0.95) rounds to exactly 95.0 in float32 (float64 would give 94.99…).
    assert percentile(vals, np.float32(0.95)) == 95.0
    assert percentile(vals, np.float32(0.99)) == 99.0
    # n < 1/p: the minimum
    assert percentile(f64(7, 3), np.float32(0.3)) == 3.0
    assert percentile(f64(5.0), np.float32(0.99)) == 5.0


@pytest.mark.parametrize("p", [0.5, 0.9, 0.95, 0.99])
def test_percentile_index_float32_reference_n_1_to_200(p: float) -> None:
    p32 = np.float32(p)
    assert PERCENTILES[AggregationType(f"p{round(p * 100)}")] == p32
    for n in range(1, 201):
        ref = max(int(np.multiply(np.float32(n), p32, dtype=np.float32)) - 1, 0)
        assert percentile_index(n, p32) == ref, n
        vals = f64(*np.random.default_rng(n).permutation(n).astype(float))
        assert percentile(vals, p32) == float(ref)  # values are 0..n-1


def test_percentile_index_differs_from_float64_product() -> None:
    # These are exactly the cases where a float64 product of the float32 constant would be one lower.
    for n, p in [(10, 0.9), (100, 0.9), (100, 0.95), (200, 0.95)]:
        p32 = np.float32(p)
        assert int(float(n) * float(p32)) - 1 == percentile_index(n, p32) - 1


def test_last_greatest_timestamp_and_ties() -> None:
    assert last(i64(1, 5, 3), f64(10, 50, 30)) == 50.0
    assert last(i64(1, 5, 5, 3), f64(10, 50, 51, 30)) == 50.0  # first encountered wins
    assert last(i64(9, 9), f64(2, 1)) == 2.0


def test_count_and_empty_input() -> None:
    empty_v = f64()
    empty_t = i64()
    assert count(empty_v) == 0
    assert aggregate(AggregationType.COUNT, empty_t, empty_v) == 0.0
    for kind in AggregationType:
        if kind is AggregationType.COUNT:
            continue
        with pytest.raises(EmptyInputError, match=EMPTY_INPUT_MESSAGE):
            aggregate(kind, empty_t, empty_v)
    assert str(EmptyInputError()) == "metric input is empty"


def test_aggregate_dispatch() -> None:
    ts, vals = i64(1, 2, 3, 4), f64(4, 3, 2, 1)
    assert aggregate(AggregationType.AVG, ts, vals) == 2.5
    assert aggregate(AggregationType.LAST, ts, vals) == 1.0
    assert aggregate(AggregationType.COUNT, ts, vals) == 4.0
    assert aggregate(AggregationType.P50, ts, vals) == 2.0
    assert aggregate(AggregationType.P99, ts, vals) == 3.0  # int(3.96) − 1 = 2


def test_time_range_duration_and_cold_start() -> None:
    assert time_range_duration_ms(i64()) == 0
    assert time_range_duration_ms(i64(5000, 1000, 3000)) == 4000
    # window 300 s: needs ≥ 150 s of coverage
    assert is_cold_start(149_999, 300)
    assert not is_cold_start(150_000, 300)
    assert is_cold_start(0, 1)
    assert not is_cold_start(0, 0)  # 0-length window: 0 < 0 is false
