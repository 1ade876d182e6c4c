"""NodeResource controller on the real API server: batch resources appear on the node with the
worked-example numbers of docs/rules/manager.md#batch-resource-formula, follow the NodeMetric, do not flap on
small changes, degrade on a stale NodeMetric, and go when colocation is switched off; the explain
annotation and the gauge follow."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from apis.constants import BATCH_CPU, BATCH_MEMORY, NODE_METRIC_PLURAL, SLO_GROUP, SLO_VERSION
from manager.noderesource.plugins.batchresource import ANNOTATION_BATCH_RESOURCE_EXPLAIN
from tests.integration.manager.conftest import Harness, wait_for

pytestmark = pytest.mark.apiserver

GI = 1024**3


def _time(delta: timedelta = timedelta(0)) -> str:
    return (datetime.now(UTC) + delta).strftime("%Y-%m-%dT%H:%M:%SZ")


def _node(h: Harness) -> str:
    name = h.node_name("big")
    h.core.create_node(
        {
            "metadata": {"name": name},
            "status": {
                "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                "allocatable": {"cpu": "31", "memory": "124Gi", "pods": "110"},
            },
        }
    )
    return name


def _pods(h: Harness, node: str) -> None:
    for name, cpu, mem in (("a", "8", "16Gi"), ("b", "4", "8Gi")):
        h.core.create_namespaced_pod(
            h.namespace,
            {
                "metadata": {"name": name},
                "spec": {
                    "nodeName": node,
                    "containers": [
                        {
                            "name": "c",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": cpu, "memory": mem}},
                        }
                    ],
                },
            },
        )


def _metric_status(h: Harness, system_cpu: str, updated: str) -> dict[str, Any]:
    """NodeMetric status of the worked example (pod a of the node uses 3 cores, 10 Gi)."""
    return {
        "updateTime": updated,
        "nodeMetric": {
            "nodeUsage": {"resources": {"cpu": "6", "memory": "20Gi"}},
            "systemUsage": {"resources": {"cpu": system_cpu, "memory": "6Gi"}},
        },
        "podsMetric": [
            {
                "namespace": h.namespace,
                "name": "a",
                "priority": "koord-prod",
                "podUsage": {"resources": {"cpu": "3", "memory": "10Gi"}},
            }
        ],
    }


def _set_metric(h: Harness, node: str, system_cpu: str, updated: str) -> None:
    status = _metric_status(h, system_cpu, updated)
    h.custom.patch_cluster_custom_object_status(
        SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, node, {"status": status}
    )


def _allocatable(h: Harness, node: str) -> dict[str, Any]:
    return dict(h.core.read_node(node).status.allocatable or {})


def test_a_degraded_node_recovers_from_a_hub_report_without_any_cr_event(harness: Harness) -> None:
    h = harness
    h.set_config({"colocation-config": {"enable": True}})
    node = _node(h)
    _pods(h, node)
    wait_for(lambda: h.nodemetric(node), 10, "the NodeMetric controller to create the NodeMetric")

    # No status in the CR: degraded (nothing to write), no batch resources.
    def reconciled() -> float:
        return sum(
            h.sample("slo_controller_node_resource_reconcile_count", status="succeeded", reason=r)
            for r in ("unchanged", "degradedByBatchResource")
        )

    wait_for(reconciled, 10, "a reconcile of the degraded node")
    assert BATCH_CPU not in _allocatable(h, node)
    # The hub gets a fresh report (the CR still has none): recomputed within the degraded retry.
    h.hub[node] = {"status": _metric_status(h, "1500m", _time())}
    got = wait_for(lambda: _allocatable(h, node).get(BATCH_CPU), 15, "batch resources from the hub report")
    assert got == "10700"  # the same worked example as below, from the hub alone


def test_batch_resources_follow_the_nodemetric(harness: Harness) -> None:
    h = harness
    h.set_config({"colocation-config": {"enable": True}})
    node = _node(h)
    _pods(h, node)
    wait_for(lambda: h.nodemetric(node), 10, "the NodeMetric controller to create the NodeMetric")
    _set_metric(h, node, "1500m", _time())

    # the worked example of docs/rules/manager.md#batch-resource-formula:
    # 32000 − 12800 − 1500 − (3000 + 4000) = 10700 milli-cores;
    # 137438953472 − 48103633715 − 6 Gi − (10 Gi + 8 Gi) = 63565515981 bytes.
    def batch() -> tuple[str, str] | None:
        a = _allocatable(h, node)
        return (a[BATCH_CPU], a[BATCH_MEMORY]) if BATCH_CPU in a and BATCH_MEMORY in a else None

    assert wait_for(batch, 10, "batch resources") == ("10700", "63565515981")
    capacity = h.core.read_node(node).status.capacity
    assert capacity[BATCH_CPU] == "10700"

    # The status and the annotation are two requests (metadata is not part of the status subresource), so
    # the annotation can still hold an earlier reconcile's explanation (the degraded one written before
    # the metric arrived) for a moment after the status shows 10700: wait for the one explaining it.
    def explain() -> str | None:
        text = (h.core.read_node(node).metadata.annotations or {}).get(ANNOTATION_BATCH_RESOURCE_EXPLAIN)
        return text if text is not None and "10700" in json.dumps(json.loads(text)) else None

    terms = json.loads(wait_for(explain, 5, "the explain annotation of 10700"))
    assert "12800" in json.dumps(terms)
    gauge = h.sample(
        "slo_controller_node_extended_resource_allocatable_internal",
        node=node,
        resource=BATCH_CPU,
        unit="integer",
    )
    assert gauge == pytest.approx(10.7)

    # A small change (100m of 10700, under the 10 % diff threshold) is not written.
    _set_metric(h, node, "1600m", _time())
    time.sleep(2.0)
    assert _allocatable(h, node)[BATCH_CPU] == "10700"
    # A large one is: 32000 − 12800 − 6000 − 7000 = 6200.
    _set_metric(h, node, "6", _time())
    wait_for(lambda: _allocatable(h, node).get(BATCH_CPU) == "6200", 10, "batch-cpu 6200")

    # A NodeMetric older than degradeTimeMinutes (15) removes the batch resources.
    _set_metric(h, node, "6", _time(-timedelta(minutes=20)))
    wait_for(lambda: BATCH_CPU not in _allocatable(h, node), 10, "degraded: batch resources removed")
    assert BATCH_MEMORY not in _allocatable(h, node)

    # Fresh again, then colocation switched off: removed with the disabled reason.
    _set_metric(h, node, "1500m", _time())
    wait_for(lambda: _allocatable(h, node).get(BATCH_CPU) == "10700", 10, "batch back")
    h.set_config({"colocation-config": {"enable": False}})
    wait_for(lambda: BATCH_CPU not in _allocatable(h, node), 10, "colocation off: batch resources removed")
