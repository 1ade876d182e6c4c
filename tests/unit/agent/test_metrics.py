"""AgentMetrics on a fresh CollectorRegistry: collect/report counters, usage gauges read from the metric
cache, per-pod series removed when the pod is gone."""

from __future__ import annotations

import time

import pytest
from prometheus_client import CollectorRegistry

from agent.metriccache import MetricCache, Sample
from agent.metrics import AgentMetrics
from agent.podmeta import PodMeta, pod_meta
from agent.system.podcgroup import CgroupDriver
from apis.kubeobjects import Pod

NOW_MS = 1_714_564_800_000
NODE = "node-1"


def make_pod(uid: str, namespace: str = "ns", name: str | None = None) -> PodMeta:
    pod: Pod = {
        "metadata": {"uid": uid, "namespace": namespace, "name": name or uid},
        "spec": {"containers": []},
    }
    return pod_meta(pod, CgroupDriver.CGROUPFS)


def pod_labels(meta: PodMeta) -> dict[str, str]:
    return {"node": NODE, "pod_namespace": meta.namespace, "pod_name": meta.name, "pod_uid": meta.uid}


@pytest.fixture()
def metrics() -> AgentMetrics:
    return AgentMetrics(NODE, CollectorRegistry())


def test_start_time_and_report_series_preinitialised(metrics: AgentMetrics) -> None:
    r = metrics.registry
    start = r.get_sample_value("koordlet_start_time", {"node": NODE})
    assert start is not None and abs(start - time.time()) < 60
    for target in ("cr", "hub"):
        for status in ("succeeded", "failed"):
            labels = {"node": NODE, "target": target, "status": status}
            assert r.get_sample_value("koordlet_node_metric_reports_total", labels) == 0.0


def test_topology_and_device_reports_count_per_status(metrics: AgentMetrics) -> None:
    r = metrics.registry
    for name in ("koordlet_node_topology_reports_total", "koordlet_device_reports_total"):
        for status in ("succeeded", "failed"):  # both series exist before the first report
            assert r.get_sample_value(name, {"node": NODE, "status": status}) == 0.0
    metrics.on_device_report("succeeded")
    metrics.on_device_report("failed")
    metrics.on_device_report("succeeded")
    metrics.on_topology_report("failed")
    device = {s: r.get_sample_value("koordlet_device_reports_total", {"node": NODE, "status": s}) for s in
              ("succeeded", "failed")}  # fmt: skip
    assert device == {"succeeded": 2.0, "failed": 1.0}
    labels = {"node": NODE, "status": "failed"}
    assert r.get_sample_value("koordlet_node_topology_reports_total", labels) == 1.0


def test_registries_are_independent() -> None:
    a = AgentMetrics("a", CollectorRegistry())
    b = AgentMetrics("b", CollectorRegistry())
    a.on_report("cr", "succeeded")
    labels = {"node": "b", "target": "cr", "status": "succeeded"}
    assert b.registry.get_sample_value("koordlet_node_metric_reports_total", labels) == 0.0


def test_on_collect_counts_rounds_and_durations(metrics: AgentMetrics) -> None:
    metrics.on_collect("nodeResource", 0.002, True)
    metrics.on_collect("nodeResource", 0.2, True)
    metrics.on_collect("nodeResource", 0.003, False)
    r = metrics.registry
    base = {"node": NODE, "collector": "nodeResource"}
    assert r.get_sample_value("koordlet_collector_rounds_total", {**base, "status": "succeeded"}) == 2.0
    assert r.get_sample_value("koordlet_collector_rounds_total", {**base, "status": "failed"}) == 1.0
    assert r.get_sample_value("koordlet_collector_duration_seconds_count", base) == 3.0
    assert r.get_sample_value("koordlet_collector_duration_seconds_sum", base) == pytest.approx(0.205)
    assert r.get_sample_value("koordlet_collector_duration_seconds_bucket", {**base, "le": "0.0025"}) == 1.0
    assert r.get_sample_value("koordlet_collector_duration_seconds_bucket", {**base, "le": "0.005"}) == 2.0


def reports(m: AgentMetrics, target: str, status: str) -> float | None:
    labels = {"node": NODE, "target": target, "status": status}
    return m.registry.get_sample_value("koordlet_node_metric_reports_total", labels)


def last_report(m: AgentMetrics, target: str) -> float | None:
    labels = {"node": NODE, "target": target}
    return m.registry.get_sample_value("koordlet_node_metric_last_report_timestamp_seconds", labels)


def test_on_report_counts_and_stamps_success_only(metrics: AgentMetrics) -> None:
    metrics.on_report("hub", "failed")
    assert last_report(metrics, "hub") is None
    metrics.on_report("hub", "succeeded")
    metrics.on_report("hub", "succeeded")
    metrics.on_report("cr", "failed")
    assert reports(metrics, "hub", "succeeded") == 2.0
    assert reports(metrics, "hub", "failed") == 1.0
    assert reports(metrics, "cr", "failed") == 1.0
    assert reports(metrics, "cr", "succeeded") == 0.0
    stamp = last_report(metrics, "hub")
    assert stamp is not None and abs(stamp - time.time()) < 60
    assert last_report(metrics, "cr") is None


def test_update_usage_sets_node_and_pod_gauges_from_last_sample(metrics: AgentMetrics) -> None:
    cache = MetricCache()
    a, b = make_pod("uid-a", "default", "a"), make_pod("uid-b", "kube-system", "b")
    cache.append(
        [
            Sample("node_cpu_usage", {}, NOW_MS - 3000, 9.0),  # outside the 2 s window
            Sample("node_cpu_usage", {}, NOW_MS - 1500, 1.25),
            Sample("node_cpu_usage", {}, NOW_MS - 500, 1.5),  # the last
            Sample("node_memory_usage", {}, NOW_MS - 100, 2048.0),
            Sample("pod_cpu_usage", {"pod_uid": "uid-a"}, NOW_MS, 0.5),
            Sample("pod_memory_usage", {"pod_uid": "uid-a"}, NOW_MS, 1024.0),
            Sample("pod_cpu_usage", {"pod_uid": "uid-b"}, NOW_MS - 1000, 0.25),
            Sample("pod_memory_usage", {"pod_uid": "uid-b"}, NOW_MS - 1000, 4096.0),
        ]
    )
    metrics.update_usage(cache, [a, b], NOW_MS, 2000)
    r = metrics.registry
    assert r.get_sample_value("koordlet_node_used_cpu_cores", {"node": NODE}) == 1.5
    assert r.get_sample_value("koordlet_node_used_memory_bytes", {"node": NODE}) == 2048.0
    assert r.get_sample_value("koordlet_pod_used_cpu_cores", pod_labels(a)) == 0.5
    assert r.get_sample_value("koordlet_pod_used_memory_bytes", pod_labels(a)) == 1024.0
    assert r.get_sample_value("koordlet_pod_used_cpu_cores", pod_labels(b)) == 0.25
    assert r.get_sample_value("koordlet_pod_used_memory_bytes", pod_labels(b)) == 4096.0
    assert r.get_sample_value("koordlet_metric_cache_series", {"node": NODE}) == 6.0


def test_update_usage_removes_series_of_gone_pods(metrics: AgentMetrics) -> None:
    cache = MetricCache()
    a, b = make_pod("uid-a"), make_pod("uid-b")
    for uid in ("uid-a", "uid-b"):
        cache.append(
            [
                Sample("pod_cpu_usage", {"pod_uid": uid}, NOW_MS, 1.0),
                Sample("pod_memory_usage", {"pod_uid": uid}, NOW_MS, 1.0),
            ]
        )
    metrics.update_usage(cache, [a, b], NOW_MS, 2000)
    r = metrics.registry
    assert r.get_sample_value("koordlet_pod_used_cpu_cores", pod_labels(b)) == 1.0
    metrics.update_usage(cache, [a], NOW_MS, 2000)  # b left the node
    assert r.get_sample_value("koordlet_pod_used_cpu_cores", pod_labels(b)) is None
    assert r.get_sample_value("koordlet_pod_used_memory_bytes", pod_labels(b)) is None
    assert r.get_sample_value("koordlet_pod_used_cpu_cores", pod_labels(a)) == 1.0
    metrics.update_usage(cache, [], NOW_MS, 2000)
    assert r.get_sample_value("koordlet_pod_used_cpu_cores", pod_labels(a)) is None
    # removing twice (pod already gone) does not fail
    metrics.update_usage(cache, [], NOW_MS, 2000)
    text = "\n".join(
        s.name for fam in r.collect() for s in fam.samples if s.name.startswith("koordlet_pod_used")
    )
    assert text == ""


def test_update_usage_pod_without_fresh_sample_not_exported(metrics: AgentMetrics) -> None:
    cache = MetricCache()
    a = make_pod("uid-a")
    cache.append([Sample("pod_cpu_usage", {"pod_uid": "uid-a"}, NOW_MS, 1.0)])  # no memory sample
    metrics.update_usage(cache, [a], NOW_MS, 2000)
    assert metrics.registry.get_sample_value("koordlet_pod_used_cpu_cores", pod_labels(a)) is None


def test_update_usage_keeps_node_gauge_without_fresh_sample(metrics: AgentMetrics) -> None:
    cache = MetricCache()
    cache.append([Sample("node_cpu_usage", {}, NOW_MS, 3.0), Sample("node_memory_usage", {}, NOW_MS, 5.0)])
    metrics.update_usage(cache, [], NOW_MS, 2000)
    metrics.update_usage(cache, [], NOW_MS + 10_000, 2000)  # the samples are now stale
    r = metrics.registry
    assert r.get_sample_value("koordlet_node_used_cpu_cores", {"node": NODE}) == 3.0
    assert r.get_sample_value("koordlet_node_used_memory_bytes", {"node": NODE}) == 5.0


def test_renamed_pod_same_uid_replaces_series(metrics: AgentMetrics) -> None:
    cache = MetricCache()
    cache.append(
        [
            Sample("pod_cpu_usage", {"pod_uid": "u"}, NOW_MS, 2.0),
            Sample("pod_memory_usage", {"pod_uid": "u"}, NOW_MS, 2.0),
        ]
    )
    old, new = make_pod("u", "ns", "old-name"), make_pod("u", "ns", "new-name")
    metrics.update_usage(cache, [old], NOW_MS, 2000)
    metrics.update_usage(cache, [new], NOW_MS, 2000)
    r = metrics.registry
    assert r.get_sample_value("koordlet_pod_used_cpu_cores", pod_labels(old)) is None
    assert r.get_sample_value("koordlet_pod_used_cpu_cores", pod_labels(new)) == 2.0


def test_process_metrics_are_exported() -> None:
    registry = CollectorRegistry()
    AgentMetrics("n1", registry)
    rss = registry.get_sample_value("process_resident_memory_bytes")
    assert rss is not None and rss > 10 * 1024 * 1024
    assert (registry.get_sample_value("process_cpu_seconds_total") or 0) > 0


def test_blindness_is_computed_at_scrape_time() -> None:
    from agent.metrics import BlindnessCollector

    registry = CollectorRegistry()
    ages: list[float | None] = [None, 3.5]
    BlindnessCollector("n1", lambda: ages[0], registry)
    assert registry.get_sample_value("koordlet_metrics_blind_seconds", {"node": "n1"}) is None
    ages[0] = ages[1]
    assert registry.get_sample_value("koordlet_metrics_blind_seconds", {"node": "n1"}) == 3.5
