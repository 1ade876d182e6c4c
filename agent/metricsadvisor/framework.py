"""Collector framework (docs/rules/koordlet.md#collectors): the ``CollectContext`` every collector receives,
the ``Collector`` protocol, the advisor's intervals, the shared latest-totals state the system collector
reads, and small pure helpers (unsigned deltas, ms timestamps, a reusable per-cgroup read state).

Imports: standard library, agent.system.{cgroup,podcgroup}, agent.metriccache.{cache,kv}, agent.podmeta,
apis.nodeslo (types only).
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from agent.metriccache.cache import Sample
from agent.metriccache.kv import KVStore
from agent.podmeta import PodSource
from agent.system.cgroup import CgroupVersion, HostPaths
from agent.system.podcgroup import CgroupDriver
from apis.nodeslo import HostApplicationSpec

__all__ = [
    "HOST_APPS",
    "NODE",
    "PODS",
    "AdvisorConfig",
    "BaseCollector",
    "CollectContext",
    "Collector",
    "SharedState",
    "Totals",
    "ms",
    "numa_labels",
    "udelta",
]

U64 = 1 << 64

NODE = "node"
PODS = "pods"
HOST_APPS = "host_apps"


@functools.cache
def numa_labels(node: int) -> Mapping[str, str]:
    """The ``numa_node_id`` label set of a NUMA node, one shared dict per node (never mutate it)."""
    return {"numa_node_id": str(node)}


def udelta(cur: int, last: int) -> int:
    """Go ``uint64`` subtraction ``cur − last`` (wraps when the counter went backwards)."""
    return (cur - last) % U64


def ms(ns: int) -> int:
    """Wall-clock nanoseconds → the metric cache's millisecond timestamp."""
    return ns // 1_000_000


@dataclass(frozen=True, slots=True)
class AdvisorConfig:
    """Collector intervals (flag defaults, docs/rules/koordlet.md#collectors) plus the koord additions."""

    collect_interval_seconds: float = 1.0
    node_info_interval_seconds: float = 60.0
    psi_interval_seconds: float = 10.0
    resctrl_interval_seconds: float = 10.0
    # Per-interface rates need no 1 s resolution (one netlink dump costs ~0.1 ms of CPU).
    network_interval_seconds: float = 5.0
    sys_outdated_seconds: float = 10.0

    def __post_init__(self) -> None:
        for name in (
            "collect_interval_seconds",
            "node_info_interval_seconds",
            "psi_interval_seconds",
            "resctrl_interval_seconds",
            "network_interval_seconds",
            "sys_outdated_seconds",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0")


@dataclass(frozen=True, slots=True)
class Totals:
    """The latest totals one collector published (CPU in cores, memory in bytes; NUMA maps by node id)."""

    cpu_cores: float
    memory_bytes: float
    timestamp_ns: int
    numa_cpu_cores: Mapping[int, float] = field(default_factory=dict)
    numa_memory_bytes: Mapping[int, float] = field(default_factory=dict)


class SharedState:
    """Latest totals per source (``NODE``, ``PODS``, ``HOST_APPS``); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[str, Totals] = {}

    def publish(self, source: str, totals: Totals) -> None:
        with self._lock:
            self._latest[source] = totals

    def latest(self, source: str) -> Totals | None:
        with self._lock:
            return self._latest.get(source)


def _no_host_apps() -> Sequence[HostApplicationSpec] | None:
    return None


def _no_policy() -> str | None:
    return None


@dataclass
class CollectContext:
    """Everything a collector may use. ``host_apps()`` is None until a NodeSLO was observed."""

    paths: HostPaths
    cgroup_version: CgroupVersion
    cgroup_driver: CgroupDriver
    pods: PodSource
    host_apps: Callable[[], Sequence[HostApplicationSpec] | None] = _no_host_apps
    clock_ns: Callable[[], int] = time.time_ns
    """Wall clock in ns (injectable for tests)."""
    shared: SharedState = field(default_factory=SharedState)
    kv: KVStore = field(default_factory=KVStore)
    node_memory_policy: Callable[[], str | None] = _no_policy
    """NodeMetric ``nodeMemoryCollectPolicy`` (None = default ``usageWithoutPageCache``)."""
    clk_tck: int = field(default_factory=lambda: os.sysconf("SC_CLK_TCK"))
    page_size: int = field(default_factory=lambda: os.sysconf("SC_PAGE_SIZE"))
    resctrl_root: Path | None = None
    """Defaults to ``<paths.sys>/fs/resctrl``."""

    @property
    def jiffy_ns(self) -> int:
        return 1_000_000_000 // self.clk_tck

    def resctrl_dir(self) -> Path:
        return self.resctrl_root if self.resctrl_root is not None else self.paths.sys / "fs" / "resctrl"


class Collector(Protocol):
    """One collector: ``collect`` returns one batch of samples (appended atomically by the runner)."""

    @property
    def name(self) -> str: ...

    @property
    def interval_seconds(self) -> float: ...

    @property
    def started(self) -> bool:
        """True once one round completed successfully (docs/rules/koordlet.md#start-order-and-readiness)."""
        ...

    def enabled(self, ctx: CollectContext) -> bool:
        """Probed once when the runner starts; a disabled collector never runs and is not waited for."""
        ...

    def collect(self, ctx: CollectContext) -> Sequence[Sample]:
        """One round: a list of ``Sample`` or, for the per-tick bulk, a ``SampleBatch`` of series refs."""
        ...


class BaseCollector:
    """Common state: name, interval and ``started`` (set by ``mark_started``)."""

    def __init__(self, name: str, interval_seconds: float) -> None:
        if interval_seconds <= 0:
            raise ValueError(f"{name}: interval must be > 0")
        self._name = name
        self._interval = interval_seconds
        self._started = False

    @property
    def name(self) -> str:
        return self._name

    @property
    def interval_seconds(self) -> float:
        return self._interval

    @property
    def started(self) -> bool:
        return self._started

    def mark_started(self) -> None:
        self._started = True

    def enabled(self, ctx: CollectContext) -> bool:
        return True
