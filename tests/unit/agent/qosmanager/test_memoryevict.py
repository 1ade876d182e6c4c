"""memoryevict.decide / evictplan: gates and the NodeSLO switch, fresh samples only
(docs/rules/koordlet.md#freshness-rule), the 4 s cool-down, pending (already evicted) pods, only BE pods for
the BE task whatever the input (docs/rules/koordlet.md#be-evictors-evict-only-be-pods), released memory in
bytes (docs/rules/koordlet.md#released-memory-is-counted-in-bytes), Evict action contents."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from agent.podmeta import PodMeta, pod_meta
from agent.qosmanager import memoryevict as me
from agent.qosmanager.evictplan import (
    TARGET_USED,
    EvictState,
    EvictTask,
    eviction_allowed,
    go_div,
    plan_evictions,
    to_decision,
)
from agent.qosmanager.framework import Snapshot
from agent.system.cgroup import CgroupVersion
from agent.system.podcgroup import CgroupDriver
from apis.nodeslo import NodeSLOSpec, ResourceThresholdStrategy

NOW = datetime(2026, 1, 1, tzinfo=UTC)
G = 10**9


class Metrics:
    """Samples as {(kind, uid or ""): [(seconds before now, value)]}."""

    def __init__(
        self, now: datetime, series: Mapping[tuple[str, str], Sequence[tuple[float, float]]]
    ) -> None:
        self.now = now
        self.series = series

    def _window(self, kind: str, labels: Mapping[str, str], window: float) -> list[tuple[float, float]]:
        key = (kind, labels.get("pod_uid", "") or labels.get("be_allocation", ""))
        return sorted((age, v) for age, v in self.series.get(key, ()) if 0 <= age <= window)

    def last(self, kind: str, labels: Mapping[str, str], window_seconds: float) -> float | None:
        samples = self._window(kind, labels, window_seconds)
        return samples[0][1] if samples else None

    def avg(self, kind: str, labels: Mapping[str, str], window_seconds: float) -> float | None:
        samples = self._window(kind, labels, window_seconds)
        return sum(v for _, v in samples) / len(samples) if samples else None

    def count(self, kind: str, labels: Mapping[str, str], window_seconds: float) -> int:
        return len(self._window(kind, labels, window_seconds))


class NoCgroups:
    def read(self, spec: Any, cgroup_dir: str) -> Any | None:
        return None

    def children(self, cgroup_dir: str) -> Sequence[str]:
        return ()


def pod(
    name: str, qos: str | None = "BE", prio: int | None = None, enabled: bool = False, **extra: Any
) -> PodMeta:
    labels = {"koordinator.sh/qosClass": qos} if qos else {}
    if enabled:
        labels["koordinator.sh/eviction-enabled"] = "true"
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if prio is not None:
        spec["priority"] = prio
    obj = {
        "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}", "labels": labels, **extra},
        "spec": spec,
        "status": {"phase": "Running"},
    }
    return pod_meta(obj, CgroupDriver.CGROUPFS)


NODE = {
    "metadata": {"name": "n"},
    "status": {"capacity": {"memory": "100G"}, "allocatable": {"memory": "100G"}},
}


def snapshot(
    pods: Sequence[PodMeta],
    series: Mapping[tuple[str, str], Sequence[tuple[float, float]]],
    threshold: dict[str, Any] | None = None,
    gates: Mapping[str, bool] | None = None,
    now: datetime = NOW,
    node: Mapping[str, Any] | None = NODE,
) -> Snapshot:
    t = {"enable": True, "memoryEvictThresholdPercent": 70, "evictEnabledPriorityThreshold": 5999}
    if threshold is not None:
        t = threshold
    slo = NodeSLOSpec(resource_used_threshold_with_be=ResourceThresholdStrategy.from_dict(t))
    return Snapshot(
        now=now,
        node=node,
        node_slo=slo,
        pods=pods,
        metrics=Metrics(now, series),
        cgroups=NoCgroups(),
        cgroup_version=CgroupVersion.V2,
        cgroup_driver=CgroupDriver.CGROUPFS,
        topology=None,
        gates=gates if gates is not None else {"BEMemoryEvict": True},
    )


PODS = [pod("x"), pod("y"), pod("z")]
SERIES = {
    ("node_memory_usage", ""): [(0.5, 75 * G)],
    ("pod_memory_usage", "u-x"): [(0.5, 5 * G)],
    ("pod_memory_usage", "u-y"): [(0.5, 4 * G)],
    ("pod_memory_usage", "u-z"): [(0.5, 1 * G)],
}
CONFIG = me.MemoryEvictConfig()


def names(decision: Any) -> list[str]:
    return [e.pod.name for e in decision.evictions]


def test_round_evicts_until_released_and_starts_cool_down() -> None:
    d = me.decide(snapshot(PODS, SERIES), CONFIG, None)
    assert names(d) == ["x", "y"]
    first = d.evictions[0]
    assert first.strategy == "BEMemoryEvict" and first.reason == "evicted"
    assert first.message == "trigger by koordlet feature BEMemoryEvict, kill pod: x"
    assert first.released_bytes == 5 * G
    assert d.state == EvictState(NOW)
    # 4 s cool-down: nothing at +3.9 s, evicts again at +4 s.
    later = me.decide(snapshot(PODS, SERIES, now=NOW + timedelta(seconds=3.9)), CONFIG, d.state)
    assert later.evictions == () and later.state == d.state
    again = me.decide(snapshot(PODS, SERIES, now=NOW + timedelta(seconds=4)), CONFIG, d.state)
    assert names(again) == ["x", "y"]


def test_pending_pods_are_credited_not_evicted() -> None:
    config = me.MemoryEvictConfig(already_evicted=frozenset({"u-x"}))
    d = me.decide(snapshot(PODS, SERIES), config, None)
    assert names(d) == ["y"]  # x (5e9, pending) + y (4e9) >= 7e9
    nothing = me.MemoryEvictConfig(already_evicted=frozenset({"u-x", "u-y"}))
    d = me.decide(snapshot(PODS, SERIES), nothing, EvictState(None))
    assert d.evictions == () and d.state == EvictState(None)  # no new eviction: no cool-down


def test_switches_gates_and_missing_inputs() -> None:
    assert me.decide(snapshot(PODS, SERIES, gates={}), CONFIG, None).evictions == ()
    off = {"enable": False, "memoryEvictThresholdPercent": 70}
    assert me.decide(snapshot(PODS, SERIES, threshold=off), CONFIG, None).evictions == ()
    unset = {"memoryEvictThresholdPercent": 70}
    assert me.decide(snapshot(PODS, SERIES, threshold=unset), CONFIG, None).evictions == ()
    assert me.decide(snapshot(PODS, SERIES, node=None), CONFIG, None).evictions == ()
    no_capacity = {"metadata": {"name": "n"}, "status": {}}
    assert me.decide(snapshot(PODS, SERIES, node=no_capacity), CONFIG, None).evictions == ()
    s = snapshot(PODS, SERIES)
    assert me.decide(Snapshot(**{**s.__dict__, "node_slo": None}), CONFIG, None).evictions == ()


def test_stale_node_sample_is_ignored_d7() -> None:
    stale = {**SERIES, ("node_memory_usage", ""): [(2.5, 95 * G)]}  # older than 2 x 1 s
    assert me.decide(snapshot(PODS, stale), CONFIG, None).evictions == ()


def test_stale_pod_samples_count_as_zero_for_be() -> None:
    series = {**SERIES, ("pod_memory_usage", "u-x"): [(3.0, 50 * G)]}
    # x has no fresh sample: usage 0 -> after y and z; y 4e9 + z 1e9 < 7e9 -> x too.
    assert names(me.decide(snapshot(PODS, series), CONFIG, None)) == ["y", "z", "x"]


def test_never_evicts_non_be_in_be_task_d2() -> None:
    pods = [*PODS, pod("ls", "LS"), pod("plain", None), pod("bad", "be")]
    series = {**SERIES, **{("pod_memory_usage", f"u-{n}"): [(0.1, 50 * G)] for n in ("ls", "plain", "bad")}}
    series[("node_memory_usage", "")] = [(0.1, 99 * G)]
    assert names(me.decide(snapshot(pods, series), CONFIG, None)) == ["x", "y", "z"]
    # Even a hand-built task listing a non-BE pod under the BE gate yields no action for it.
    task = EvictTask(
        "BEMemoryEvict", TARGET_USED, {"memory": 10 * G}, (pod("ls", "LS"),), lambda p: {"memory": 1}
    )
    d = to_decision(snapshot(pods, series), [task], frozenset(), EvictState(), "BEMemoryEvict")
    assert d.evictions == ()


def test_memoryevict_counts_bytes_d4() -> None:
    pods = [pod(n, "LS", 5500, enabled=True) for n in ("a", "b", "c")]
    series = {
        ("node_memory_usage", ""): [(0.1, 75 * G)],
        ("pod_memory_usage", "u-a"): [(0.1, 5 * G)],
        ("pod_memory_usage", "u-b"): [(0.1, 4 * G)],
        ("pod_memory_usage", "u-c"): [(0.1, 3 * G)],
    }
    d = me.decide(snapshot(pods, series, gates={"MemoryEvict": True}), CONFIG, None)
    assert names(d) == ["a", "b"]
    assert [e.released_bytes for e in d.evictions] == [5 * G, 4 * G]


def test_plan_credits_max_per_target_type() -> None:
    a, b = pod("a"), pod("b")
    t1 = EvictTask("T1", TARGET_USED, {"memory": 10}, (a, b), lambda p: {"memory": 4})
    t2 = EvictTask("T2", TARGET_USED, {"memory": 10}, (a, b), lambda p: {"memory": 6})
    picks = plan_evictions([t1, t2], frozenset())
    # a credited max(4, 6) = 6 < 10; b -> 12 >= 10; T2 already covered.
    assert [(p.task.gate, p.pod.name, dict(p.credited)) for p in picks] == [
        ("T1", "a", {"memory": 6}),
        ("T1", "b", {"memory": 6}),
    ]


def test_helpers() -> None:
    assert go_div(-7, 2) == -3 and go_div(7, 2) == 3
    assert eviction_allowed({}, "X")
    assert not eviction_allowed({"metadata": {"annotations": {"koordinator.sh/eviction-policy": "{"}}}, "X")
    assert eviction_allowed({"metadata": {"annotations": {"koordinator.sh/eviction-policy": '["X"]'}}}, "X")
    assert not eviction_allowed({"metadata": {"annotations": {"koordinator.sh/eviction-policy": "[]"}}}, "X")
    assert me.GATES == ("BEMemoryEvict", "MemoryAllocatableEvict", "MemoryEvict")
    assert me.MemoryEvictStrategy().name == "memoryEvict"
