"""Metric cache persistence (persist.save / persist.load, the daemon's CacheFile and its checkpoints),
MetricCache.export / restore, RingSeries.from_points and CacheConfig.entity_retention_seconds."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from agent.metriccache import CacheConfig, MetricCache, MetricCacheError, Sample
from agent.metriccache.aggregate import AggregationType
from agent.metriccache.persist import FORMAT_VERSION, CacheFile, PersistError, load, save
from agent.metriccache.series import RingSeries

NOW_MS = 1_714_564_800_000
HOUR_MS = 3_600_000
BIG_AGE = 10**12


def config(entity: float | None = None) -> CacheConfig:
    return CacheConfig(retention_seconds=100, collect_interval_seconds=1, entity_retention_seconds=entity)


def filled_cache(cfg: CacheConfig | None = None) -> MetricCache:
    cache = MetricCache(cfg or config())
    samples: list[Sample] = []
    # 150 points in a capacity-100 series: the ring wraps, the oldest 50 are gone.
    samples += [Sample("node_cpu_usage", {}, NOW_MS - 150_000 + 1000 * i, float(i % 17)) for i in range(150)]
    samples += [Sample("node_memory_usage", {}, NOW_MS - 10_000 + 1000 * i, 1e9 + i) for i in range(10)]
    for uid, base in (("pod-a", 0.5), ("pod-b", 2.0)):
        samples += [
            Sample("pod_cpu_usage", {"pod_uid": uid}, NOW_MS - 5000 + 1000 * i, base + i) for i in range(5)
        ]
    samples += [
        Sample(
            "container_psi",
            {
                "pod_uid": "pod-a",
                "container_id": "c1",
                "psi_resource": "cpu",
                "psi_precision": "avg10",
                "psi_degree": "some",
            },
            NOW_MS - 2000,
            0.25,
        ),
        Sample("node_numa_cpu_usage", {"numa_node_id": "1"}, NOW_MS - 3000, 3.5),
    ]
    cache.append(samples)
    return cache


QUERIES: list[tuple[str, dict[str, str]]] = [
    ("node_cpu_usage", {}),
    ("node_memory_usage", {}),
    ("pod_cpu_usage", {}),
    ("pod_cpu_usage", {"pod_uid": "pod-b"}),
    ("container_psi", {"container_id": "c1"}),
    ("node_numa_cpu_usage", {"numa_node_id": "1"}),
]


def assert_same_queries(a: MetricCache, b: MetricCache, start: int, end: int) -> None:
    for kind, labels in QUERIES:
        ra, rb = a.query(kind, labels, start, end), b.query(kind, labels, start, end)
        assert ra.count() > 0, kind
        np.testing.assert_array_equal(ra.timestamps, rb.timestamps)
        np.testing.assert_array_equal(ra.values, rb.values)
        assert ra.series_count == rb.series_count
        assert ra.time_range_duration_ms == rb.time_range_duration_ms
        for agg in (AggregationType.AVG, AggregationType.P90, AggregationType.LAST):
            assert ra.aggregate(agg) == rb.aggregate(agg)


# --- round trip ------------------------------------------------------------------------------------------
def test_save_load_round_trip_identical_queries(tmp_path: Path) -> None:
    original = filled_cache()
    path = tmp_path / "cache.npz"
    written = save(original, path)
    # 100 (wrapped) + 10 + 5 + 5 + 1 + 1
    assert written == 122
    restored = MetricCache(config())
    assert load(restored, path, NOW_MS, BIG_AGE) == 122
    assert restored.series_count() == original.series_count() == 6
    assert sorted(restored.series_keys()) == sorted(original.series_keys())
    assert_same_queries(original, restored, NOW_MS - HOUR_MS, NOW_MS)
    # the wrapped series kept exactly its newest 100 points
    ts = restored.query("node_cpu_usage", {}, 0, NOW_MS).timestamps
    assert ts[0] == NOW_MS - 100_000 and ts[-1] == NOW_MS - 1000 and ts.shape[0] == 100


def test_round_trip_of_empty_cache(tmp_path: Path) -> None:
    path = tmp_path / "empty.npz"
    assert save(MetricCache(), path) == 0
    cache = MetricCache()
    assert load(cache, path, NOW_MS, BIG_AGE) == 0
    assert cache.series_count() == 0


def test_save_creates_parent_dirs(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "cache.npz"
    assert save(filled_cache(), path) == 122
    assert path.is_file()


def test_load_drops_points_older_than_max_age_and_in_the_future(tmp_path: Path) -> None:
    cache = MetricCache()
    cache.append(
        [
            Sample("node_cpu_usage", {}, NOW_MS - 60_001, 1.0),  # too old
            Sample("node_cpu_usage", {}, NOW_MS - 60_000, 2.0),  # exactly max age: kept
            Sample("node_cpu_usage", {}, NOW_MS, 3.0),
            Sample("node_cpu_usage", {}, NOW_MS + 1, 4.0),  # after now: dropped
            Sample("pod_cpu_usage", {"pod_uid": "old"}, NOW_MS - 90_000, 5.0),  # whole series too old
        ]
    )
    path = tmp_path / "c.npz"
    save(cache, path)
    restored = MetricCache()
    assert load(restored, path, NOW_MS, 60_000) == 2
    r = restored.query("node_cpu_usage", {}, 0, NOW_MS + HOUR_MS)
    assert r.timestamps.tolist() == [NOW_MS - 60_000, NOW_MS]
    assert r.values.tolist() == [2.0, 3.0]
    assert restored.series_count() == 1  # the pod series had no point left: not created


def test_missing_file_loads_nothing(tmp_path: Path) -> None:
    cache = MetricCache()
    cache.append([Sample("node_cpu_usage", {}, NOW_MS, 1.0)])
    assert load(cache, tmp_path / "absent.npz", NOW_MS, BIG_AGE) == 0
    assert cache.series_count() == 1


# --- corrupt files -------------------------------------------------------------------------------------
def write_npz(path: Path, **arrays: np.ndarray) -> Path:
    with path.open("wb") as f:
        np.savez(f, **arrays)  # type: ignore[arg-type]
    return path


def keys_array(keys: object) -> np.ndarray:
    return np.frombuffer(json.dumps(keys).encode(), dtype=np.uint8)


def good_arrays() -> dict[str, np.ndarray]:
    return {
        "version": np.array([FORMAT_VERSION], dtype=np.int64),
        "keys": keys_array([["node_cpu_usage", []]]),
        "lengths": np.array([2], dtype=np.int64),
        "timestamps": np.array([NOW_MS - 1000, NOW_MS], dtype=np.int64),
        "values": np.array([1.0, 2.0]),
    }


def test_crafted_good_file_loads(tmp_path: Path) -> None:
    path = write_npz(tmp_path / "ok.npz", **good_arrays())
    cache = MetricCache()
    assert load(cache, path, NOW_MS, BIG_AGE) == 2
    assert cache.query("node_cpu_usage", {}, 0, NOW_MS).avg() == 1.5


@pytest.mark.parametrize("cut", [10, 100, 0.5, -22, -1])
def test_truncated_file_raises_persist_error_naming_file(tmp_path: Path, cut: float) -> None:
    path = tmp_path / "cache.npz"
    save(filled_cache(), path)
    data = path.read_bytes()
    n = int(len(data) * cut) if isinstance(cut, float) else cut
    path.write_bytes(data[:n])
    cache = MetricCache()
    with pytest.raises(PersistError, match=str(path)):
        load(cache, path, NOW_MS, BIG_AGE)
    assert cache.series_count() == 0


def test_garbage_file_raises_persist_error(tmp_path: Path) -> None:
    path = tmp_path / "cache.npz"
    path.write_bytes(b"this is not a numpy archive at all\n" * 10)
    with pytest.raises(PersistError, match=str(path)):
        load(MetricCache(), path, NOW_MS, BIG_AGE)


def test_wrong_version_raises_persist_error(tmp_path: Path) -> None:
    arrays = good_arrays()
    arrays["version"] = np.array([FORMAT_VERSION + 1], dtype=np.int64)
    path = write_npz(tmp_path / "v.npz", **arrays)
    with pytest.raises(PersistError, match=rf"{path}.*version {FORMAT_VERSION + 1}"):
        load(MetricCache(), path, NOW_MS, BIG_AGE)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"lengths": np.array([3], dtype=np.int64)}, "inconsistent"),
        ({"keys": keys_array([["node_cpu_usage", []], ["node_memory_usage", []]])}, "inconsistent"),
        ({"keys": keys_array([["no_such_kind", []]])}, "no_such_kind"),
        ({"keys": keys_array([["pod_cpu_usage", []]])}, "label set"),  # pod series without pod_uid
        ({"keys": np.frombuffer(b"{not json", dtype=np.uint8)}, "not a metric cache file"),
        ({"keys": keys_array([[]])}, "bad key"),
    ],
)
def test_bad_tables_raise_persist_error(tmp_path: Path, change: dict[str, np.ndarray], message: str) -> None:
    arrays = good_arrays()
    arrays.update(change)
    path = write_npz(tmp_path / "bad.npz", **arrays)
    with pytest.raises(PersistError, match=message) as info:
        load(MetricCache(), path, NOW_MS, BIG_AGE)
    assert str(path) in str(info.value)


def test_missing_array_raises_persist_error(tmp_path: Path) -> None:
    arrays = good_arrays()
    del arrays["values"]
    path = write_npz(tmp_path / "bad.npz", **arrays)
    with pytest.raises(PersistError, match=str(path)):
        load(MetricCache(), path, NOW_MS, BIG_AGE)


def _zero_byte(path: Path) -> None:
    path.write_bytes(b"")


def _empty_version(path: Path) -> None:
    arrays = good_arrays()
    arrays["version"] = np.array([], dtype=np.int64)
    write_npz(path, **arrays)


def _keys_not_a_list(path: Path) -> None:
    arrays = good_arrays()
    arrays["keys"] = keys_array(5)
    write_npz(path, **arrays)


def _values_not_numbers(path: Path) -> None:
    arrays = good_arrays()
    arrays["values"] = np.array(["a", "b"])
    write_npz(path, **arrays)


def _patched_zip_flag(path: Path) -> None:
    write_npz(path, **good_arrays())
    data = bytearray(path.read_bytes())
    central = data.index(b"PK\x01\x02")
    data[central + 8] |= 0x20  # "compressed patched data" flag of the first member
    path.write_bytes(bytes(data))


def test_zero_byte_file_raises_persist_error(tmp_path: Path) -> None:
    path = tmp_path / "cache.npz"
    _zero_byte(path)
    with pytest.raises(PersistError, match=str(path)):
        load(MetricCache(), path, NOW_MS, BIG_AGE)


@pytest.mark.parametrize(
    "corrupt", [_empty_version, _keys_not_a_list, _values_not_numbers, _patched_zip_flag]
)
def test_any_corrupt_file_raises_persist_error(tmp_path: Path, corrupt: object) -> None:
    path = tmp_path / "cache.npz"
    corrupt(path)  # type: ignore[operator]
    with pytest.raises(PersistError, match=str(path)):
        load(MetricCache(), path, NOW_MS, BIG_AGE)


# --- atomic save -------------------------------------------------------------------------------------------
def test_leftover_tmp_does_not_break_load_or_save(tmp_path: Path) -> None:
    path = tmp_path / "cache.npz"
    save(filled_cache(), path)
    tmp = tmp_path / "cache.npz.tmp"
    tmp.write_bytes(b"half-written garbage from a crash")
    restored = MetricCache(config())
    assert load(restored, path, NOW_MS, BIG_AGE) == 122
    # a new save overwrites the leftover and leaves no temporary behind
    small = MetricCache()
    small.append([Sample("node_cpu_usage", {}, NOW_MS, 7.0)])
    assert save(small, path) == 1
    assert not tmp.exists()
    again = MetricCache()
    assert load(again, path, NOW_MS, BIG_AGE) == 1
    assert again.query("node_cpu_usage", {}, 0, NOW_MS).values.tolist() == [7.0]


def test_save_replaces_previous_file_content(tmp_path: Path) -> None:
    path = tmp_path / "cache.npz"
    save(filled_cache(), path)
    save(MetricCache(), path)
    cache = MetricCache()
    assert load(cache, path, NOW_MS, BIG_AGE) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.npz"]


# --- restore semantics ---------------------------------------------------------------------------------
def test_restore_does_not_overwrite_present_series(tmp_path: Path) -> None:
    path = tmp_path / "cache.npz"
    save(filled_cache(), path)
    live = MetricCache(config())
    live.append([Sample("node_memory_usage", {}, NOW_MS, 42.0)])
    # node_memory_usage (10 points) is skipped: 122 − 10
    assert load(live, path, NOW_MS, BIG_AGE) == 112
    assert live.query("node_memory_usage", {}, 0, NOW_MS).values.tolist() == [42.0]
    assert live.query("node_cpu_usage", {}, 0, NOW_MS).count() == 100


def test_entity_series_get_entity_capacity_on_restore() -> None:
    big = MetricCache(CacheConfig(retention_seconds=1000, collect_interval_seconds=1))
    big.append(
        [Sample("pod_cpu_usage", {"pod_uid": "p"}, NOW_MS - 50_000 + 1000 * i, float(i)) for i in range(50)]
    )
    big.append(
        [
            Sample("container_cpu_usage", {"container_id": "c"}, NOW_MS - 50_000 + 1000 * i, 1.0)
            for i in range(50)
        ]
    )
    big.append([Sample("node_cpu_usage", {}, NOW_MS - 50_000 + 1000 * i, float(i)) for i in range(50)])
    target = MetricCache(config(entity=10))  # node capacity 100, pod/container capacity 10
    assert target.config.series_capacity == 100
    assert target.config.entity_series_capacity == 10
    assert target.restore(big.export()) == 10 + 10 + 50
    pod = target.query("pod_cpu_usage", {"pod_uid": "p"}, 0, NOW_MS)
    assert pod.values.tolist() == [float(i) for i in range(40, 50)]  # newest 10
    assert target.query("container_cpu_usage", {}, 0, NOW_MS).count() == 10
    assert target.query("node_cpu_usage", {}, 0, NOW_MS).count() == 50
    # the restored rings keep working: a full pod ring overwrites its oldest, the node ring grows
    target.append(
        [Sample("pod_cpu_usage", {"pod_uid": "p"}, NOW_MS, 99.0), Sample("node_cpu_usage", {}, NOW_MS, 99.0)]
    )
    pod = target.query("pod_cpu_usage", {"pod_uid": "p"}, 0, NOW_MS)
    assert pod.values.tolist() == [*(float(i) for i in range(41, 50)), 99.0]
    assert target.query("node_cpu_usage", {}, 0, NOW_MS).count() == 51


def test_entity_capacity_for_live_appends() -> None:
    cache = MetricCache(config(entity=3))
    cache.append([Sample("pod_cpu_usage", {"pod_uid": "p"}, NOW_MS + i, float(i)) for i in range(5)])
    cache.append([Sample("node_cpu_usage", {}, NOW_MS + i, float(i)) for i in range(5)])
    assert cache.query("pod_cpu_usage", {}, 0, NOW_MS + 10).values.tolist() == [2.0, 3.0, 4.0]
    assert cache.query("node_cpu_usage", {}, 0, NOW_MS + 10).count() == 5


def test_restored_series_are_least_recently_written() -> None:
    source = MetricCache()
    source.append([Sample("pod_cpu_usage", {"pod_uid": "old"}, NOW_MS, 1.0)])
    cache = MetricCache(CacheConfig(max_series=2))
    cache.append([Sample("node_cpu_usage", {}, NOW_MS, 1.0)])
    assert cache.restore(source.export()) == 1
    assert cache.series_keys()[0] == ("pod_cpu_usage", (("pod_uid", "old"),))
    cache.append([Sample("node_memory_usage", {}, NOW_MS, 1.0)])  # evicts the restored series first
    assert ("pod_cpu_usage", (("pod_uid", "old"),)) not in cache.series_keys()
    assert cache.evicted_series == 1


def test_restore_stops_at_max_series() -> None:
    source = filled_cache()
    cache = MetricCache(CacheConfig(max_series=2))
    cache.restore(source.export())
    assert cache.series_count() == 2


def test_restore_validates_labels_and_shapes() -> None:
    cache = MetricCache()
    ts = np.array([NOW_MS], dtype=np.int64)
    with pytest.raises(MetricCacheError):
        cache.restore([(("pod_cpu_usage", ()), ts, np.array([1.0]))])
    with pytest.raises(MetricCacheError, match="shape"):
        cache.restore([(("node_cpu_usage", ()), ts, np.array([1.0, 2.0]))])
    assert cache.series_count() == 0


def test_export_copies_points() -> None:
    cache = MetricCache()
    cache.append([Sample("node_cpu_usage", {}, NOW_MS, 1.0)])
    [(key, _ts, vals)] = cache.export()
    assert key == ("node_cpu_usage", ())
    vals[0] = 100.0
    assert cache.query("node_cpu_usage", {}, 0, NOW_MS).values.tolist() == [1.0]


# --- RingSeries.from_points / CacheConfig -----------------------------------------------------------------
@pytest.mark.parametrize("n", [0, 1, 5, 64, 65, 200])
def test_ring_from_points_keeps_newest_in_order(n: int) -> None:
    capacity = 100
    ts = np.arange(n, dtype=np.int64) * 10
    vals = np.arange(n, dtype=np.float64)
    series = RingSeries.from_points(capacity, ts, vals)
    kept = min(n, capacity)
    assert len(series) == kept
    assert series.capacity == capacity
    got_ts, got_vals = series.points()
    assert got_ts.tolist() == ts[n - kept :].tolist()
    assert got_vals.tolist() == vals[n - kept :].tolist()
    # appending continues the ring correctly (grows, then overwrites the oldest)
    for i in range(150):
        series.append(10_000 + i, 1000.0 + i)
    total = kept + 150
    assert len(series) == min(total, capacity)
    all_vals = [*vals[n - kept :].tolist(), *(1000.0 + i for i in range(150))]
    assert series.points()[1].tolist() == all_vals[-capacity:]


def test_ring_from_points_does_not_alias_input() -> None:
    ts = np.array([1, 2, 3], dtype=np.int64)
    vals = np.array([1.0, 2.0, 3.0])
    series = RingSeries.from_points(10, ts, vals)
    vals[0] = 100.0
    ts[0] = 100
    assert series.points()[1].tolist() == [1.0, 2.0, 3.0]
    assert series.points()[0].tolist() == [1, 2, 3]


def test_cache_config_entity_capacity() -> None:
    assert CacheConfig(retention_seconds=3600, collect_interval_seconds=1).entity_series_capacity == 3600
    cfg = CacheConfig(retention_seconds=3600, collect_interval_seconds=2, entity_retention_seconds=901)
    assert cfg.series_capacity == 1800
    assert cfg.entity_series_capacity == 451  # ceil(901 / 2)
    assert cfg.capacity_for(["pod_uid"]) == 451
    assert cfg.capacity_for(["container_id", "pod_uid", "psi_resource"]) == 451
    assert cfg.capacity_for([]) == 1800
    assert cfg.capacity_for(["numa_node_id"]) == 1800
    override = CacheConfig(capacity_override=7, entity_retention_seconds=900)
    assert override.entity_series_capacity == 7
    with pytest.raises(ValueError, match="entity_retention_seconds"):
        CacheConfig(entity_retention_seconds=0)


def test_cache_file_checkpoints_until_stopped(tmp_path: Path) -> None:
    """docs/rules/koordlet.md#metric-cache: saved every checkpoint interval while running, not only on
    shutdown; each save replaces the file whole."""
    cache = filled_cache()
    path = tmp_path / "ckpt" / "cache.npz"
    cf = CacheFile(cache, path)
    stop = threading.Event()
    saved: list[int] = []

    def wait(timeout: float) -> bool:  # two checkpoints, then stop
        saved.append(path.stat().st_size if path.exists() else 0)
        return len(saved) > 2

    stop.wait = wait  # type: ignore[method-assign]
    cf.run(stop, 0.01)
    assert saved[0] == 0 and saved[1] > 0 and saved[2] == saved[1]
    assert [p.name for p in path.parent.iterdir()] == ["cache.npz"]  # no temporary file left
    restored = MetricCache(config())
    assert CacheFile(restored, path).load(NOW_MS, BIG_AGE) == sum(len(ts) for _, ts, _ in cache.export())


def test_cache_file_save_failure_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    cf = CacheFile(filled_cache(), blocker / "cache.npz")  # its parent is a file: the save cannot happen
    assert cf.save("checkpoint") is False
    assert "checkpoint save to" in caplog.text
