"""bench/soak.py's pure parts: the RSS growth line, the banner's metrics URLs and the metric sums (the run
itself is `koord up` for minutes: a bench, not a test)."""

from __future__ import annotations

import pytest

from bench.soak import metrics_urls, slope_per_hour, total


def test_growth_is_the_least_squares_slope_in_mib_per_hour() -> None:
    flat = [(float(t), 50_000 + (7 if t % 20 else -7)) for t in range(0, 600, 10)]
    assert abs(slope_per_hour(flat)) < 0.5
    leak = [(float(t), 50_000 + t) for t in range(0, 600, 10)]  # 1 KiB/s
    assert slope_per_hour(leak) == pytest.approx(3600 / 1024)
    assert slope_per_hour([(0.0, 1)]) == 0.0


def test_metrics_urls_from_the_banner() -> None:
    banner = (
        "  koord-manager: metrics http://127.0.0.1:1/metrics, log /x/koord-manager.log\n"
        "  koordlet-sim-node-1: metrics http://127.0.0.1:2/metrics, log /x/k.log\n"
        "  MetricHub gRPC 127.0.0.1:3\n"
    )
    assert metrics_urls(banner) == {
        "koord-manager": "http://127.0.0.1:1/metrics",
        "koordlet-sim-node-1": "http://127.0.0.1:2/metrics",
    }


def test_total_sums_matching_labels() -> None:
    samples = {
        'koordlet_node_metric_reports_total{node="a",status="failed",target="hub"}': 2.0,
        'koordlet_node_metric_reports_total{node="b",status="failed",target="hub"}': 1.0,
        'koordlet_node_metric_reports_total{node="a",status="succeeded",target="hub"}': 9.0,
        'koordlet_node_metric_reports_created{node="a",status="failed",target="hub"}': 5.0,
    }
    assert total(samples, "koordlet_node_metric_reports_total", target="hub", status="failed") == 3.0
    assert total(samples, "koordlet_node_metric_reports_total") == 12.0
