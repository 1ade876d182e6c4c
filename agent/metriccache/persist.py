"""Save the metric cache to a local file on shutdown and every checkpoint interval, and reload it on
start, so a restarted koordlet is not blind for the length of its longest aggregation window (30 min by
default), and one that crashed lost at most one interval (docs/rules/koordlet.md#metric-cache).

Format: one ``.npz`` archive (no pickle) with the series keys as JSON, and all timestamps and values
concatenated with per-series offsets. Written to a temporary file then renamed, so a crash mid-save
leaves the previous file intact; as large as the cache, whose retention and series count bound it.
Points older than ``max_age_ms`` are dropped on load. ``CacheFile`` is the daemon's handle: ``load``,
``save`` (one at a time) and the checkpoint loop ``run``.

Imports: standard library, numpy, agent.metriccache.{cache,kinds}.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

import numpy as np

from agent.metriccache.aggregate import FloatArray, IntArray
from agent.metriccache.cache import MetricCache, SeriesKey
from agent.metriccache.kinds import MetricCacheError

__all__ = ["FORMAT_VERSION", "CacheFile", "PersistError", "load", "save"]

log = logging.getLogger(__name__)

FORMAT_VERSION = 1


class PersistError(MetricCacheError):
    """The saved cache file cannot be read; the message names the file and why."""


def save(cache: MetricCache, path: Path) -> int:
    """Write every series of ``cache`` to ``path`` atomically; returns the number of points written."""
    items = cache.export()
    keys = [[kind, [list(kv) for kv in labels]] for (kind, labels), _, _ in items]
    lengths = np.array([ts.shape[0] for _, ts, _ in items], dtype=np.int64)
    ts_all = np.concatenate([ts for _, ts, _ in items]) if items else np.zeros(0, np.int64)
    vals_all = np.concatenate([v for _, _, v in items]) if items else np.zeros(0, np.float64)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as f:
        np.savez(
            f,
            version=np.array([FORMAT_VERSION], dtype=np.int64),
            keys=np.frombuffer(json.dumps(keys).encode(), dtype=np.uint8),
            lengths=lengths,
            timestamps=ts_all.astype(np.int64, copy=False),
            values=vals_all.astype(np.float64, copy=False),
        )
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)
    return int(ts_all.shape[0])


def load(cache: MetricCache, path: Path, now_ms: int, max_age_ms: int) -> int:
    """Restore the series saved in ``path`` into ``cache``, keeping points in ``[now − max_age, now]``.

    Returns the number of points restored; 0 when the file does not exist. ``PersistError`` when it
    exists but is not a readable cache file (the caller logs it and starts empty).
    """
    if not path.exists():
        return 0
    try:
        # The file is opened here, not by np.load: np.load leaks its own handle when the zip
        # directory of a damaged archive does not parse.
        with path.open("rb") as f, np.load(f, allow_pickle=False) as z:
            version_arr = np.asarray(z["version"])
            raw_keys = json.loads(bytes(z["keys"]).decode())
            lengths = np.asarray(z["lengths"], dtype=np.int64)
            ts_all = np.asarray(z["timestamps"], dtype=np.int64)
            vals_all = np.asarray(z["values"], dtype=np.float64)
    except Exception as e:  # numpy/zipfile raise many types on a damaged file; all mean "unreadable"
        raise PersistError(f"{path}: not a metric cache file: {type(e).__name__}: {e}") from e
    if version_arr.shape != (1,) or int(version_arr[0]) != FORMAT_VERSION:
        found = version_arr.tolist()
        raise PersistError(
            f"{path}: format version {found[0] if len(found) == 1 else found}, expected {FORMAT_VERSION}"
        )
    total = int(lengths.sum()) if lengths.ndim == 1 else -1
    if (
        not isinstance(raw_keys, list)
        or lengths.ndim != 1
        or bool((lengths < 0).any())
        or len(raw_keys) != lengths.shape[0]
        or total != ts_all.shape[0]
        or total != vals_all.shape[0]
    ):
        raise PersistError(f"{path}: inconsistent series table")
    items: list[tuple[SeriesKey, IntArray, FloatArray]] = []
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    for i, raw in enumerate(raw_keys):
        try:
            kind = str(raw[0])
            labels = tuple(sorted((str(k), str(v)) for k, v in raw[1]))
        except (TypeError, ValueError, IndexError) as e:
            raise PersistError(f"{path}: series {i}: bad key {raw!r}") from e
        ts = ts_all[offsets[i] : offsets[i + 1]]
        vals = vals_all[offsets[i] : offsets[i + 1]]
        keep = (ts >= now_ms - max_age_ms) & (ts <= now_ms)
        if keep.any():
            items.append(((kind, labels), ts[keep], vals[keep]))
    try:
        return cache.restore(items)
    except MetricCacheError as e:
        raise PersistError(f"{path}: {e}") from e


class CacheFile:
    """``cache``'s file at ``path``: ``load`` once at start, ``save`` at shutdown, ``run`` saves every
    ``interval`` seconds until ``stop``. Saves are serialised: a checkpoint and the shutdown save never
    write the same temporary file at once."""

    def __init__(self, cache: MetricCache, path: Path) -> None:
        self.cache = cache
        self.path = path
        self._lock = threading.Lock()

    def load(self, now_ms: int, max_age_ms: int) -> int:
        """As ``load``; ``PersistError`` when the file is unreadable (the caller starts empty)."""
        return load(self.cache, self.path, now_ms, max_age_ms)

    def save(self, why: str) -> bool:
        """Write the cache now; False when the write failed (logged with ``why``)."""
        with self._lock:
            try:
                n = save(self.cache, self.path)
            except OSError as e:
                log.error("metric cache: %s save to %s failed: %s", why, self.path, e)
                return False
        log.log(
            logging.DEBUG if why == "checkpoint" else logging.INFO,
            "metric cache: %s: saved %d points",
            why,
            n,
        )
        return True

    def run(self, stop: threading.Event, interval: float) -> None:
        """Checkpoint every ``interval`` seconds until ``stop`` is set."""
        while not stop.wait(interval):
            self.save("checkpoint")
