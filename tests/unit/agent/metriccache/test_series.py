"""RingSeries keeps timestamps as int32 offsets from a moving base: whatever the timestamps (ms of today,
points ±25 days apart, out of order), every query answers exactly what a plain list of points would."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.metriccache import series as series_module
from agent.metriccache.series import RingSeries

NOW_MS = 1_790_000_000_000  # 2026
DAY_MS = 86_400_000


def _reference(
    points: list[tuple[int, float]], capacity: int, start: int, end: int
) -> list[tuple[int, float]]:
    kept = points[-capacity:]
    return sorted(((t, v) for t, v in kept if start <= t <= end), key=lambda p: p[0])


@settings(max_examples=300, deadline=None)
@given(
    capacity=st.integers(1, 40),
    steps=st.lists(st.tuples(st.integers(-40 * DAY_MS, 40 * DAY_MS), st.floats(-1e9, 1e9)), max_size=80),
    window=st.tuples(st.integers(-50 * DAY_MS, 50 * DAY_MS), st.integers(0, 100 * DAY_MS)),
    c_sum=st.booleans(),
)
def test_queries_match_a_plain_list(
    capacity: int, steps: list[tuple[int, float]], window: tuple[int, int], c_sum: bool
) -> None:
    """With the C window sum (agent.system.accel) and without it."""
    saved = series_module._window_sum
    if not c_sum:
        series_module._window_sum = None
    try:
        _check_queries(capacity, steps, window)
    finally:
        series_module._window_sum = saved


def _check_queries(capacity: int, steps: list[tuple[int, float]], window: tuple[int, int]) -> None:
    series = RingSeries(capacity)
    points = [(NOW_MS + dt, v) for dt, v in steps]
    for t, v in points:
        series.append(t, v)
    ts, vals = series.points()
    assert list(zip(ts.tolist(), vals.tolist(), strict=True)) == points[-capacity:]
    assert ts.dtype.name == "int64"
    start = NOW_MS + window[0]
    end = start + window[1]
    want = _reference(points, capacity, start, end)
    got_ts, got_vals = series.window(start, end)
    assert list(zip(got_ts.tolist(), got_vals.tolist(), strict=True)) == want
    avg = series.window_avg(start, end)
    if not want:
        assert avg is None
    else:
        assert avg == float(np.cumsum([v for _, v in want], dtype=np.float64)[-1]) / len(want)


def test_the_base_moves_forward_and_offsets_stay_int32() -> None:
    # A long-running agent: every 10 days a point, two kept; at day 30 the offset from the first base
    # (day 0) passes 24.8 days, and every retained point still fits around a new base.
    series = RingSeries(2)
    for day in (0, 10, 20, 30):
        series.append(NOW_MS + day * DAY_MS, float(day))
    assert series.timestamp_dtype == np.int32
    ts, vals = series.points()
    assert ts.tolist() == [NOW_MS + 20 * DAY_MS, NOW_MS + 30 * DAY_MS]
    assert vals.tolist() == [20.0, 30.0]


def test_points_too_far_apart_switch_to_int64() -> None:
    series = RingSeries(10)
    series.append(NOW_MS, 1.0)
    series.append(NOW_MS + 30 * DAY_MS, 2.0)  # both kept, 30 days apart: cannot share an int32 base
    assert series.timestamp_dtype == np.int64
    assert series.points()[0].tolist() == [NOW_MS, NOW_MS + 30 * DAY_MS]
    assert series.window(NOW_MS + 1, NOW_MS + 31 * DAY_MS)[0].tolist() == [NOW_MS + 30 * DAY_MS]
