"""ElasticQuota's Prometheus metrics (docs/rules/scheduler-elasticquota.md#wiring): per quota gauges of its
runtime, request, used, min, max and non-preemptible used in the quota core's units (cpu in milli-cores,
other resources in whole units), refreshed by the leader's status loop; the pods the overuse revoke took
back per quota; and how long the plugin's event handlers and recomputations take, by operation.
Imports: prometheus_client, scheduler.plugins.elasticquota.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from scheduler.plugins.elasticquota.manager import GroupQuotaManager

_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)
_LABELS = ["name", "tree", "resource"]


class QuotaMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        def gauge(what: str, meaning: str) -> Gauge:
            return Gauge(
                f"koord_scheduler_elastic_quota_{what}",
                f"ElasticQuota: each quota's {meaning}, per resource in the quota core's units.",
                _LABELS, registry=registry,
            )  # fmt: skip

        self.gauges: dict[str, Gauge] = {
            "runtime": gauge("runtime", "runtime (what it may use now)"),
            "request": gauge("request", "request (its pods' and its children's, pending ones too)"),
            "used": gauge("used", "used (assigned pods, descendants included)"),
            "min": gauge("min", "min"),
            "max": gauge("max", "max"),
            "non_preemptible_used": gauge("non_preemptible_used", "non-preemptible used"),
        }
        self.revoked = Counter(
            "koord_scheduler_elastic_quota_revoked_pods",
            "ElasticQuota: pods the overuse revoke deleted, by quota.",
            ["name"], registry=registry,
        )  # fmt: skip
        self.process = Histogram(
            "koord_scheduler_elastic_quota_process_seconds",
            "ElasticQuota: duration of one event handler or recomputation, by operation.",
            ["operation"], buckets=_BUCKETS, registry=registry,
        )  # fmt: skip
        self._shown: set[tuple[str, str, str]] = set()  # label sets currently exported

    def observe(self, operation: str, seconds: float) -> None:
        self.process.labels(operation).observe(seconds)

    def on_revoked(self, quota: str, count: int) -> None:
        self.revoked.labels(quota).inc(count)

    def refresh(self, mgr: GroupQuotaManager) -> None:
        """Sets every gauge from the manager's state (call under the scheduler's lock); the series of a
        quota or resource that is gone are removed."""
        mgr.refresh()
        shown: set[tuple[str, str, str]] = set()
        for name, info in mgr.quotas.items():
            runtime = mgr.refresh_runtime(name) or {}
            values: Mapping[str, Mapping[str, int]] = {
                "runtime": runtime, "request": info.request, "used": info.used, "min": info.min,
                "max": info.max, "non_preemptible_used": info.np_used,
            }  # fmt: skip
            for what, amounts in values.items():
                for resource, value in amounts.items():
                    self.gauges[what].labels(name, mgr.tree_id, resource).set(value)
                    shown.add((what, name, resource))
        for what, name, resource in self._shown - shown:
            self.gauges[what].remove(name, mgr.tree_id, resource)
        self._shown = shown
