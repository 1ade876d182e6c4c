"""The koordlet's Prometheus series (upstream's names where it has one, ``koordlet_`` prefix; listed in
docs/architecture.md#prometheus-metrics), on an injectable registry so tests use a fresh one.

Per-pod series are removed when the pod leaves the node, so the exposition stays bounded.
Imports: standard library, prometheus_client, agent.{metriccache,podmeta}.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector as RegistryCollector

from agent.metriccache import MetricCache, MetricCacheError
from agent.podmeta import PodMeta

__all__ = ["AgentMetrics"]

_DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class _CollectorRounds(RegistryCollector):
    """``koordlet_collector_duration_seconds`` (histogram) and ``koordlet_collector_rounds_total`` per
    collector: observing is a bisect and three additions under a lock (prometheus_client's Histogram takes
    a lock per bucket and value), the families are built only when scraped."""

    def __init__(self, node: str) -> None:
        self._node = node
        self._lock = threading.Lock()
        # collector → [bucket counts (last: above every bound), sum of seconds, succeeded, failed]
        self._stats: dict[str, list[Any]] = {}

    def observe(self, collector: str, seconds: float, ok: bool) -> None:
        with self._lock:
            st = self._stats.get(collector)
            if st is None:
                st = self._stats[collector] = [[0] * (len(_DURATION_BUCKETS) + 1), 0.0, 0, 0]
            st[0][bisect.bisect_left(_DURATION_BUCKETS, seconds)] += 1  # le: a value on a bound counts in it
            st[1] += seconds
            st[2 if ok else 3] += 1

    def describe(self) -> Iterator[Metric]:
        return iter(self._families({}))

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            stats = {name: [list(st[0]), st[1], st[2], st[3]] for name, st in self._stats.items()}
        return iter(self._families(stats))

    def _families(self, stats: Mapping[str, list[Any]]) -> list[Metric]:
        duration = HistogramMetricFamily(
            "koordlet_collector_duration_seconds",
            "Duration of one collection round per collector",
            labels=["node", "collector"],
        )
        rounds = CounterMetricFamily(
            "koordlet_collector_rounds",
            "Collection rounds per collector and outcome",
            labels=["node", "collector", "status"],
        )
        for name, (buckets, total, succeeded, failed) in sorted(stats.items()):
            cumulative = list(itertools.accumulate(buckets))
            bounds = [*(repr(float(b)) for b in _DURATION_BUCKETS), "+Inf"]
            duration.add_metric([self._node, name], list(zip(bounds, cumulative, strict=True)), total)
            rounds.add_metric([self._node, name, "succeeded"], succeeded)
            rounds.add_metric([self._node, name, "failed"], failed)
        return [duration, rounds]


class AgentMetrics:
    def __init__(self, node: str, registry: CollectorRegistry | None = None) -> None:
        self.node = node
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.start_time = Gauge(
            "koordlet_start_time", "koordlet start time (unix seconds)", ["node"], registry=r
        )
        # Every collector reports every second: counted in plain Python, exported when scraped.
        self._rounds = _CollectorRounds(node)
        r.register(self._rounds)
        self.node_cpu = Gauge("koordlet_node_used_cpu_cores", "Node CPU usage (cores)", ["node"], registry=r)
        self.node_memory = Gauge(
            "koordlet_node_used_memory_bytes", "Node memory usage (bytes)", ["node"], registry=r
        )
        pod_labels = ["node", "pod_namespace", "pod_name", "pod_uid"]
        self.pod_cpu = Gauge("koordlet_pod_used_cpu_cores", "Pod CPU usage (cores)", pod_labels, registry=r)
        self.pod_memory = Gauge(
            "koordlet_pod_used_memory_bytes", "Pod memory usage (bytes, anon)", pod_labels, registry=r
        )
        self.reports = Counter(
            "koordlet_node_metric_reports",
            "NodeMetric reports shipped, by target (cr, hub) and status (succeeded, failed)",
            ["node", "target", "status"],
            registry=r,
        )
        self.last_report = Gauge(
            "koordlet_node_metric_last_report_timestamp_seconds",
            "Unix time of the last successful report per target",
            ["node", "target"],
            registry=r,
        )
        self.cache_series = Gauge(
            "koordlet_metric_cache_series", "Time series held in the metric cache", ["node"], registry=r
        )
        # The agent's own CPU and RSS (process_cpu_seconds_total, process_resident_memory_bytes): what an
        # operator checks the koordlet's overhead with.
        ProcessCollector(registry=r)
        self.update_duration = Histogram(
            "koordlet_resource_update_duration_milliseconds",
            "Duration of cgroup/resctrl writes by the resource executor",
            ["type", "status"],
            buckets=[0.01 * 4**k for k in range(8)],
            registry=r,
        )
        self.drift = Counter(
            "koordlet_cgroup_drift",
            "Values the executor had written that someone else changed (re-asserted), by file",
            ["node", "file"],
            registry=r,
        )
        self.topology_reports = Counter(
            "koordlet_node_topology_reports",
            "NodeResourceTopology writes (create or patch) by status (succeeded, failed); an unchanged "
            "report writes nothing (docs/rules/koordlet-topology.md#reporting)",
            ["node", "status"],
            registry=r,
        )
        self.device_reports = Counter(
            "koordlet_device_reports",
            "Device object writes (create or patch) by status (succeeded, failed); an unchanged report "
            "writes nothing (docs/rules/koordlet-gpu.md#reporting)",
            ["node", "status"],
            registry=r,
        )
        self._qos_gauges: dict[str, Gauge] = {}
        self._pod_keys: set[tuple[str, str, str]] = set()
        self._lock = threading.Lock()
        self.start_time.labels(node).set(time.time())
        for target in ("cr", "hub"):
            for status in ("succeeded", "failed"):
                self.reports.labels(node, target, status)
        for status in ("succeeded", "failed"):
            self.topology_reports.labels(node, status)
            self.device_reports.labels(node, status)

    def on_collect(self, collector: str, seconds: float, ok: bool) -> None:
        self._rounds.observe(collector, seconds, ok)

    def on_report(self, target: str, status: str) -> None:
        self.reports.labels(self.node, target, status).inc()
        if status == "succeeded":
            self.last_report.labels(self.node, target).set(time.time())

    def on_topology_report(self, status: str) -> None:
        self.topology_reports.labels(self.node, status).inc()

    def on_device_report(self, status: str) -> None:
        self.device_reports.labels(self.node, status).inc()

    def update_usage(self, cache: MetricCache, pods: Sequence[PodMeta], now_ms: int, window_ms: int) -> None:
        """Set the usage gauges to the last sample within ``window_ms``; drop series of gone pods."""
        start = now_ms - window_ms
        for kind, gauge in (("node_cpu_usage", self.node_cpu), ("node_memory_usage", self.node_memory)):
            # No fresh sample: keep the previous value rather than report a false 0.
            with contextlib.suppress(MetricCacheError):
                gauge.labels(self.node).set(cache.query(kind, {}, start, now_ms).last())
        present = {(m.namespace, m.name, m.uid) for m in pods}
        seen: set[tuple[str, str, str]] = set()
        for meta in pods:
            key = (meta.namespace, meta.name, meta.uid)
            labels = {"pod_uid": meta.uid}
            try:
                cpu = cache.query("pod_cpu_usage", labels, start, now_ms).last()
                mem = cache.query("pod_memory_usage", labels, start, now_ms).last()
            except MetricCacheError:
                continue  # no fresh sample: like the node gauges, keep the last value while the pod exists
            seen.add(key)
            self.pod_cpu.labels(self.node, *key).set(cpu)
            self.pod_memory.labels(self.node, *key).set(mem)
        with self._lock:
            known = (self._pod_keys & present) | seen
            for key in self._pod_keys - known:
                self.pod_cpu.remove(self.node, *key)
                self.pod_memory.remove(self.node, *key)
            self._pod_keys = known
        self.cache_series.labels(self.node).set(cache.series_count())

    def on_write(self, strategy: str, file: str, seconds: float, status: str) -> None:
        self.update_duration.labels(file, status).observe(seconds * 1000.0)

    def on_drift(self, strategy: str, file: str) -> None:
        self.drift.labels(self.node, file).inc()

    def on_qos_gauges(self, strategy: str, gauges: Mapping[str, float]) -> None:
        """A strategy's gauges, named ``name`` or ``name{k="v",...}``, as ``koordlet_<name>{node,k...}``."""
        for key, value in gauges.items():
            name, labels = _parse_series(key)
            gauge = self._qos_gauges.get(name)
            if gauge is None:
                gauge = Gauge(
                    f"koordlet_{name}",
                    f"{strategy}: {name}",
                    ["node", *sorted(labels)],
                    registry=self.registry,
                )
                self._qos_gauges[name] = gauge
            try:
                gauge.labels(self.node, *(labels[k] for k in sorted(labels))).set(value)
            except (ValueError, KeyError):
                continue  # a label set differing from the first one seen for this name: not exported


def _parse_series(key: str) -> tuple[str, dict[str, str]]:
    name, brace, rest = key.partition("{")
    labels: dict[str, str] = {}
    if brace:
        for part in rest.rstrip("}").split(","):
            k, _, v = part.partition("=")
            if k.strip():
                labels[k.strip()] = v.strip().strip('"')
    return name.strip(), labels


class BlindnessCollector:
    """``koordlet_metrics_blind_seconds`` (docs/rules/koordlet.md#freshness-rule): how long since the newest
    node CPU sample, computed at scrape time. While it exceeds 2 × the collect interval every strategy skips
    its tick (stale data)."""

    def __init__(
        self, node: str, newest_sample_age: Callable[[], float | None], registry: CollectorRegistry
    ) -> None:
        self.node = node
        self._age = newest_sample_age
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        g = GaugeMetricFamily(
            "koordlet_metrics_blind_seconds",
            "Seconds since the newest node CPU sample (strategies act on samples newer than 2 × interval)",
            labels=["node"],
        )
        age = self._age()
        if age is not None:
            g.add_metric([self.node], age)
        yield g

    def describe(self) -> Iterator[Metric]:
        return iter(())
