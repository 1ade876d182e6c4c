"""The collection → QoS trigger (issue 6): ``CollectorRunner.add_round_listener`` calls its listeners after
every tick that ran collectors; ``QoSManager.kick`` makes a waiting strategy loop tick at once (once its
period minus the slack has passed), latches early kicks, falls back to a timer, and still stops promptly."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent.metriccache import MetricCache
from agent.metricsadvisor.framework import BaseCollector, CollectContext
from agent.metricsadvisor.runner import CollectorRunner
from agent.podmeta import PodMeta
from agent.qosmanager.framework import Decision, Snapshot
from agent.qosmanager.runner import QoSManager, StrategyEntry
from agent.resourceexecutor.executor import ResourceExecutor
from agent.system.cgroup import CgroupVersion, HostPaths
from agent.system.podcgroup import CgroupDriver

pytestmark = pytest.mark.timeout(30)


class _NoPods:
    def pods(self) -> Sequence[PodMeta]:
        return ()


class _Collector(BaseCollector):
    def __init__(self, name: str, interval: float) -> None:
        super().__init__(name, interval)

    def collect(self, ctx: CollectContext) -> list[Any]:
        self.mark_started()
        return []


def _runner(tmp_path: Path, *collectors: _Collector) -> CollectorRunner:
    paths = HostPaths(cgroup_root=tmp_path / "cgroup", proc=tmp_path / "proc", sys=tmp_path / "sys")
    ctx = CollectContext(paths, CgroupVersion.V1, CgroupDriver.CGROUPFS, _NoPods())
    return CollectorRunner(collectors, ctx, MetricCache())


def test_round_listeners_run_after_a_tick_that_collected(tmp_path: Path) -> None:
    runner = _runner(tmp_path, _Collector("a", 1.0), _Collector("b", 5.0))
    rounds: list[list[str]] = []

    def boom(_names: Sequence[str]) -> None:
        raise RuntimeError("listener failure is logged, not raised")

    runner.add_round_listener(boom)
    runner.add_round_listener(lambda names: rounds.append(list(names)))
    assert runner.tick(now=0.0) == ["a", "b"]
    assert runner.tick(now=0.5) == []  # nothing due: no round, no call
    assert runner.tick(now=1.0) == ["a"]
    assert rounds == [["a", "b"], ["a"]]


class _Counting:
    """A strategy that records when it ticked."""

    name = "counting"
    gate = "Counting"

    def __init__(self, interval_seconds: float) -> None:
        self.interval_seconds = interval_seconds
        self.times: list[float] = []
        self.ticked = threading.Event()

    def decide(self, snapshot: Snapshot, config: Any, state: Any) -> Decision[Any]:
        self.times.append(time.monotonic())
        self.ticked.set()
        return Decision()


def _manager(tmp_path: Path, strategy: _Counting) -> QoSManager:
    paths = HostPaths(cgroup_root=tmp_path / "cgroup", proc=tmp_path / "proc", sys=tmp_path / "sys")
    executor = ResourceExecutor(paths, CgroupVersion.V1, "n1")

    def snapshot(now: datetime) -> Snapshot:
        return Snapshot(
            now=now, node=None, node_slo=None, pods=(), metrics=None,  # type: ignore[arg-type]
            cgroups=None, cgroup_version=CgroupVersion.V1,  # type: ignore[arg-type]
            cgroup_driver=CgroupDriver.CGROUPFS, topology=None,
        )  # fmt: skip

    return QoSManager([StrategyEntry(strategy, lambda: None)], snapshot, executor, None,
                      clock=lambda: datetime.now(UTC))  # fmt: skip


def _wait_ticks(strategy: _Counting, n: int, timeout: float) -> None:
    end = time.monotonic() + timeout
    while len(strategy.times) < n and time.monotonic() < end:
        time.sleep(0.005)
    assert len(strategy.times) >= n, f"{len(strategy.times)} ticks, wanted {n}"


def test_never_kicked_loops_keep_the_plain_timer(tmp_path: Path) -> None:
    strategy = _Counting(0.2)
    manager = _manager(tmp_path, strategy)
    stop = threading.Event()
    manager.start(stop)
    _wait_ticks(strategy, 3, 2.0)
    stop.set()
    gaps = [b - a for a, b in zip(strategy.times, strategy.times[1:], strict=False)]
    assert all(g >= 0.19 for g in gaps)
    assert not manager.kicked


def test_kick_ticks_at_once_after_the_period_minus_slack(tmp_path: Path) -> None:
    strategy = _Counting(1.0)
    manager = _manager(tmp_path, strategy)
    manager.kick()  # kicked mode from the start (the daemon registers the listener as the loops start)
    stop = threading.Event()
    manager.start(stop)
    _wait_ticks(strategy, 1, 2.0)
    time.sleep(0.65)  # past period − slack (0.5 s)
    t_kick = time.monotonic()
    manager.kick()
    _wait_ticks(strategy, 2, 1.0)
    assert strategy.times[1] - t_kick < 0.1  # at once, not at the 1.5 s fallback
    stop.set()


def test_an_early_kick_is_latched_until_period_minus_slack(tmp_path: Path) -> None:
    strategy = _Counting(1.0)
    manager = _manager(tmp_path, strategy)
    manager.kick()
    stop = threading.Event()
    manager.start(stop)
    _wait_ticks(strategy, 1, 2.0)
    for _ in range(5):  # a burst of kicks right after a tick: one tick, not five
        manager.kick()
    _wait_ticks(strategy, 2, 1.5)
    gap = strategy.times[1] - strategy.times[0]
    assert 0.45 <= gap < 0.8
    time.sleep(0.2)
    assert len(strategy.times) == 2
    stop.set()


def test_without_kicks_a_kicked_loop_falls_back_to_a_timer(tmp_path: Path) -> None:
    strategy = _Counting(0.2)
    manager = _manager(tmp_path, strategy)
    manager.kick()
    stop = threading.Event()
    manager.start(stop)
    _wait_ticks(strategy, 1, 1.0)
    manager._kick_event(manager.entries[0]).clear()  # drop the latched start-up kick
    _wait_ticks(strategy, 3, 2.0)
    gaps = [b - a for a, b in zip(strategy.times[1:], strategy.times[2:], strict=False)]
    assert all(0.29 <= g < 0.5 for g in gaps)  # 1.5 × period
    stop.set()


def test_stop_wakes_a_loop_waiting_for_a_kick(tmp_path: Path) -> None:
    strategy = _Counting(10.0)
    manager = _manager(tmp_path, strategy)
    manager.kick()
    stop = threading.Event()
    (thread,) = manager.start(stop)
    _wait_ticks(strategy, 1, 1.0)
    t0 = time.monotonic()
    stop.set()
    thread.join(2.0)
    assert not thread.is_alive()
    assert time.monotonic() - t0 < 0.6


def test_runner_rounds_drive_the_strategy(tmp_path: Path) -> None:
    """End to end: the runner's round listener is ``kick``; each round is followed by one tick."""
    strategy = _Counting(0.4)
    manager = _manager(tmp_path, strategy)
    runner = _runner(tmp_path, _Collector("a", 0.4))
    runner.add_round_listener(manager.kick)
    stop = threading.Event()
    runner.start()
    assert runner.wait_started(2.0)
    time.sleep(0.1)  # a strategy timer out of phase with the collector
    manager.start(stop)
    time.sleep(1.8)
    rounds = runner.rounds["a"]
    runner.stop()
    stop.set()
    assert len(strategy.times) <= rounds + 1  # no extra timer ticks on top of the rounds
    assert len(strategy.times) >= rounds - 2
