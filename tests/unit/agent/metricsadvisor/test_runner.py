"""CollectorRunner: per-collector intervals, one batch per round, failure isolation, wait_started, stop,
on_collect; and the registry."""

from __future__ import annotations

import threading
import time

import pytest

from agent.metriccache.cache import MetricCache, Sample
from agent.metricsadvisor.framework import AdvisorConfig, BaseCollector, CollectContext
from agent.metricsadvisor.registry import DEFAULT_COLLECTORS, build_collectors, default_collectors, numa_ids
from agent.metricsadvisor.runner import CollectorRunner
from agent.system.nodeinfo import NodeTopology
from tests.unit.agent.metricsadvisor.conftest import Env


class Fake(BaseCollector):
    def __init__(self, name: str, interval: float = 1.0, fail: int = 0, enabled: bool = True) -> None:
        super().__init__(name, interval)
        self.calls = 0
        self.fail = fail
        self._enabled = enabled

    def enabled(self, ctx: CollectContext) -> bool:
        return self._enabled

    def collect(self, ctx: CollectContext) -> list[Sample]:
        self.calls += 1
        if self.calls <= self.fail:
            raise RuntimeError(f"{self.name} broken")
        self.mark_started()
        return [Sample("node_cpu_usage", {}, self.calls, float(self.calls))]


class BadBatch(Fake):
    def collect(self, ctx: CollectContext) -> list[Sample]:
        self.calls += 1
        return [Sample("node_memory_usage", {}, 1, 1.0), Sample("node_memory_usage", {"x": "y"}, 2, 2.0)]


def _runner(env: Env, collectors: list[BaseCollector], **kw: object) -> tuple[CollectorRunner, MetricCache]:
    cache = MetricCache()
    return CollectorRunner(collectors, env.ctx, cache, **kw), cache  # type: ignore[arg-type]


def test_intervals(env: Env) -> None:
    fast, slow = Fake("fast", 1.0), Fake("slow", 10.0)
    runner, _ = _runner(env, [fast, slow])
    for t in range(25):
        runner.tick(float(t))
    assert (fast.calls, slow.calls) == (25, 3)  # slow at 0, 10, 20
    assert runner.rounds == {"fast": 25, "slow": 3}


def test_failure_isolated_and_counted(env: Env) -> None:
    seen: list[tuple[str, bool]] = []
    broken, ok, bad = Fake("broken", fail=2), Fake("ok"), BadBatch("bad")
    runner, cache = _runner(env, [broken, ok, bad], on_collect=lambda n, s, good: seen.append((n, good)))
    runner.tick(0.0)
    assert runner.failures == {"broken": 1, "ok": 0, "bad": 1}
    assert seen == [("broken", False), ("ok", True), ("bad", False)]
    assert cache.query("node_cpu_usage", {}, 0, 10).count() == 1  # ok's sample stored
    assert cache.query("node_memory_usage", {}, 0, 10).count() == 0  # the bad batch rolled back whole
    assert not runner.wait_started(0)
    assert runner.not_started() == ["broken", "bad"]
    runner.tick(1.0)
    runner.tick(2.0)
    assert runner.failures["broken"] == 2 and broken.started
    assert runner.not_started() == ["bad"]


def test_wait_started_ignores_disabled(env: Env) -> None:
    a, off = Fake("a", fail=1), Fake("off", enabled=False)
    runner, _ = _runner(env, [a, off])
    assert runner.enabled_collectors == ["a"]
    runner.start()
    try:
        assert runner.wait_started(5.0)  # a fails once then succeeds a second later
        assert off.calls == 0
    finally:
        runner.stop()
    assert a.calls >= 2


def test_run_with_external_stop_and_callback_errors(env: Env) -> None:
    def boom(name: str, seconds: float, ok: bool) -> None:
        raise ValueError("metrics broken")

    a = Fake("a", 0.05)
    runner, _ = _runner(env, [a], on_collect=boom)
    stop = threading.Event()
    t = threading.Thread(target=runner.run, args=(stop,))
    t.start()
    deadline = time.monotonic() + 15.0  # a busy host may run the thread late: wait for the rounds
    while a.calls < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    t.join(2.0)
    assert not t.is_alive()
    assert a.calls >= 3 and runner.failures["a"] == 0


def test_duplicate_names_rejected(env: Env) -> None:
    with pytest.raises(ValueError, match="duplicate"):
        _runner(env, [Fake("a"), Fake("a")])


def test_registry(env: Env) -> None:
    names = [c.name for c in build_collectors()]
    assert names == list(DEFAULT_COLLECTORS)
    assert names.index("system_resource") > max(
        names.index(n) for n in ("node_resource", "pod_resource", "host_application")
    )
    assert names[0] == "node_info"
    cfg = AdvisorConfig(collect_interval_seconds=2.0)
    by_name = {c.name: c for c in default_collectors(cfg, {"PSICollector": False, "NetworkCollector": True})}
    assert "psi" not in by_name and "resctrl" not in by_name and "network" in by_name
    assert by_name["pod_resource"].interval_seconds == 2.0 and by_name["node_info"].interval_seconds == 60.0
    with pytest.raises(KeyError):
        build_collectors(names=["nope"])
    with pytest.raises(ValueError):
        AdvisorConfig(collect_interval_seconds=0)
    assert numa_ids(env.ctx) == ()
    env.ctx.kv.set("node_cpu_info", NodeTopology((), (0, 1)))
    assert numa_ids(env.ctx) == (0, 1)
