"""koord-manager's Prometheus metrics, on an injectable registry (tests use a fresh one; no global state).

``ManagerMetrics`` holds the controller-runtime figures (reconciles by result, reconcile duration, work
queue depth and retries), the slo-controller-config errors, the leader gauges and the upstream-named
``slo_controller_*`` counters. Upstream's counters are Go counters without a ``_total`` suffix; Python's
``Counter`` always adds one, so ``ExactCounter`` exposes the exact upstream sample name instead.
Imports: the standard library, prometheus_client and apis.sloconfig (the config keys).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import Metric

from apis.sloconfig import KNOWN_KEYS

__all__ = ["ExactCounter", "ManagerMetrics"]

RECONCILE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class ExactCounter:
    """A labelled counter exposed under exactly ``name`` (no ``_total`` added), as Go's client does."""

    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str], registry: CollectorRegistry
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._values: dict[tuple[str, ...], float] = {}
        self._lock = threading.Lock()
        registry.register(self)

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        if amount < 0:
            raise ValueError("counters only go up")
        if set(labels) != set(self.labelnames):
            raise ValueError(f"{self.name}: labels {sorted(labels)} != {sorted(self.labelnames)}")
        key = tuple(str(labels[n]) for n in self.labelnames)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, **labels: str) -> float:
        key = tuple(str(labels[n]) for n in self.labelnames)
        with self._lock:
            return self._values.get(key, 0.0)

    def collect(self) -> Iterator[Metric]:
        metric = Metric(self.name, self.documentation, "counter")
        with self._lock:
            items = list(self._values.items())
        for key, value in items:
            metric.add_sample(self.name, dict(zip(self.labelnames, key, strict=True)), value)
        yield metric

    def describe(self) -> Iterator[Metric]:
        yield Metric(self.name, self.documentation, "counter")


class ManagerMetrics:
    """Every metric of the manager's controllers, registered on ``registry`` (a fresh one by default)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.reconcile_total = Counter(
            "koord_manager_reconcile_total",
            "Reconciles by controller and result (success, error, requeue, requeue_after)",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_duration = Histogram(
            "koord_manager_reconcile_duration_seconds",
            "Time one reconcile took",
            ["controller"],
            buckets=RECONCILE_BUCKETS,
            registry=r,
        )
        self.queue_depth = Gauge(
            "koord_manager_workqueue_depth", "Keys waiting in a controller's work queue", ["controller"],
            registry=r,
        )  # fmt: skip
        self.queue_retries = Counter(
            "koord_manager_workqueue_retries_total", "Keys re-added with rate limiting", ["controller"],
            registry=r,
        )  # fmt: skip
        self.config_errors = Counter(
            "koord_manager_config_errors_total",
            "Problems found in slo-controller-config keys (rejected keys and ignored node entries)",
            ["key"],
            registry=r,
        )
        # Every known key starts at 0, so dashboards and alerts see "no errors" rather than no series.
        for key in sorted(KNOWN_KEYS):
            self.config_errors.labels(key=key)
        self.config_last_error = Gauge(
            "koord_manager_config_last_error",
            "1 when the key's latest value was rejected (its previous value is in force), else 0",
            ["key"],
            registry=r,
        )
        self.leader = Gauge(
            "koord_manager_leader", "1 while this replica leads and runs the controllers", ["identity"],
            registry=r,
        )  # fmt: skip
        self.is_leader = Gauge("koordinator_manager_is_leader", "Upstream's leader gauge", registry=r)
        self.nodeslo_reconcile = ExactCounter(
            "slo_controller_nodeslo_reconcile_count", "NodeSLO reconciles", ["status", "reason"], r
        )
        self.nodeslo_spec_parse = ExactCounter(
            "slo_controller_nodeslo_spec_parse_count", "NodeSLO spec computations", ["status", "reason"], r
        )
        self.nodemetric_reconcile = ExactCounter(
            "slo_controller_nodemetric_reconcile_count", "NodeMetric reconciles", ["status", "reason"], r
        )
        self.nodemetric_spec_parse = ExactCounter(
            "slo_controller_nodemetric_spec_parse_count",
            "NodeMetric spec computations",
            ["status", "reason"],
            r,
        )

    def set_leader(self, identity: str, leading: bool) -> None:
        self.leader.labels(identity=identity).set(1 if leading else 0)
        self.is_leader.set(1 if leading else 0)
