"""The collection → QoS trigger (docs/rules/koordlet.md#start-order-and-readiness): ``CollectorRunner``
calls its round listeners after every tick that ran collectors; ``QoSManager.kick`` makes a waiting strategy
loop tick at once (once its period minus the slack has passed), latches early kicks, falls back to a timer,
and still stops promptly. The loops run on a ``FakeClock``: every tick time below is exact, virtual time."""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agent.metriccache import MetricCache
from agent.metricsadvisor.framework import BaseCollector, CollectContext
from agent.metricsadvisor.runner import CollectorRunner
from agent.podmeta import PodMeta
from agent.qosmanager.framework import Decision, Snapshot
from agent.qosmanager.runner import QoSManager, StrategyEntry, SystemClock
from agent.resourceexecutor.executor import ResourceExecutor
from agent.system.cgroup import CgroupVersion, HostPaths
from agent.system.podcgroup import CgroupDriver
from tests.unit.agent.qosmanager.fakeclock import EPOCH, FakeClock

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


def _paths(tmp_path: Path) -> HostPaths:
    return HostPaths(cgroup_root=tmp_path / "cgroup", proc=tmp_path / "proc", sys=tmp_path / "sys")


def _runner(tmp_path: Path, *collectors: _Collector) -> CollectorRunner:
    ctx = CollectContext(_paths(tmp_path), CgroupVersion.V1, CgroupDriver.CGROUPFS, _NoPods())
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
    """A strategy that records the (virtual) time of each tick, in seconds since the clock's start."""

    name = "counting"

    def __init__(self, interval_seconds: float) -> None:
        self.interval_seconds = interval_seconds
        self.times: list[float] = []
        self.ticked = threading.Event()

    def decide(self, snapshot: Snapshot, config: Any, state: Any) -> Decision[Any]:
        self.times.append((snapshot.now - EPOCH).total_seconds())
        self.ticked.set()
        return Decision()


def _manager(tmp_path: Path, strategy: _Counting, clock: FakeClock | SystemClock) -> QoSManager:
    executor = ResourceExecutor(_paths(tmp_path), CgroupVersion.V1, "n1")

    def snapshot(now: Any) -> Snapshot:
        return Snapshot(
            now=now, node=None, node_slo=None, pods=(), metrics=None,  # type: ignore[arg-type]
            cgroups=None, cgroup_version=CgroupVersion.V1,  # type: ignore[arg-type]
            cgroup_driver=CgroupDriver.CGROUPFS, topology=None,
        )  # fmt: skip

    return QoSManager([StrategyEntry(strategy, lambda: None)], snapshot, executor, None, clock=clock)


def _run(manager: QoSManager, clock: FakeClock, stop_at: float) -> None:
    """Run the (single) loop in this thread until ``stop_at`` virtual seconds."""
    stop = threading.Event()
    clock.at(stop_at, stop.set)
    manager.run_entry(manager.entries[0], stop)


def _kicked_mode(manager: QoSManager) -> None:
    """Kicked mode with nothing latched, as when the daemon's first round has been consumed."""
    manager.kick()
    manager.entries[0].kicked.clear()


def test_never_kicked_loops_keep_the_plain_timer(tmp_path: Path) -> None:
    clock = FakeClock()
    strategy = _Counting(0.25)
    manager = _manager(tmp_path, strategy, clock)
    _run(manager, clock, stop_at=1.0)
    assert strategy.times == [0.0, 0.25, 0.5, 0.75]
    assert not manager.kicked


def test_kick_ticks_at_once_after_the_period_minus_slack(tmp_path: Path) -> None:
    clock = FakeClock()
    strategy = _Counting(1.0)
    manager = _manager(tmp_path, strategy, clock)
    _kicked_mode(manager)
    clock.at(1.25, manager.kick)  # past period − slack (0.5 s): honoured at once, not at the 1.5 s fallback
    _run(manager, clock, stop_at=1.375)
    assert strategy.times == [0.0, 1.25]


def test_early_kicks_are_latched_then_a_timer_falls_back(tmp_path: Path) -> None:
    clock = FakeClock()
    strategy = _Counting(1.0)
    manager = _manager(tmp_path, strategy, clock)
    _kicked_mode(manager)
    for _ in range(5):  # a burst of kicks right after a tick: one tick, at period − slack
        clock.at(0.125, manager.kick)
    _run(manager, clock, stop_at=2.25)
    # 0.5: the latched burst; 2.0: no kick for 1.5 × period after it
    assert strategy.times == [0.0, 0.5, 2.0]


def test_the_slack_is_capped_for_long_periods(tmp_path: Path) -> None:
    clock = FakeClock()
    strategy = _Counting(4.0)
    manager = _manager(tmp_path, strategy, clock)
    _kicked_mode(manager)
    clock.at(1.0, manager.kick)  # latched until 4 − min(0.5 × 4, 0.5) = 3.5
    _run(manager, clock, stop_at=3.75)
    assert strategy.times == [0.0, 3.5]


@pytest.mark.parametrize("latched", [False, True], ids=["waiting-for-a-kick", "kick-latched"])
def test_stop_wakes_a_kicked_loop(tmp_path: Path, latched: bool) -> None:
    clock = FakeClock()
    strategy = _Counting(10.0)
    manager = _manager(tmp_path, strategy, clock)
    _kicked_mode(manager)
    if latched:  # the loop then waits on the stop event itself, until 9.5
        clock.at(0.125, manager.kick)
    _run(manager, clock, stop_at=1.0)
    assert strategy.times == [0.0]
    # waiting for a kick, the loop looks at its stop event every KICK_STOP_POLL_SECONDS
    assert 1.0 <= clock.monotonic() <= 1.0 + QoSManager.KICK_STOP_POLL_SECONDS


def test_runner_rounds_drive_the_strategy(tmp_path: Path) -> None:
    """End to end: the runner's round listener is ``kick``; once aligned, each round is followed at once
    by one tick, with no timer ticks in between."""
    clock = FakeClock()
    strategy = _Counting(0.5)
    manager = _manager(tmp_path, strategy, clock)
    runner = _runner(tmp_path, _Collector("a", 0.5))
    rounds: list[float] = []
    runner.add_round_listener(lambda _names: rounds.append(clock.monotonic()))
    runner.add_round_listener(manager.kick)
    for k in range(8):  # collector rounds out of phase with the strategy's timer
        t = 0.125 + 0.5 * k
        clock.at(t, functools.partial(runner.tick, now=t))
    _run(manager, clock, stop_at=4.0)
    assert rounds == [0.125 + 0.5 * k for k in range(8)]
    # 0: start; 0.5: plain timer (the first kick arrives mid-wait); 0.75: the latched kick of round 0.625,
    # at period − slack; from round 1.125 on, one tick per round
    assert strategy.times == [0.0, 0.5, 0.75, *rounds[2:]]


def test_start_runs_one_thread_per_strategy_on_the_system_clock(tmp_path: Path) -> None:
    strategy = _Counting(10.0)
    manager = _manager(tmp_path, strategy, SystemClock())
    stop = threading.Event()
    (thread,) = manager.start(stop)
    assert thread.name == "qos-counting"
    assert strategy.ticked.wait(5.0)
    stop.set()  # the loop waits on the stop event for its 10 s period: it returns at once
    thread.join(5.0)
    assert not thread.is_alive()
    assert len(strategy.times) == 1
