"""Prometheus view of the MetricHub: reports received, nodes held, Watch streams open. A custom collector
that reads the store's counters at scrape time, so the ingest path pays nothing for it.

Imports: prometheus_client, manager.metrichub.store.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from manager.metrichub.store import HubStore

__all__ = ["HubCollector"]


class HubCollector:
    def __init__(self, store: HubStore, registry: CollectorRegistry) -> None:
        self.store = store
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily(
            "koord_manager_hub_reports_received", "Node metric reports accepted by the hub",
            value=self.store.reports_received,
        )  # fmt: skip
        yield GaugeMetricFamily(
            "koord_manager_hub_nodes", "Nodes with a report in the hub", value=self.store.node_count()
        )
        yield GaugeMetricFamily("koord_manager_hub_watchers", "Open Watch streams", value=self.store.watchers)
        yield GaugeMetricFamily(
            "koord_manager_hub_revision", "The hub's latest revision", value=self.store.revision
        )

    def describe(self) -> Iterator[Metric]:
        return iter(())
