"""build_status (docs/rules/koordlet.md#reporter): the NodeMetric status built from a real MetricCache with
known samples.

Every expected value is computed by hand in the comments (never with the code under test).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent.metriccache import MetricCache, Sample
from agent.podmeta import PodMeta, pod_meta
from agent.reporter.build import (
    ReportInputs,
    aggregate_duration_seconds,
    build_status,
    report_interval_seconds,
)
from agent.system.podcgroup import CgroupDriver
from apis.duration import Duration
from apis.nodemetric import AggregatePolicy, MemoryCollectPolicy, NodeMetricCollectPolicy
from apis.nodeslo import HostApplicationSpec

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
NOW_MS = 1714564800000  # 2024-05-01T12:00:00Z in Unix ms
MI = 1024 * 1024
GI = 1024 * MI
COLD: dict[str, Any] = {"avg": {}, "p50": {}, "p90": {}, "p95": {}, "p99": {}}


def test_now_ms_constant() -> None:
    assert int(NOW.timestamp()) * 1000 == NOW_MS


def policy(
    aggregate: int | None = 120,
    durations: Sequence[str] = ("2m",),
    memory: MemoryCollectPolicy | None = None,
    report: int | None = None,
) -> NodeMetricCollectPolicy:
    return NodeMetricCollectPolicy(
        aggregate_duration_seconds=aggregate,
        report_interval_seconds=report,
        node_aggregate_policy=AggregatePolicy([Duration.parse(d) for d in durations]),
        node_memory_collect_policy=memory,
    )


def build(
    cache: MetricCache,
    pol: NodeMetricCollectPolicy | None = None,
    pods: Sequence[PodMeta] = (),
    host_apps: Sequence[HostApplicationSpec] | None = None,
    numa_ids: Sequence[int] = (),
    cold: bool = False,
    now: datetime = NOW,
    clock: Callable[[], datetime] | None = None,
) -> dict[str, Any]:
    status = build_status(
        ReportInputs(
            cache=cache,
            now=now,
            policy=pol if pol is not None else policy(),
            pods=pods,
            host_apps=host_apps,
            numa_ids=numa_ids,
            cold_memory_running=cold,
            clock=clock or (lambda: NOW + timedelta(seconds=1)),
        )
    )
    return status.to_dict()


def node(kind: str, ts: int, value: float) -> Sample:
    return Sample(kind, {}, ts, value)


def pod_sample(kind: str, uid: str, ts: int, value: float) -> Sample:
    return Sample(kind, {"pod_uid": uid}, ts, value)


def app_sample(kind: str, name: str, ts: int, value: float) -> Sample:
    return Sample(kind, {"host_app_name": name}, ts, value)


def make_pod(
    uid: str,
    namespace: str,
    name: str,
    labels: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
) -> PodMeta:
    pod = {
        "metadata": {"uid": uid, "namespace": namespace, "name": name, "labels": labels or {}},
        "spec": spec or {"containers": [{"name": "c"}]},
        "status": {},
    }
    return pod_meta(pod, CgroupDriver.CGROUPFS)


# --- nodeUsage ------------------------------------------------------------------------------------------
def test_node_usage_avg_over_inclusive_window() -> None:
    cache = MetricCache()
    start = NOW_MS - 120_000  # aggregateDurationSeconds 120 → [now − 120 s, now]
    cache.append(
        [
            node("node_cpu_usage", start - 1, 100.0),  # just outside
            node("node_cpu_usage", start, 1.0),  # start inclusive
            node("node_cpu_usage", NOW_MS - 60_000, 2.0),
            node("node_cpu_usage", NOW_MS, 3.0),  # end inclusive
            node("node_cpu_usage", NOW_MS + 1, 100.0),  # just outside
            node("node_memory_usage", start - 1, 100.0 * GI),
            node("node_memory_usage", start, 1.0 * GI),
            node("node_memory_usage", NOW_MS, 3.0 * GI),
            node("node_memory_usage", NOW_MS + 1, 100.0 * GI),
        ]
    )
    out = build(cache)
    # cpu avg (1+2+3)/3 = 2 → 2000m → "2"; memory (1+3)/2 Gi = 2Gi.
    assert out["nodeMetric"]["nodeUsage"] == {"resources": {"cpu": "2", "memory": "2Gi"}}


def test_aggregate_duration_is_floored_to_60s() -> None:
    cache = MetricCache()
    cache.append(
        [
            node("node_cpu_usage", NOW_MS - 60_001, 9.0),  # outside the 60 s floor
            node("node_cpu_usage", NOW_MS - 60_000, 1.0),  # inside only thanks to the floor
            node("node_cpu_usage", NOW_MS - 5_000, 2.0),
            node("node_memory_usage", NOW_MS - 60_000, 4.0 * MI),
        ]
    )
    out = build(cache, policy(aggregate=10))
    # window [now − 60 s, now]: cpu (1 + 2)/2 = 1.5 → "1500m"; memory 4Mi.
    assert out["nodeMetric"]["nodeUsage"] == {"resources": {"cpu": "1500m", "memory": "4Mi"}}


def test_default_aggregate_duration_is_300s() -> None:
    cache = MetricCache()
    cache.append(
        [
            node("node_cpu_usage", NOW_MS - 300_001, 9.0),
            node("node_cpu_usage", NOW_MS - 300_000, 1.0),
            node("node_memory_usage", NOW_MS - 300_000, 1.0 * MI),
        ]
    )
    out = build(cache, policy(aggregate=None))
    assert out["nodeMetric"]["nodeUsage"] == {"resources": {"cpu": "1", "memory": "1Mi"}}


@pytest.mark.parametrize(
    ("cpu", "memory", "want_cpu", "want_memory"),
    [
        (0.9999, 1023.9, "999m", "1023"),  # int(999.9) = 999 (truncated, not rounded to 1)
        (1.2345, 1536.5, "1234m", "1536"),  # 1234.4999… → 1234; 1536 bytes = 1.5Ki is not an integer Ki
        (0.0009, 2048.99, "0", "2Ki"),  # int(0.9) = 0
        (2.0, 3.0 * GI, "2", "3Gi"),
    ],
)
def test_node_usage_truncates_to_milli_cpu_and_bytes(
    cpu: float, memory: float, want_cpu: str, want_memory: str
) -> None:
    cache = MetricCache()
    cache.append([node("node_cpu_usage", NOW_MS, cpu), node("node_memory_usage", NOW_MS, memory)])
    out = build(cache)
    assert out["nodeMetric"]["nodeUsage"] == {"resources": {"cpu": want_cpu, "memory": want_memory}}


@pytest.mark.parametrize("present", ["node_cpu_usage", "node_memory_usage", None])
def test_node_usage_empty_when_cpu_or_memory_missing(present: str | None) -> None:
    cache = MetricCache()
    if present is not None:
        cache.append([node(present, NOW_MS - 1000, 1.0)])
    # A sample of the other kind exists but outside the window: still missing.
    other = "node_memory_usage" if present == "node_cpu_usage" else "node_cpu_usage"
    cache.append([node(other, NOW_MS - 121_000, 1.0)])
    out = build(cache)
    assert out["nodeMetric"]["nodeUsage"] == {}
    assert out["nodeMetric"]["systemUsage"] == {}


def test_now_is_floored_to_the_millisecond() -> None:
    cache = MetricCache()
    cache.append(
        [
            node("node_cpu_usage", NOW_MS + 1, 2.0),  # now = NOW + 1.5 ms → end = NOW_MS + 1
            node("node_cpu_usage", NOW_MS + 2, 100.0),
            node("node_memory_usage", NOW_MS + 1, 1.0 * MI),
        ]
    )
    out = build(cache, now=NOW + timedelta(microseconds=1500))
    assert out["nodeMetric"]["nodeUsage"] == {"resources": {"cpu": "2", "memory": "1Mi"}}


# --- aggregatedNodeUsages -----------------------------------------------------------------------------
def ten_points(cache: MetricCache, cpu_kind: str, mem_kind: str) -> None:
    """cpu 1..10 cores and memory 1..10 Mi at now − 90 s, now − 80 s, …, now."""
    cache.append(
        [node(cpu_kind, NOW_MS - 90_000 + 10_000 * i, float(i + 1)) for i in range(10)]
        + [node(mem_kind, NOW_MS - 90_000 + 10_000 * i, float((i + 1) * MI)) for i in range(10)]
    )


def test_aggregated_usages_one_entry_per_duration_in_order() -> None:
    cache = MetricCache()
    ten_points(cache, "node_cpu_usage", "node_memory_usage")
    out = build(cache, policy(durations=("2m", "1m")))
    agg = out["nodeMetric"]["aggregatedNodeUsages"]
    assert [a["duration"] for a in agg] == ["2m0s", "1m0s"]
    # 2m: all 10 points, span 90 s ≥ 60 s. avg 5.5; n=10: p50 idx int(5)−1=4 → 5;
    # p90 idx int(f32(10)×f32(0.9)=9.0)−1=8 → 9 (float64 would give 8.99… → idx 7 → 8);
    # p95 int(9.4999…)−1=8 → 9; p99 int(9.9)−1=8 → 9.
    assert agg[0]["usage"] == {
        "avg": {"resources": {"cpu": "5500m", "memory": "5632Ki"}},  # 5.5Mi = 5632Ki
        "p50": {"resources": {"cpu": "5", "memory": "5Mi"}},
        "p90": {"resources": {"cpu": "9", "memory": "9Mi"}},
        "p95": {"resources": {"cpu": "9", "memory": "9Mi"}},
        "p99": {"resources": {"cpu": "9", "memory": "9Mi"}},
    }
    # 1m: points 4..10 (now − 60 s inclusive), span 60 s ≥ 30 s. n=7: avg 49/7=7;
    # p50 int(3.5)−1=2 → 6; p90 int(6.3)−1=5 → 9; p95 int(6.65)−1=5 → 9; p99 int(6.93)−1=5 → 9.
    assert agg[1]["usage"] == {
        "avg": {"resources": {"cpu": "7", "memory": "7Mi"}},
        "p50": {"resources": {"cpu": "6", "memory": "6Mi"}},
        "p90": {"resources": {"cpu": "9", "memory": "9Mi"}},
        "p95": {"resources": {"cpu": "9", "memory": "9Mi"}},
        "p99": {"resources": {"cpu": "9", "memory": "9Mi"}},
    }


def test_percentiles_use_float32_nearest_rank_lower() -> None:
    cache = MetricCache()
    # 100 points, values 100..1 (reverse order, so sorting matters), 1 s apart ending at now: span 99 s.
    cache.append(
        [node("node_cpu_usage", NOW_MS - 99_000 + 1000 * i, float(100 - i)) for i in range(100)]
        + [node("node_memory_usage", NOW_MS - 99_000 + 1000 * i, float((100 - i) * MI)) for i in range(100)]
    )
    out = build(cache, policy(durations=("2m",)))
    usage = out["nodeMetric"]["aggregatedNodeUsages"][0]["usage"]
    # avg 50.5 → "50500m"; memory 50.5Mi = 51712Ki.
    assert usage["avg"] == {"resources": {"cpu": "50500m", "memory": "51712Ki"}}
    # f32(100)×f32(0.5)=50 → idx 49 → 50; ×f32(0.9)=89.99999762 → f32 90.0 → idx 89 → 90;
    # ×f32(0.95)=94.9999988 → f32 95.0 → idx 94 → 95; ×f32(0.99)=99.000001 → f32 99.0 → idx 98 → 99.
    assert usage["p50"] == {"resources": {"cpu": "50", "memory": "50Mi"}}
    assert usage["p90"] == {"resources": {"cpu": "90", "memory": "90Mi"}}
    assert usage["p95"] == {"resources": {"cpu": "95", "memory": "95Mi"}}
    assert usage["p99"] == {"resources": {"cpu": "99", "memory": "99Mi"}}


@pytest.mark.parametrize(
    ("cpu_span_ms", "cold"),
    [(60_000, False), (59_999, True), (0, True), (120_000, False)],
)
def test_cold_start_rule_on_cpu_time_range(cpu_span_ms: int, cold: bool) -> None:
    cache = MetricCache()
    cache.append(
        [
            node("node_cpu_usage", NOW_MS - cpu_span_ms, 1.0),
            node("node_cpu_usage", NOW_MS, 3.0),
            # memory covers the whole 2m window: only the CPU series decides.
            node("node_memory_usage", NOW_MS - 120_000, 1.0 * MI),
            node("node_memory_usage", NOW_MS, 3.0 * MI),
        ]
    )
    out = build(cache, policy(durations=("2m",)))
    entry = out["nodeMetric"]["aggregatedNodeUsages"][0]
    if cold:  # span < 0.5 × 120 s
        assert entry == {"usage": COLD, "duration": "2m0s"}
    else:
        # cpu [1, 3]: avg 2, p50 idx int(1)−1=0 → 1, p90 int(1.8)−1=0 → 1, p99 int(1.98)−1=0 → 1.
        assert entry["usage"]["avg"] == {"resources": {"cpu": "2", "memory": "2Mi"}}
        assert entry["usage"]["p50"] == {"resources": {"cpu": "1", "memory": "1Mi"}}
        assert entry["usage"]["p99"] == {"resources": {"cpu": "1", "memory": "1Mi"}}


def test_cold_start_ignores_memory_time_range() -> None:
    cache = MetricCache()
    cache.append(
        [
            node("node_cpu_usage", NOW_MS - 120_000, 1.0),
            node("node_cpu_usage", NOW_MS, 1.0),
            node("node_memory_usage", NOW_MS, 5.0 * MI),  # a single memory point: span 0
        ]
    )
    out = build(cache, policy(durations=("2m",)))
    assert out["nodeMetric"]["aggregatedNodeUsages"][0]["usage"]["avg"] == {
        "resources": {"cpu": "1", "memory": "5Mi"}
    }


def test_aggregated_type_empty_when_memory_missing() -> None:
    cache = MetricCache()
    cache.append([node("node_cpu_usage", NOW_MS - 120_000, 1.0), node("node_cpu_usage", NOW_MS, 1.0)])
    out = build(cache, policy(durations=("2m",)))
    assert out["nodeMetric"]["aggregatedNodeUsages"] == [{"usage": COLD, "duration": "2m0s"}]


def test_default_durations_cold_window_json() -> None:
    cache = MetricCache()
    cache.append([node("node_cpu_usage", NOW_MS, 1.0), node("node_memory_usage", NOW_MS, 1.0 * MI)])
    out = build(cache, NodeMetricCollectPolicy())
    assert out["nodeMetric"]["aggregatedNodeUsages"] == [
        {"usage": COLD, "duration": "5m0s"},
        {"usage": COLD, "duration": "10m0s"},
        {"usage": COLD, "duration": "30m0s"},
    ]
    assert out["nodeMetric"]["aggregatedSystemUsages"][2] == {"usage": COLD, "duration": "30m0s"}


def test_aggregate_window_not_floored_zero_duration() -> None:
    cache = MetricCache()
    cache.append(
        [
            node("node_cpu_usage", NOW_MS - 1, 100.0),  # outside a 0-length window
            node("node_cpu_usage", NOW_MS, 2.0),
            node("node_memory_usage", NOW_MS, 1.0 * MI),
        ]
    )
    out = build(cache, policy(durations=("0s",)))
    entry = out["nodeMetric"]["aggregatedNodeUsages"][0]
    assert entry["duration"] == "0s"
    # span 0 s < 0.5 × 0 s is False: not cold; window [now, now] holds only the 2-core sample.
    assert entry["usage"]["avg"] == {"resources": {"cpu": "2", "memory": "1Mi"}}
    assert entry["usage"]["p90"] == {"resources": {"cpu": "2", "memory": "1Mi"}}


# --- systemUsage ---------------------------------------------------------------------------------------
def test_system_usage_and_aggregated_system_usages() -> None:
    cache = MetricCache()
    ten_points(cache, "sys_cpu_usage", "sys_memory_usage")
    # node kinds hold other values: the system entries must not read them.
    cache.append([node("node_cpu_usage", NOW_MS, 50.0), node("node_memory_usage", NOW_MS, 50.0 * MI)])
    out = build(cache, policy(aggregate=60, durations=("2m",)))
    nm = out["nodeMetric"]
    # main window 60 s: points 4..10 → avg 7.
    assert nm["systemUsage"] == {"resources": {"cpu": "7", "memory": "7Mi"}}
    assert nm["nodeUsage"] == {"resources": {"cpu": "50", "memory": "50Mi"}}
    assert nm["aggregatedSystemUsages"][0]["usage"]["avg"] == {
        "resources": {"cpu": "5500m", "memory": "5632Ki"}
    }
    assert nm["aggregatedSystemUsages"][0]["usage"]["p90"] == {"resources": {"cpu": "9", "memory": "9Mi"}}
    # node aggregated: one 50-core point only, span 0 → cold.
    assert nm["aggregatedNodeUsages"][0] == {"usage": COLD, "duration": "2m0s"}


def test_system_usage_ignores_memory_policy() -> None:
    cache = MetricCache()
    cache.append([node("sys_cpu_usage", NOW_MS, 1.0), node("sys_memory_usage", NOW_MS, 2.0 * MI)])
    out = build(cache, policy(memory=MemoryCollectPolicy.USAGE_WITH_PAGE_CACHE))
    assert out["nodeMetric"]["systemUsage"] == {"resources": {"cpu": "1", "memory": "2Mi"}}


# --- memory kind per nodeMemoryCollectPolicy -------------------------------------------------------------
MEM_KINDS = {
    "memory_usage": 1,
    "memory_usage_with_page_cache": 2,
    "memory_with_hot_page_usage": 3,
}


def all_memory_kinds(cache: MetricCache, uid: str, app: str) -> None:
    samples: list[Sample] = [
        node("node_cpu_usage", NOW_MS, 1.0),
        pod_sample("pod_cpu_usage", uid, NOW_MS, 1.0),
        app_sample("host_application_cpu_usage", app, NOW_MS, 1.0),
    ]
    for suffix, mi in MEM_KINDS.items():
        samples.append(node(f"node_{suffix}", NOW_MS, float(mi * MI)))
        samples.append(pod_sample(f"pod_{suffix}", uid, NOW_MS, float(10 * mi * MI)))
        samples.append(app_sample(f"host_application_{suffix}", app, NOW_MS, float(100 * mi * MI)))
    cache.append(samples)


@pytest.mark.parametrize(
    ("mem_policy", "cold", "mi"),
    [
        (None, False, 1),
        (MemoryCollectPolicy.USAGE_WITHOUT_PAGE_CACHE, False, 1),
        (MemoryCollectPolicy.USAGE_WITHOUT_PAGE_CACHE, True, 1),
        (MemoryCollectPolicy.USAGE_WITH_PAGE_CACHE, False, 2),
        (MemoryCollectPolicy.USAGE_WITH_PAGE_CACHE, True, 2),
        (MemoryCollectPolicy.USAGE_WITH_HOT_PAGE_CACHE, False, 1),  # falls back without cold memory
        (MemoryCollectPolicy.USAGE_WITH_HOT_PAGE_CACHE, True, 3),
    ],
)
def test_memory_kind_follows_policy(mem_policy: MemoryCollectPolicy | None, cold: bool, mi: int) -> None:
    cache = MetricCache()
    all_memory_kinds(cache, "u1", "app")
    out = build(
        cache,
        policy(memory=mem_policy),
        pods=[make_pod("u1", "ns", "p")],
        host_apps=[HostApplicationSpec(name="app")],
        cold=cold,
    )
    assert out["nodeMetric"]["nodeUsage"]["resources"]["memory"] == f"{mi}Mi"
    assert out["podsMetric"][0]["podUsage"]["resources"]["memory"] == f"{10 * mi}Mi"
    assert out["hostApplicationMetric"][0]["usage"]["resources"]["memory"] == f"{100 * mi}Mi"


def test_with_page_cache_policy_without_such_samples() -> None:
    cache = MetricCache()
    cache.append(
        [
            node("node_cpu_usage", NOW_MS, 1.0),
            node("node_memory_usage", NOW_MS, 1.0 * MI),
            pod_sample("pod_cpu_usage", "u1", NOW_MS, 1.0),
            pod_sample("pod_memory_usage", "u1", NOW_MS, 1.0 * MI),
            app_sample("host_application_cpu_usage", "app", NOW_MS, 1.0),
            app_sample("host_application_memory_usage_with_page_cache", "app", NOW_MS, 4.0 * MI),
        ]
    )
    out = build(
        cache,
        policy(memory=MemoryCollectPolicy.USAGE_WITH_PAGE_CACHE),
        pods=[make_pod("u1", "ns", "p")],
        host_apps=[HostApplicationSpec(name="app")],
    )
    assert out["nodeMetric"]["nodeUsage"] == {}
    assert "podsMetric" not in out
    assert out["hostApplicationMetric"] == [
        {"name": "app", "usage": {"resources": {"cpu": "1", "memory": "4Mi"}}}
    ]


# --- podsMetric -----------------------------------------------------------------------------------------
def test_pods_skipped_without_cpu_or_memory_in_window() -> None:
    cache = MetricCache()
    cache.append(
        [
            pod_sample("pod_cpu_usage", "ok", NOW_MS - 1000, 0.5),
            pod_sample("pod_memory_usage", "ok", NOW_MS - 1000, 8.0 * MI),
            pod_sample("pod_cpu_usage", "cpu-only", NOW_MS, 0.5),
            pod_sample("pod_memory_usage", "mem-only", NOW_MS, 8.0 * MI),
            pod_sample("pod_cpu_usage", "old", NOW_MS - 120_001, 0.5),
            pod_sample("pod_memory_usage", "old", NOW_MS - 120_001, 8.0 * MI),
        ]
    )
    pods = [
        make_pod(uid, "ns", uid)
        for uid in ("ok", "cpu-only", "mem-only", "old", "never")  # "never" has no sample at all
    ]
    out = build(cache, pods=pods)
    assert [p["name"] for p in out["podsMetric"]] == ["ok"]
    assert out["podsMetric"][0]["podUsage"] == {"resources": {"cpu": "500m", "memory": "8Mi"}}


def test_pod_usage_is_avg_over_main_window_per_uid() -> None:
    cache = MetricCache()
    cache.append(
        [
            pod_sample("pod_cpu_usage", "a", NOW_MS - 100_000, 0.1),
            pod_sample("pod_cpu_usage", "a", NOW_MS, 0.3),
            pod_sample("pod_cpu_usage", "b", NOW_MS, 9.0),  # another pod: not pooled into a
            pod_sample("pod_memory_usage", "a", NOW_MS - 100_000, 1.0 * MI),
            pod_sample("pod_memory_usage", "a", NOW_MS, 2.0 * MI),
        ]
    )
    out = build(cache, pods=[make_pod("a", "ns", "a")])
    # cpu (0.1 + 0.3)/2 = 0.2 → 200m (0.2×1000 = 200.00000000000003 → 200); memory 1.5Mi = 1536Ki.
    assert out["podsMetric"][0]["podUsage"] == {"resources": {"cpu": "200m", "memory": "1536Ki"}}


def test_pods_sorted_by_namespace_then_name_bytewise() -> None:
    cache = MetricCache()
    specs = [("1", "b", "x"), ("2", "a", "z"), ("3", "B", "y"), ("4", "a", "Z"), ("5", "a", "_")]
    for uid, _, _ in specs:
        cache.append(
            [
                pod_sample("pod_cpu_usage", uid, NOW_MS, 1.0),
                pod_sample("pod_memory_usage", uid, NOW_MS, 1.0 * MI),
            ]
        )
    out = build(cache, pods=[make_pod(uid, ns, name) for uid, ns, name in specs])
    # byte order: "B" (0x42) < "a" (0x61) < "b"; within "a": "Z" (0x5a) < "_" (0x5f) < "z".
    assert [(p["namespace"], p["name"]) for p in out["podsMetric"]] == [
        ("B", "y"),
        ("a", "Z"),
        ("a", "_"),
        ("a", "z"),
        ("b", "x"),
    ]


def test_pod_priority_and_qos_with_defaults() -> None:
    cache = MetricCache()
    for uid in ("be", "guaranteed", "mid", "besteffort"):
        cache.append(
            [
                pod_sample("pod_cpu_usage", uid, NOW_MS, 1.0),
                pod_sample("pod_memory_usage", uid, NOW_MS, 1.0 * MI),
            ]
        )
    resources = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    pods = [
        make_pod(
            "be",
            "ns",
            "be",
            labels={"koordinator.sh/qosClass": "BE"},
            spec={"priorityClassName": "koord-batch", "priority": 5500, "containers": [{"name": "c"}]},
        ),
        make_pod(
            "guaranteed", "ns", "guaranteed", spec={"containers": [{"name": "c", "resources": resources}]}
        ),
        make_pod(
            "mid",
            "ns",
            "mid",
            labels={"koordinator.sh/qosClass": "LS", "koordinator.sh/priority-class": "koord-mid"},
        ),
        make_pod("besteffort", "ns", "besteffort"),
    ]
    out = build(cache, pods=pods)
    got = {p["name"]: (p["priority"], p["qos"]) for p in out["podsMetric"]}
    assert got == {
        "be": ("koord-batch", "BE"),
        "guaranteed": ("koord-prod", "LSR"),  # Guaranteed → LSR → prod
        "mid": ("koord-mid", "LS"),
        "besteffort": ("koord-batch", "BE"),  # BestEffort → BE → batch
    }
    assert all("extensions" not in p for p in out["podsMetric"])


# --- hostApplicationMetric ------------------------------------------------------------------------------
def test_host_apps_verbatim_sorted_and_skipped() -> None:
    cache = MetricCache()
    for name, cpu in (("nginx", 0.5), ("Agent", 0.25)):
        cache.append(
            [
                app_sample("host_application_cpu_usage", name, NOW_MS, cpu),
                app_sample("host_application_memory_usage", name, NOW_MS, 64.0 * MI),
            ]
        )
    apps = [
        HostApplicationSpec(name="nginx", priority="koord-prod", qos="LS"),
        HostApplicationSpec(name="silent", priority="koord-batch", qos="BE"),  # no samples: skipped
        HostApplicationSpec(name="Agent", priority="koord-free", qos="BE"),
    ]
    out = build(cache, host_apps=apps)
    assert out["hostApplicationMetric"] == [
        {
            "name": "Agent",
            "usage": {"resources": {"cpu": "250m", "memory": "64Mi"}},
            "priority": "koord-free",
            "qos": "BE",
        },
        {
            "name": "nginx",
            "usage": {"resources": {"cpu": "500m", "memory": "64Mi"}},
            "priority": "koord-prod",
            "qos": "LS",
        },
    ]


@pytest.mark.parametrize("apps", [None, []])
def test_host_apps_absent_without_nodeslo(apps: list[HostApplicationSpec] | None) -> None:
    cache = MetricCache()
    cache.append(
        [
            app_sample("host_application_cpu_usage", "nginx", NOW_MS, 0.5),
            app_sample("host_application_memory_usage", "nginx", NOW_MS, 64.0 * MI),
        ]
    )
    out = build(cache, host_apps=apps)
    assert "hostApplicationMetric" not in out


# --- numaUsages ------------------------------------------------------------------------------------------
def test_numa_usages_per_id_sorted() -> None:
    cache = MetricCache()
    for nid, cpu in (("0", 1.0), ("1", 2.0)):
        labels = {"numa_node_id": nid}
        cache.append(
            [
                Sample("node_numa_cpu_usage", labels, NOW_MS, cpu),
                Sample("node_numa_memory_usage", labels, NOW_MS, cpu * GI),
                Sample("sys_numa_cpu_usage", labels, NOW_MS, cpu / 10),
                Sample("sys_numa_memory_usage", labels, NOW_MS, cpu * MI),
            ]
        )
    out = build(cache, numa_ids=[1, 0, 2])  # NUMA 2 has no samples
    assert out["nodeMetric"]["numaUsages"] == [
        {
            "numaNodeID": 0,
            "nodeUsage": {"resources": {"cpu": "1", "memory": "1Gi"}},
            "systemUsage": {"resources": {"cpu": "100m", "memory": "1Mi"}},
        },
        {
            "numaNodeID": 1,
            "nodeUsage": {"resources": {"cpu": "2", "memory": "2Gi"}},
            "systemUsage": {"resources": {"cpu": "200m", "memory": "2Mi"}},
        },
    ]


def test_numa_usages_omitted_without_numa() -> None:
    cache = MetricCache()
    cache.append([node("node_cpu_usage", NOW_MS, 1.0), node("node_memory_usage", NOW_MS, 1.0 * MI)])
    assert "numaUsages" not in build(cache, numa_ids=[])["nodeMetric"]
    assert "numaUsages" not in build(cache, numa_ids=[0])["nodeMetric"]


# --- the whole status -------------------------------------------------------------------------------------
def test_full_status_json() -> None:
    cache = MetricCache()
    cache.append(
        [
            node("node_cpu_usage", NOW_MS - 30_000, 1.0),
            node("node_cpu_usage", NOW_MS, 2.0),
            node("node_memory_usage", NOW_MS - 30_000, 1.0 * GI),
            node("node_memory_usage", NOW_MS, 2.0 * GI),
            node("sys_cpu_usage", NOW_MS, 0.25),
            node("sys_memory_usage", NOW_MS, 100.0 * MI),
            pod_sample("pod_cpu_usage", "u1", NOW_MS, 0.75),
            pod_sample("pod_memory_usage", "u1", NOW_MS, 256.0 * MI),
            app_sample("host_application_cpu_usage", "nginx", NOW_MS, 0.125),
            app_sample("host_application_memory_usage", "nginx", NOW_MS, 32.0 * MI),
        ]
    )
    pod = make_pod(
        "u1",
        "default",
        "web",
        labels={"koordinator.sh/qosClass": "BE"},
        spec={"priorityClassName": "koord-batch"},
    )
    out = build(
        cache,
        policy(aggregate=60, durations=("1m",)),
        pods=[pod],
        host_apps=[HostApplicationSpec(name="nginx", priority="koord-prod", qos="LS")],
        clock=lambda: datetime(2024, 5, 1, 12, 0, 3, 900_000, tzinfo=UTC),
    )
    assert out == {
        "updateTime": "2024-05-01T12:00:03Z",  # from the injected clock, whole seconds
        "nodeMetric": {
            # avg 1.5 → 1500m; memory 1.5Gi = 1536Mi.
            "nodeUsage": {"resources": {"cpu": "1500m", "memory": "1536Mi"}},
            # 1m window: span 30 s ≥ 30 s → not cold. n=2: p50 idx int(1)−1=0 → 1; p90 int(1.8)−1=0 → 1.
            "aggregatedNodeUsages": [
                {
                    "usage": {
                        "avg": {"resources": {"cpu": "1500m", "memory": "1536Mi"}},
                        "p50": {"resources": {"cpu": "1", "memory": "1Gi"}},
                        "p90": {"resources": {"cpu": "1", "memory": "1Gi"}},
                        "p95": {"resources": {"cpu": "1", "memory": "1Gi"}},
                        "p99": {"resources": {"cpu": "1", "memory": "1Gi"}},
                    },
                    "duration": "1m0s",
                }
            ],
            "systemUsage": {"resources": {"cpu": "250m", "memory": "100Mi"}},
            "aggregatedSystemUsages": [{"usage": COLD, "duration": "1m0s"}],  # one point: span 0
        },
        "podsMetric": [
            {
                "name": "web",
                "namespace": "default",
                "podUsage": {"resources": {"cpu": "750m", "memory": "256Mi"}},
                "priority": "koord-batch",
                "qos": "BE",
            }
        ],
        "hostApplicationMetric": [
            {
                "name": "nginx",
                "usage": {"resources": {"cpu": "125m", "memory": "32Mi"}},
                "priority": "koord-prod",
                "qos": "LS",
            }
        ],
        "prodReclaimableMetric": {"resource": {}},
    }


def test_update_time_read_after_queries() -> None:
    calls: list[int] = []

    class CountingCache(MetricCache):
        def query(self, *args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            return super().query(*args, **kwargs)

    counting = CountingCache()
    queries_when_clock_read: list[int] = []

    def clock() -> datetime:
        queries_when_clock_read.append(len(calls))
        return NOW + timedelta(seconds=2)

    status = build_status(
        ReportInputs(cache=counting, now=NOW, policy=policy(), pods=(), host_apps=None, clock=clock)
    )
    assert status.update_time == NOW + timedelta(seconds=2)
    assert queries_when_clock_read == [len(calls)]  # read once, after every query
    assert len(calls) > 0


def test_empty_cache_status() -> None:
    out = build(MetricCache(), policy(durations=("2m",)))
    assert out["nodeMetric"] == {
        "nodeUsage": {},
        "aggregatedNodeUsages": [{"usage": COLD, "duration": "2m0s"}],
        "systemUsage": {},
        "aggregatedSystemUsages": [{"usage": COLD, "duration": "2m0s"}],
    }
    assert out["prodReclaimableMetric"] == {"resource": {}}
    assert "prodPeakMetric" not in out
    assert "podsMetric" not in out


# --- intervals -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pol", "want"),
    [
        (None, 60),
        (NodeMetricCollectPolicy(), 60),
        (NodeMetricCollectPolicy(report_interval_seconds=10), 30),
        (NodeMetricCollectPolicy(report_interval_seconds=0), 30),
        (NodeMetricCollectPolicy(report_interval_seconds=-5), 30),
        (NodeMetricCollectPolicy(report_interval_seconds=30), 30),
        (NodeMetricCollectPolicy(report_interval_seconds=45), 45),
        (NodeMetricCollectPolicy(report_interval_seconds=600), 600),
    ],
)
def test_report_interval_seconds(pol: NodeMetricCollectPolicy | None, want: int) -> None:
    assert report_interval_seconds(pol) == want


@pytest.mark.parametrize(
    ("value", "want"), [(None, 300), (0, 60), (10, 60), (59, 60), (60, 60), (61, 61), (1800, 1800)]
)
def test_aggregate_duration_seconds(value: int | None, want: int) -> None:
    assert aggregate_duration_seconds(NodeMetricCollectPolicy(aggregate_duration_seconds=value)) == want
