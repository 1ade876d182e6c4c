"""Prometheus view of the MetricHub: reports received and refused (by reason), calls refused by the
authentication gate (by reason), nodes held, bytes held by the latest reports and by the history, Watch
streams open, the revision. A custom collector that reads the store's counters at scrape time, so the
ingest path pays nothing for it.

Imports: prometheus_client, apis.reportlimits, manager.metrichub.store.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from apis.reportlimits import REASONS
from manager.metrichub.store import HubStore

__all__ = ["HubCollector"]

# Always exported (at 0 until they happen), so alerts can rate() them from the start.
REPORT_REFUSALS = (*REASONS, "rate_limited", "foreign_node", "checks_busy", "store_full")


class HubCollector:
    def __init__(self, store: HubStore, registry: CollectorRegistry) -> None:
        self.store = store
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        store = self.store
        yield CounterMetricFamily(
            "koord_manager_hub_reports_received", "Node metric reports accepted by the hub",
            value=store.reports_received,
        )  # fmt: skip
        refused = CounterMetricFamily(
            "koord_manager_hub_reports_refused",
            "Node metric reports the hub refused, by reason",
            labels=["reason"],
        )
        counts = store.refused.snapshot()
        for reason in sorted({*REPORT_REFUSALS, *counts}):
            refused.add_metric([reason], counts.get(reason, 0))
        yield refused
        auth = CounterMetricFamily(
            "koord_manager_hub_auth_refused",
            "Hub calls refused by authentication, by reason",
            labels=["reason"],
        )
        for reason, n in sorted(store.auth_refused.snapshot().items()):
            auth.add_metric([reason], n)
        yield auth
        yield GaugeMetricFamily(
            "koord_manager_hub_nodes", "Nodes with a report in the hub", value=store.node_count()
        )
        yield GaugeMetricFamily(
            "koord_manager_hub_stored_bytes", "Bytes of the nodes' latest entries", value=store.stored_bytes
        )
        yield GaugeMetricFamily(
            "koord_manager_hub_history_bytes", "Bytes of the hub's change history", value=store.history_bytes
        )
        yield GaugeMetricFamily("koord_manager_hub_watchers", "Open Watch streams", value=store.watchers)
        yield GaugeMetricFamily(
            "koord_manager_hub_revision", "The hub's latest revision", value=store.revision
        )

    def describe(self) -> Iterator[Metric]:
        return iter(())
