"""The QoS manager's effectful side: builds a ``Snapshot`` per tick (metric-cache and cgroup views at
``now``), calls each enabled strategy's pure ``decide``, hands the decision's host actions to the resource
executor (``execute``: directories, leveled and plain cgroup writes, resctrl and sysctl writes) and its
evictions to the evictor, keeps each strategy's state, and publishes its gauges. One loop per strategy; as
upstream's ``wait.Until``, the next tick starts one period after the previous one finished, or right after
a collection round once the collectors ``kick`` (docs/rules/koordlet.md#start-order-and-readiness).
Every reading of the time and every wait goes through the injected ``Clock``.

Imports: standard library, apis.waits,
agent.{metriccache,qosmanager.framework,resourceexecutor,system.cgroup}.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from agent.metriccache import MetricCache, MetricCacheError
from agent.qosmanager.framework import Decision, Snapshot, Strategy
from agent.resourceexecutor.actions import Evict
from agent.resourceexecutor.executor import ResourceExecutor, WriteResult
from agent.system.cgroup import CgroupFile, CgroupUnsupportedError, CgroupVersion, HostPaths, read_cgroup
from apis.waits import clamp_seconds

__all__ = [
    "CacheMetricView",
    "Clock",
    "EvictorLike",
    "HostCgroupView",
    "QoSManager",
    "StrategyEntry",
    "SystemClock",
]

log = logging.getLogger(__name__)


class Clock(Protocol):
    """The QoS loop's time: ``now`` stamps snapshots, ``monotonic`` measures waits, ``wait`` blocks until
    ``event`` is set or ``timeout`` seconds passed (returns whether it is set)."""

    def now(self) -> datetime: ...
    def monotonic(self) -> float: ...
    def wait(self, event: threading.Event, timeout: float) -> bool: ...


class SystemClock:
    """The host's clocks."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def wait(self, event: threading.Event, timeout: float) -> bool:
        return event.wait(clamp_seconds(timeout, "QoS strategy wait"))


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
    kicked: threading.Event = field(default_factory=threading.Event)
    """A kick arrived since this entry's last tick (see ``QoSManager.kick``)."""


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
        clock: Clock | None = None,
    ) -> None:
        self.entries = list(entries)
        self._snapshot = snapshot
        self._executor = executor
        self._evictor = evictor
        self._on_gauges = on_gauges
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._lock = threading.Lock()  # the executor's cache and the evictor are shared by the loops

    def tick(self, entry: StrategyEntry) -> Decision[Any]:
        """One round of one strategy: snapshot → decide → writes → evictions → gauges."""
        snapshot = self._snapshot(self._clock.now())
        decision = entry.strategy.decide(snapshot, entry.config(), entry.state)
        entry.state = decision.state if decision.state is not None else entry.state
        entry.ticks += 1
        with self._lock:
            if decision.has_host_actions():
                entry.last_results = self._executor.execute(decision)
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
            if self._wait_next(entry, stop, period):
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

    # ------------------------------------------------------------ trigger: tick on fresh data
    # Without it the collector and each strategy are independent 1 s timers: a crossing waits up to one
    # collect interval for a sample, then up to one strategy period for a tick. ``kick()`` (the collector
    # runner's round listener) makes each loop tick right after a collection round, at its own rate.

    kicked: bool = False
    """True once ``kick()`` was called: the loops then wait for kicks (with a timer fallback)."""
    KICK_SLACK_RATIO: float = 0.5
    """A kick is honoured from ``period − min(ratio × period, KICK_SLACK_MAX_SECONDS)`` after the last tick
    (earlier kicks are latched until then): a loop re-aligns to the rounds within one round, and a
    kick never raises the rate of a loop whose period is long."""
    KICK_SLACK_MAX_SECONDS: float = 0.5
    KICK_FALLBACK_RATIO: float = 1.5
    """Without a kick, a kicked loop still ticks ``ratio × period`` after its last tick (no collection)."""
    KICK_STOP_POLL_SECONDS: float = 0.25
    """How often a loop waiting for a kick checks its stop event (it waits on the kick event)."""

    def kick(self, *_args: object) -> None:
        """New data is in the metric cache: every strategy loop ticks as soon as its period allows. Any
        arguments are ignored (so it can be a ``CollectorRunner`` round listener directly)."""
        self.kicked = True
        for entry in self.entries:
            entry.kicked.set()

    def _wait_next(self, entry: StrategyEntry, stop: threading.Event, period: float) -> bool:
        """Wait for ``entry``'s next tick; True when ``stop`` was set. Never kicked: ``period`` (upstream's
        ``wait.Until``). Kicked: until a kick arrives (not before ``period`` minus the slack), at the latest
        ``KICK_FALLBACK_RATIO × period``."""
        clock = self._clock
        if not self.kicked:
            return clock.wait(stop, period)
        ev = entry.kicked
        start = clock.monotonic()
        earliest = start + period - min(self.KICK_SLACK_RATIO * period, self.KICK_SLACK_MAX_SECONDS)
        deadline = start + self.KICK_FALLBACK_RATIO * period
        while not stop.is_set():
            now = clock.monotonic()
            if now >= deadline or (ev.is_set() and now >= earliest):
                ev.clear()
                return False
            if ev.is_set():  # kicked early: wait out the rest of the period (still waking on stop)
                clock.wait(stop, earliest - now)
            else:
                clock.wait(ev, min(deadline - now, self.KICK_STOP_POLL_SECONDS))
        return True
