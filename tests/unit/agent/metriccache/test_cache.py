"""MetricCache: label-set validation and batch rollback, inclusive windows, pooling, ring overwrite,
series drop and the series-count bound, TimeRangeDuration of the last series, cold start, threads."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from agent.metriccache import (
    KINDS,
    CacheConfig,
    EmptyInputError,
    LabelSetError,
    MetricCache,
    MetricCacheError,
    Sample,
    UnknownKindError,
)
from agent.metriccache.aggregate import AggregationType
from agent.metriccache.series import RingSeries


def node_cpu(ts: int, v: float) -> Sample:
    return Sample("node_cpu_usage", {}, ts, v)


def pod_cpu(uid: str, ts: int, v: float) -> Sample:
    return Sample("pod_cpu_usage", {"pod_uid": uid}, ts, v)


def small(capacity: int = 8, max_series: int = 100) -> MetricCache:
    return MetricCache(CacheConfig(capacity_override=capacity, max_series=max_series))


def test_kind_table_label_sets() -> None:
    assert KINDS["node_cpu_usage"].labels == frozenset()
    assert KINDS["node_be"].labels == {"be_resource", "be_allocation"}
    assert KINDS["container_psi_cpu_full_supported"].labels == {"pod_uid", "container_id"}
    assert KINDS["container_psi"].labels == {
        "pod_uid",
        "container_id",
        "psi_resource",
        "psi_precision",
        "psi_degree",
    }
    assert KINDS["container_cpi"].labels == {"pod_uid", "container_id", "cpi_resource"}
    assert KINDS["resctrl_resource_mb"].labels == {"qos", "cache_id", "resctrl_mb_type"}
    assert KINDS["pod_gpu_memory_total"].labels == {"gpu_minor", "gpu_device_uuid", "pod_uid"}
    assert KINDS["container_memory_with_hot_page_usage"].labels == {"container_id"}
    assert KINDS["host_application_memory_cold_page_size"].labels == {"host_app_name"}
    assert KINDS["sys_numa_memory_usage"].labels == {"numa_node_id"}


def test_capacity_from_retention_and_interval() -> None:
    assert CacheConfig().series_capacity == 43_200
    assert CacheConfig(retention_seconds=60, collect_interval_seconds=7).series_capacity == 9
    assert CacheConfig(capacity_override=3).series_capacity == 3
    with pytest.raises(ValueError):
        CacheConfig(collect_interval_seconds=0)


def test_sample_label_set_must_be_exact() -> None:
    c = small()
    with pytest.raises(LabelSetError):
        c.append([Sample("pod_cpu_usage", {}, 1, 1.0)])
    with pytest.raises(LabelSetError):
        c.append([Sample("pod_cpu_usage", {"pod_uid": "a", "container_id": "c"}, 1, 1.0)])
    with pytest.raises(LabelSetError):
        c.append([Sample("node_cpu_usage", {"pod_uid": "a"}, 1, 1.0)])
    with pytest.raises(UnknownKindError):
        c.append([Sample("nope", {}, 1, 1.0)])
    assert c.series_count() == 0


def test_bad_sample_fails_whole_batch() -> None:
    c = small()
    c.append([node_cpu(1, 1.0)])
    batch = [
        node_cpu(2, 2.0),
        pod_cpu("a", 2, 5.0),
        Sample("pod_cpu_usage", {"pod_uid": "b", "x": "y"}, 2, 1.0),
    ]
    with pytest.raises(LabelSetError):
        c.append(batch)
    with pytest.raises(MetricCacheError):
        c.append([node_cpu(3, 3.0), Sample("node_cpu_usage", {}, 4.5, 1.0)])  # type: ignore[arg-type]
    with pytest.raises(MetricCacheError):
        c.append([node_cpu(3, 3.0), Sample("node_cpu_usage", {}, 4, "x")])  # type: ignore[arg-type]
    assert c.series_count() == 1
    r = c.query("node_cpu_usage", {}, 0, 10)
    assert r.count() == 1 and r.values.tolist() == [1.0]


def test_query_labels_subset_and_unregistered() -> None:
    c = small()
    c.append(
        [
            Sample("node_be", {"be_resource": "cpu", "be_allocation": "usage"}, 1, 100.0),
            Sample("node_be", {"be_resource": "cpu", "be_allocation": "request"}, 1, 300.0),
        ]
    )
    assert c.query("node_be", {}, 0, 10).count() == 2
    assert c.query("node_be", {"be_resource": "cpu"}, 0, 10).avg() == 200.0
    assert c.query("node_be", {"be_allocation": "request"}, 0, 10).last() == 300.0
    assert c.query("node_be", {"be_allocation": "real-limit"}, 0, 10).count() == 0
    with pytest.raises(LabelSetError):
        c.query("node_be", {"pod_uid": "a"}, 0, 10)
    with pytest.raises(UnknownKindError):
        c.query("nope", {}, 0, 10)


def test_window_ends_inclusive() -> None:
    c = small()
    c.append([node_cpu(t, float(t)) for t in (999, 1000, 1500, 2000, 2001)])
    r = c.query("node_cpu_usage", {}, 1000, 2000)
    assert r.timestamps.tolist() == [1000, 1500, 2000]
    assert r.last() == 2000.0
    assert c.query("node_cpu_usage", {}, 2000, 2000).values.tolist() == [2000.0]
    empty = c.query("node_cpu_usage", {}, 3000, 4000)
    assert empty.count() == 0 and empty.series_count == 0 and empty.time_range_duration_ms == 0
    with pytest.raises(EmptyInputError):
        empty.avg()
    with pytest.raises(EmptyInputError):
        empty.aggregate(AggregationType.P90)


def test_last_tie_first_encountered_in_storage_order() -> None:
    c = small()
    c.append([pod_cpu("b", 10, 2.0), pod_cpu("a", 10, 1.0), pod_cpu("a", 10, 1.5)])
    # Series ordered by labels: pod a's points first (write order kept among equal times).
    r = c.query("pod_cpu_usage", {}, 0, 100)
    assert r.values.tolist() == [1.0, 1.5, 2.0]
    assert r.last() == 1.0


def test_ring_overwrites_oldest() -> None:
    c = small(capacity=3)
    c.append([node_cpu(t, float(t)) for t in range(1, 6)])
    r = c.query("node_cpu_usage", {}, 0, 100)
    assert r.timestamps.tolist() == [3, 4, 5]
    s = RingSeries(200)
    for t in range(500):
        s.append(t, float(t))
    ts, vals = s.points()
    assert len(s) == 200 and s.allocated == 200
    assert ts.tolist() == list(range(300, 500)) and vals[0] == 300.0
    grow = RingSeries(10_000)
    grow.append(1, 1.0)
    assert grow.allocated == 1  # grows with the points, never beyond capacity
    with pytest.raises(ValueError):
        RingSeries(0)


def test_time_range_duration_of_last_series() -> None:
    c = small()
    c.append(
        [pod_cpu("a", 1000, 1.0), pod_cpu("a", 9000, 1.0), pod_cpu("b", 2000, 1.0), pod_cpu("b", 3000, 1.0)]
    )
    r = c.query("pod_cpu_usage", {}, 0, 10_000)
    assert r.series_count == 2
    assert r.time_range_duration_ms == 1000  # pod b's series is the last added, not 9000 − 1000
    assert c.query("pod_cpu_usage", {"pod_uid": "a"}, 0, 10_000).time_range_duration_ms == 8000
    # A series without points in the window is not added.
    assert c.query("pod_cpu_usage", {}, 5000, 10_000).time_range_duration_ms == 0


def test_cold_start_rule() -> None:
    c = small(capacity=1000)
    now = 1_000_000
    c.append([node_cpu(now - 60_000 * k, 1.0) for k in range(3)])  # covers 120 s
    window = 300
    r = c.query("node_cpu_usage", {}, now - window * 1000, now)
    assert r.time_range_seconds == 120.0
    assert r.is_cold_start(window)  # 120 < 150: the aggregated map stays empty
    c.append([node_cpu(now - 150_000, 1.0)])
    assert not c.query("node_cpu_usage", {}, now - window * 1000, now).is_cold_start(window)


def test_drop_series_of_deleted_pod() -> None:
    c = small()
    c.append(
        [
            pod_cpu("a", 1, 1.0),
            Sample("pod_memory_usage", {"pod_uid": "a"}, 1, 1.0),
            Sample("container_psi_cpu_full_supported", {"pod_uid": "a", "container_id": "c1"}, 1, 1.0),
            pod_cpu("b", 1, 2.0),
            node_cpu(1, 3.0),
        ]
    )
    assert c.drop({"pod_uid": "a"}) == 3
    assert c.series_count() == 2
    assert c.query("pod_cpu_usage", {"pod_uid": "a"}, 0, 10).count() == 0
    assert c.drop({"pod_uid": "b"}, kind="pod_memory_usage") == 0
    assert c.drop({}, kind="node_cpu_usage") == 1
    with pytest.raises(MetricCacheError):
        c.drop({})
    with pytest.raises(LabelSetError):
        c.drop({"pod_uid": "b"}, kind="node_cpu_usage")


def test_series_bound_evicts_least_recently_written() -> None:
    c = small(capacity=4, max_series=3)
    c.append([pod_cpu("a", 1, 1.0), pod_cpu("b", 1, 1.0), pod_cpu("c", 1, 1.0)])
    c.append([pod_cpu("a", 2, 1.0)])  # a becomes the most recently written
    c.append([pod_cpu("d", 2, 1.0)])  # evicts b
    uids = [dict(k[1])["pod_uid"] for k in c.series_keys()]
    assert uids == ["c", "a", "d"]
    assert c.evicted_series == 1
    assert c.query("pod_cpu_usage", {"pod_uid": "b"}, 0, 10).count() == 0
    # Churn of many pods keeps the count (and so the memory) bounded.
    for i in range(1000):
        c.append([pod_cpu(f"p{i}", i, 1.0)])
    assert c.series_count() == 3
    assert sum(1 for k in c.series_keys() if k[0] == "pod_cpu_usage") == 3


def test_concurrent_appends_and_queries() -> None:
    c = small(capacity=10_000)
    errors: list[BaseException] = []

    def writer(uid: str) -> None:
        try:
            for t in range(500):
                c.append([pod_cpu(uid, t, 1.0)])
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    def reader() -> None:
        try:
            for _ in range(200):
                r = c.query("pod_cpu_usage", {}, 0, 10_000)
                assert r.count() == 0 or r.avg() == 1.0
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(u,)) for u in "abcd"] + [threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    r = c.query("pod_cpu_usage", {}, 0, 10_000)
    assert r.count() == 2000
    assert np.all(r.values == 1.0)


def test_series_resize_keeps_the_newest_points() -> None:
    s = RingSeries(5)
    for t in range(8):  # wrapped: holds 3..7
        s.append(t, float(t))
    s.resize(3)
    assert s.points()[0].tolist() == [5, 6, 7] and s.capacity == 3
    s.resize(6)
    for t in range(8, 12):
        s.append(t, float(t))
    assert s.points()[0].tolist() == [6, 7, 8, 9, 10, 11]
    with pytest.raises(ValueError):
        s.resize(0)


def test_entity_retention_follows_the_aggregation_window() -> None:
    c = MetricCache(
        CacheConfig(retention_seconds=100, collect_interval_seconds=1, entity_retention_seconds=4)
    )
    for t in range(10):
        c.append([Sample("pod_cpu_usage", {"pod_uid": "u"}, t, float(t)), node_cpu(t, float(t))])
    assert c.query("pod_cpu_usage", {"pod_uid": "u"}, 0, 100).timestamps.tolist() == [6, 7, 8, 9]
    c.set_entity_retention(8)  # grows: new points are kept, up to 8
    for t in range(10, 16):
        c.append([Sample("pod_cpu_usage", {"pod_uid": "u"}, t, float(t))])
    assert c.query("pod_cpu_usage", {"pod_uid": "u"}, 0, 100).timestamps.tolist() == list(range(8, 16))
    c.set_entity_retention(2)  # shrinks: keeps the newest; node series untouched
    assert c.query("pod_cpu_usage", {"pod_uid": "u"}, 0, 100).timestamps.tolist() == [14, 15]
    assert c.query("node_cpu_usage", {}, 0, 100).count() == 10


def test_node_retention_resizes_node_series_only() -> None:
    c = MetricCache(CacheConfig(retention_seconds=5, collect_interval_seconds=1, entity_retention_seconds=3))
    for t in range(10):
        c.append([Sample("pod_cpu_usage", {"pod_uid": "u"}, t, float(t)), node_cpu(t, float(t))])
    c.set_retention(node_seconds=2)
    assert c.query("node_cpu_usage", {}, 0, 100).timestamps.tolist() == [8, 9]
    assert c.query("pod_cpu_usage", {"pod_uid": "u"}, 0, 100).timestamps.tolist() == [7, 8, 9]
    assert c.config.series_capacity == 2 and c.config.entity_series_capacity == 3
