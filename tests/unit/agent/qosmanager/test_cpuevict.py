"""cpuevict.decide: the 20 s cool-down from the start and after an eviction, BE satisfaction read from the
metric view (avg window, sample count, last window), the count requirement (no SampleCounter → idle),
CPUEvict on the node average, only BE pods for the BE task
(docs/rules/koordlet.md#be-evictors-evict-only-be-pods), and the Evict action contents."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from agent.qosmanager import cpuevict as ce
from agent.qosmanager.evictplan import EvictState
from agent.qosmanager.framework import Snapshot
from tests.unit.agent.qosmanager.test_memoryevict import NOW, Metrics, pod, snapshot

BE_T = {
    "enable": True,
    "cpuEvictBESatisfactionLowerPercent": 30,
    "cpuEvictBESatisfactionUpperPercent": 75,
    "cpuEvictTimeWindowSeconds": 60,
    "cpuEvictThresholdPercent": 70,
    "evictEnabledPriorityThreshold": 5999,
}
NODE = {"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "10"}, "allocatable": {"cpu": "10"}}}


def be_pod(name: str, batch_cpu: str, qos: str | None = "BE") -> Any:
    p = pod(name, qos)
    obj = dict(p.pod)
    obj["spec"] = {
        "containers": [{"name": "c", "resources": {"requests": {"kubernetes.io/batch-cpu": batch_cpu}}}]
    }
    return type(p)(p.uid, p.namespace, p.name, p.kube_qos, p.cgroup_dir, p.containers, obj)


PODS = [be_pod("b1", "3000"), be_pod("b2", "4000"), be_pod("b3", "1000")]


def be_series(
    samples: int = 60, usage: float = 2400, request: float = 10000, limit: float = 2500
) -> dict[Any, Any]:
    ages = [i + 0.5 for i in range(samples)]
    return {
        ("node_be", "usage"): [(a, usage) for a in ages],
        ("node_be", "request"): [(a, request) for a in ages],
        ("node_be", "real-limit"): [(a, limit) for a in ages],
        ("pod_cpu_usage", "u-b1"): [(0.5, 2.0)],
        ("pod_cpu_usage", "u-b2"): [(0.5, 3.6)],
        ("pod_cpu_usage", "u-b3"): [(0.5, 0.1)],
        ("node_cpu_usage", ""): [(0.5, 5.0)],
    }


def snap(series: Mapping[Any, Any], gates: Mapping[str, bool] | None = None, **kw: Any) -> Snapshot:
    pods = kw.pop("pods", PODS)
    threshold = kw.pop("threshold", BE_T)
    return snapshot(pods, series, threshold=threshold, gates=gates or {"BECPUEvict": True}, node=NODE, **kw)


CONFIG = ce.CPUEvictConfig()
RUNNING = EvictState(NOW - timedelta(seconds=60))


def names(d: Any) -> list[str]:
    return [e.pod.name for e in d.evictions]


def test_first_tick_starts_the_cool_down() -> None:
    d = ce.decide(snap(be_series()), CONFIG, None)
    assert d.evictions == () and d.state == EvictState(NOW)
    later = ce.decide(snap(be_series(), now=NOW + timedelta(seconds=19.9)), CONFIG, d.state)
    assert later.evictions == ()
    ready = ce.decide(snap(be_series(), now=NOW + timedelta(seconds=20)), CONFIG, d.state)
    assert names(ready) == ["b2", "b1"]


def test_be_satisfaction_round() -> None:
    d = ce.decide(snap(be_series()), CONFIG, RUNNING)
    # release 10000 * (0.75 - 0.25) = 5000: b2 (ratio 0.9) 4000, b1 (0.67) 7000.
    assert names(d) == ["b2", "b1"]
    assert [e.released_milli_cpu for e in d.evictions] == [4000, 3000]
    assert d.evictions[0].message == "trigger by koordlet feature BECPUEvict, kill pod: b2"
    assert d.state == EvictState(NOW)


def test_sample_count_rule() -> None:
    assert ce.decide(snap(be_series(samples=19)), CONFIG, RUNNING).evictions == ()  # 19 < 60 / 3
    assert names(ce.decide(snap(be_series(samples=20)), CONFIG, RUNNING)) == ["b2", "b1"]


def test_without_a_sample_counter_be_stays_idle() -> None:
    class NoCount:
        def __init__(self, inner: Metrics) -> None:
            self.inner = inner

        def last(self, kind: str, labels: Mapping[str, str], window_seconds: float) -> float | None:
            return self.inner.last(kind, labels, window_seconds)

        def avg(self, kind: str, labels: Mapping[str, str], window_seconds: float) -> float | None:
            return self.inner.avg(kind, labels, window_seconds)

    s = snap(be_series())
    blind = Snapshot(**{**s.__dict__, "metrics": NoCount(Metrics(NOW, be_series()))})
    assert ce.decide(blind, CONFIG, RUNNING).evictions == ()


def test_stale_last_sample_blocks_be() -> None:
    series = be_series()
    for key in (("node_be", "usage"), ("node_be", "request"), ("node_be", "real-limit")):
        series[key] = [(a, v) for a, v in series[key] if a > 2]
    assert ce.decide(snap(series), CONFIG, RUNNING).evictions == ()


def test_be_task_never_evicts_non_be_d2() -> None:
    pods = [be_pod("ls", "9000", qos="LS"), be_pod("plain", "9000", qos=None), *PODS]
    series = {
        **be_series(),
        ("pod_cpu_usage", "u-ls"): [(0.5, 9.0)],
        ("pod_cpu_usage", "u-plain"): [(0.5, 9.0)],
    }
    assert names(ce.decide(snap(series, pods=pods), CONFIG, RUNNING)) == ["b2", "b1"]


def test_cpuevict_uses_node_average_over_window() -> None:
    pods = [pod(n, "LS", 5500, enabled=True) for n in ("a", "b")]
    series: dict[Any, Any] = {
        ("node_cpu_usage", ""): [(1, 9.0), (30, 6.0)],  # avg 7.5 cores of 10 -> 75 % -> release 700
        ("pod_cpu_usage", "u-a"): [(0.5, 0.5)],
        ("pod_cpu_usage", "u-b"): [(0.5, 0.3)],
    }
    d = ce.decide(snap(series, gates={"CPUEvict": True}, pods=pods), CONFIG, RUNNING)
    assert names(d) == ["a", "b"] and [e.released_milli_cpu for e in d.evictions] == [500, 300]
    series[("node_cpu_usage", "")] = [(1, 9.0), (61, 0.0)]  # the old sample is outside the 60 s window
    assert names(ce.decide(snap(series, gates={"CPUEvict": True}, pods=pods), CONFIG, RUNNING)) == ["a", "b"]
    series[("node_cpu_usage", "")] = [(1, 6.0)]
    assert ce.decide(snap(series, gates={"CPUEvict": True}, pods=pods), CONFIG, RUNNING).evictions == ()


def test_disabled_and_strategy_object() -> None:
    off = {**BE_T, "enable": False}
    assert ce.decide(snap(be_series(), threshold=off), CONFIG, RUNNING).evictions == ()
    assert ce.decide(snap(be_series(), gates={"CPUEvict": False}), CONFIG, RUNNING).evictions == ()
    s = ce.CPUEvictStrategy()
    assert (s.name, s.interval_seconds, ce.GATES) == (
        "cpuEvict",
        1.0,
        ("BECPUEvict", "CPUAllocatableEvict", "CPUEvict"),
    )
    assert names(s.decide(snap(be_series()), CONFIG, RUNNING)) == ["b2", "b1"]
