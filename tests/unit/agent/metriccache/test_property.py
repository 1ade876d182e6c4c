"""Property: random appends (batches over a few series, small ring capacity) and random windows and
label subsets → the cache's result equals a brute-force reference over all appended-and-not-overwritten
(and not dropped) points (pooled in label order, timestamp order within a series)."""

from __future__ import annotations

import functools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.metriccache import CacheConfig, EmptyInputError, MetricCache, Sample

KIND = "container_cpi"
PODS = ("p1", "p2")
CONTAINERS = ("c1", "c2")
RES = ("cycle", "instruction")
CAPACITY = 3

label_sets = st.fixed_dictionaries(
    {
        "pod_uid": st.sampled_from(PODS),
        "container_id": st.sampled_from(CONTAINERS),
        "cpi_resource": st.sampled_from(RES),
    }
)
samples = st.builds(
    lambda labels, ts, v: Sample(KIND, labels, ts, v),
    label_sets,
    st.integers(0, 40),
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
)
queries = st.tuples(
    st.dictionaries(
        st.sampled_from(["pod_uid", "container_id", "cpi_resource"]), st.sampled_from(PODS + CONTAINERS + RES)
    ),
    st.integers(-5, 45),
    st.integers(-5, 45),
)


def reference(
    history: dict[tuple[tuple[str, str], ...], list[tuple[int, float]]],
    labels: dict[str, str],
    start: int,
    end: int,
) -> tuple[list[int], list[float], int, int]:
    ts_out: list[int] = []
    vals_out: list[float] = []
    n_series = 0
    trd = 0
    for key in sorted(history):
        if any(dict(key).get(k) != v for k, v in labels.items()):
            continue
        kept = history[key][-CAPACITY:]
        inwin = sorted((p for p in kept if start <= p[0] <= end), key=lambda p: p[0])
        if not inwin:
            continue
        n_series += 1
        ts_out += [p[0] for p in inwin]
        vals_out += [p[1] for p in inwin]
        trd = max(p[0] for p in inwin) - min(p[0] for p in inwin)
    return ts_out, vals_out, n_series, trd


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.one_of(st.lists(samples, min_size=1, max_size=6), st.sampled_from(PODS)), max_size=20),
    st.lists(queries, min_size=1, max_size=5),
)
def test_query_matches_brute_force(
    batches: list[list[Sample] | str], qs: list[tuple[dict[str, str], int, int]]
) -> None:
    cache = MetricCache(CacheConfig(capacity_override=CAPACITY))
    history: dict[tuple[tuple[str, str], ...], list[tuple[int, float]]] = {}
    for batch in batches:
        if isinstance(batch, str):  # the pod was deleted: drop all its series
            cache.drop({"pod_uid": batch})
            history = {k: v for k, v in history.items() if dict(k)["pod_uid"] != batch}
            continue
        cache.append(batch)
        for s in batch:
            history.setdefault(tuple(sorted(s.labels.items())), []).append((s.timestamp_ms, s.value))
    for labels, start, end in qs:
        r = cache.query(KIND, labels, start, end)
        ts, vals, n_series, trd = reference(history, labels, start, end)
        assert r.timestamps.tolist() == ts
        assert r.values.tolist() == vals
        assert r.series_count == n_series
        assert r.time_range_duration_ms == trd
        assert r.count() == len(vals)
        if not vals:
            for fn in (r.avg, r.last, functools.partial(r.percentile, 0.5)):
                try:
                    fn()
                except EmptyInputError:
                    continue
                raise AssertionError("expected EmptyInputError")
            continue
        running = 0.0
        for v in vals:
            running += v
        assert r.avg() == running / len(vals)
        best = 0
        for i, t in enumerate(ts):
            if t > ts[best]:
                best = i
        assert r.last() == vals[best]
        ordered = sorted(vals)
        for p in (0.5, 0.9, 0.95, 0.99):
            idx = max(int(np.float32(len(vals)) * np.float32(p)) - 1, 0)
            assert r.percentile(p) == ordered[idx]
