"""The QoS manager's effectful side: builds a ``Snapshot`` per tick (metric-cache and cgroup views at
``now``), calls each enabled strategy's pure ``decide``, hands the cgroup writes to the resource executor
and the evictions to the evictor, keeps each strategy's state, and publishes its gauges. One loop per
strategy; as upstream's ``wait.Until``, the next tick starts one period after the previous one finished.

Imports: standard library, agent.{metriccache,podmeta,qosmanager.framework,resourceexecutor,system.*}.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from agent.metriccache import MetricCache, MetricCacheError
from agent.qosmanager.framework import Decision, Evict, Snapshot, Strategy
from agent.resourceexecutor.executor import ResourceExecutor, WriteResult
from agent.system.cgroup import CgroupFile, CgroupUnsupportedError, CgroupVersion, HostPaths, read_cgroup

__all__ = ["CacheMetricView", "EvictorLike", "HostCgroupView", "QoSManager", "StrategyEntry"]

log = logging.getLogger(__name__)


class CacheMetricView:
    """``MetricView`` over the metric cache, windows ending at ``now_ms``."""

    def __init__(self, cache: MetricCache, now_ms: int) -> None:
        self._cache = cache
        self._now_ms = now_ms

    def _query(self, kind: str, labels: Mapping[str, str], window_seconds: float) -> Any:
        return self._cache.query(kind, labels, self._now_ms - int(window_seconds * 1000), self._now_ms)

    def last(self, kind: str, labels: Mapping[str, str], window_seconds: float) -> float | None:
        try:
            res = self._query(kind, labels, window_seconds)
            return res.last() if res.count() else None
        except MetricCacheError:
            return None

    def avg(self, kind: str, labels: Mapping[str, str], window_seconds: float) -> float | None:
        try:
            res = self._query(kind, labels, window_seconds)
            return res.avg() if res.count() else None
        except MetricCacheError:
            return None

    def count(self, kind: str, labels: Mapping[str, str], window_seconds: float) -> int:
        try:
            return int(self._query(kind, labels, window_seconds).count())
        except MetricCacheError:
            return 0


class HostCgroupView:
    """``CgroupView`` on the host (or a fake tree): reads through the declared cgroup files."""

    def __init__(self, paths: HostPaths, version: CgroupVersion) -> None:
        self._paths = paths
        self._version = version
        base = paths.cgroup_root / "cpu" if version is CgroupVersion.V1 else paths.cgroup_root
        self._cpu_base = base

    def read(self, spec: CgroupFile[Any], cgroup_dir: str) -> Any | None:
        try:
            return read_cgroup(self._paths.cgroup_root, self._version, spec, cgroup_dir)
        except (OSError, ValueError, CgroupUnsupportedError):
            return None

    def children(self, cgroup_dir: str) -> Sequence[str]:
        rel = cgroup_dir.strip("/")
        base: Path = self._cpu_base / rel if rel else self._cpu_base
        try:
            names = sorted(e.name for e in os.scandir(base) if e.is_dir(follow_symlinks=False))
        except OSError:
            return []
        prefix = f"{rel}/" if rel else ""
        return [f"{prefix}{name}/" for name in names]


class EvictorLike(Protocol):
    def evict(self, evictions: Sequence[Evict]) -> Any: ...


@dataclass
class StrategyEntry:
    strategy: Strategy[Any, Any]
    config: Callable[[], Any]
    """Builds the strategy's config each tick (it may follow the NodeSLO or flags)."""
    state: Any = None
    ticks: int = 0
    failures: int = 0
    last_results: list[WriteResult] = field(default_factory=list)


SnapshotSource = Callable[[datetime], Snapshot]


class QoSManager:
    def __init__(
        self,
        entries: Sequence[StrategyEntry],
        snapshot: SnapshotSource,
        executor: ResourceExecutor,
        evictor: EvictorLike | None,
        *,
        on_gauges: Callable[[str, Mapping[str, float]], None] | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.entries = list(entries)
        self._snapshot = snapshot
        self._executor = executor
        self._evictor = evictor
        self._on_gauges = on_gauges
        self._clock = clock
        self._lock = threading.Lock()  # the executor's cache and the evictor are shared by the loops

    def tick(self, entry: StrategyEntry) -> Decision[Any]:
        """One round of one strategy: snapshot → decide → writes → evictions → gauges."""
        snapshot = self._snapshot(self._clock())
        decision = entry.strategy.decide(snapshot, entry.config(), entry.state)
        entry.state = decision.state if decision.state is not None else entry.state
        entry.ticks += 1
        with self._lock:
            if decision.writes:
                entry.last_results = self._executor.apply(decision.writes)
            if decision.evictions and self._evictor is not None:
                self._evictor.evict(decision.evictions)
        if decision.gauges and self._on_gauges is not None:
            self._on_gauges(entry.strategy.name, decision.gauges)
        return decision

    def run_entry(self, entry: StrategyEntry, stop: threading.Event) -> None:
        period = entry.strategy.interval_seconds
        while not stop.is_set():
            try:
                self.tick(entry)
            except Exception:
                entry.failures += 1
                log.exception("strategy %s failed", entry.strategy.name)
            if stop.wait(period):
                return

    def start(self, stop: threading.Event) -> list[threading.Thread]:
        threads = []
        for entry in self.entries:
            t = threading.Thread(
                target=self.run_entry, args=(entry, stop), name=f"qos-{entry.strategy.name}", daemon=True
            )
            t.start()
            threads.append(t)
        return threads
