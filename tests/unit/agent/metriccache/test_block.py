"""The vectorised batch write (SeriesPool / SeriesBlock rows) against the point-by-point Sample path:
random rounds over a churning set of series (drops, the series-count bound, out-of-order and weeks-apart
timestamps, retention changes) leave both caches with the same series, points, recency order and
window answers; freed rows are reused without a stale ref writing into them."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.metriccache import CacheConfig, MetricCache, Sample, SampleBatch, SeriesRef
from agent.metriccache.block import ROW_STRIDE, SeriesBlock, SeriesPool, rows_per_block

NOW_MS = 1_790_000_000_000
DAY_MS = 86_400_000
UIDS = [f"u{i}" for i in range(12)]


def _snapshot(cache: MetricCache) -> list[tuple[object, list[int], list[float]]]:
    return [(key, ts.tolist(), vals.tolist()) for key, ts, vals in cache.export()]


round_st = st.lists(
    st.tuples(
        st.sampled_from(UIDS),
        st.sampled_from([0, 1, 1, 1, 2, -3, 40 * DAY_MS]),  # step from the series' last time (ms × 1000)
        st.floats(-1e6, 1e6),
    ),
    max_size=14,
)
op_st = st.one_of(
    st.tuples(st.just("round"), round_st),
    st.tuples(st.just("drop"), st.sampled_from(UIDS)),
    st.tuples(st.just("retention"), st.integers(1, 9)),
    st.tuples(st.just("again"), st.floats(-1e6, 1e6)),  # the last round's refs again: the known-rows path
)


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(op_st, max_size=25), max_series=st.integers(3, 30), capacity=st.integers(1, 6))
def test_batches_store_what_point_by_point_writes_store(
    ops: list[tuple[str, object]], max_series: int, capacity: int
) -> None:
    _drive(ops, max_series, capacity)


def _drive(ops: list[tuple[str, object]], max_series: int, capacity: int) -> None:
    def config(node_seconds: float) -> CacheConfig:
        return CacheConfig(
            retention_seconds=node_seconds, entity_retention_seconds=capacity, max_series=max_series
        )

    keyed, plain = MetricCache(config(6)), MetricCache(config(6))
    refs = {u: SeriesRef("pod_cpu_usage", {"pod_uid": u}) for u in UIDS}
    last = dict.fromkeys(UIDS, NOW_MS)
    previous: list[tuple[str, int, float]] = []
    for op, arg in ops:
        if op == "again":
            op, arg = "round", [(uid, 1, arg) for uid, _, _ in previous]
        if op == "round":
            batch, samples = SampleBatch(), []
            previous = arg  # type: ignore[assignment]
            for uid, step, value in arg:  # type: ignore[union-attr]
                ts = last[uid] + (step * 1000 if abs(step) < DAY_MS else step)
                last[uid] = ts
                batch.add(refs[uid], ts, value)
                samples.append(Sample("pod_cpu_usage", {"pod_uid": uid}, ts, value))
            if len(batch) % 2:  # odd-sized rounds go in as numpy arrays (SampleBatch.from_arrays)
                batch = SampleBatch.from_arrays(
                    batch.refs,
                    np.array(batch.timestamps, dtype=np.int64),
                    np.array(batch.values, dtype=np.float64),
                )
            keyed.append(batch)
            plain.append(samples)
        elif op == "drop":
            assert keyed.drop({"pod_uid": arg}) == plain.drop({"pod_uid": arg})  # type: ignore[dict-item]
        else:
            keyed.set_entity_retention(float(arg))  # type: ignore[arg-type]
            plain.set_entity_retention(float(arg))  # type: ignore[arg-type]
        assert _snapshot(keyed) == _snapshot(plain)
        assert keyed.series_keys() == plain.series_keys()
        assert keyed.evicted_series == plain.evicted_series
    for uid in UIDS:
        labels = {"pod_uid": uid}
        lo, hi = last[uid] - 4000, last[uid]
        a, b = keyed.query("pod_cpu_usage", labels, lo, hi), plain.query("pod_cpu_usage", labels, lo, hi)
        assert a.timestamps.tolist() == b.timestamps.tolist() and a.values.tolist() == b.values.tolist()
        assert keyed.window_avgs("pod_cpu_usage", [labels], lo, hi) == [a.avg() if a.count() else None]


def test_freed_rows_are_reused_and_stale_refs_rebind() -> None:
    cache = MetricCache(CacheConfig(capacity_override=4))
    a, b = SeriesRef("pod_cpu_usage", {"pod_uid": "a"}), SeriesRef("pod_cpu_usage", {"pod_uid": "b"})
    batch = SampleBatch()
    batch.add(a, 1, 1.0)
    cache.append(batch)
    row_a = a.gid
    assert cache.drop({"pod_uid": "a"}) == 1
    batch = SampleBatch()
    batch.add(b, 2, 2.0)
    cache.append(batch)
    assert b.gid == row_a  # the freed row, emptied
    assert cache.query("pod_cpu_usage", {"pod_uid": "b"}, 0, 9).values.tolist() == [2.0]
    batch = SampleBatch()
    batch.add(a, 3, 3.0)  # a's binding is stale: a new series, not a write into b's row
    cache.append(batch)
    assert cache.query("pod_cpu_usage", {"pod_uid": "b"}, 0, 9).values.tolist() == [2.0]
    assert cache.query("pod_cpu_usage", {"pod_uid": "a"}, 0, 9).values.tolist() == [3.0]


def test_pool_spreads_rows_over_blocks_and_writes_each() -> None:
    pool = SeriesPool()
    rows = [pool.take(3) for _ in range(rows_per_block(3) + 2)]
    assert len(pool.blocks) == 2 and rows[-1][0].index == 1
    gids = np.array([b.index * ROW_STRIDE + r for b, r in rows], dtype=np.int64)
    n = gids.shape[0]
    pool.append(gids, np.full(n, 7, dtype=np.int64), np.arange(n, dtype=np.float64), np.arange(n))
    for i, (block, row) in enumerate(rows):
        assert int(block.count[row]) == 1 and block.vals[row, 0] == float(i)


def test_block_widens_only_when_no_int32_base_fits() -> None:
    block = SeriesBlock(4, 2)
    r0, r1 = block.take(), block.take()
    assert r0 is not None and r1 is not None
    block.append(r0, NOW_MS, 1.0)
    block.append(r1, NOW_MS + 20 * DAY_MS, 2.0)  # both fit around one base
    assert block.ts.dtype == np.int32
    block.append(r1, NOW_MS + 30 * DAY_MS, 3.0)  # r0's point is 30 days older: no int32 base holds both
    assert block.ts.dtype == np.int64
    assert block.absolute(block.ts[r0, :1]).tolist() == [NOW_MS]
    assert block.absolute(block.ts[r1, :2]).tolist() == [NOW_MS + 20 * DAY_MS, NOW_MS + 30 * DAY_MS]
