"""ReporterLoop: schedule of CR writes and hub pushes on an injected monotonic clock (no real waits except
one bounded smoke test), skip while the NodeMetric is unseen, failures reported, one status per tick."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from agent.metriccache import MetricCache, Sample
from agent.podmeta import PodMeta
from agent.reporter.loop import ReporterLoop
from apis.convert import report_to_proto
from apis.nodemetric import NodeMetricCollectPolicy, NodeMetricStatus
from apis.nodeslo import HostApplicationSpec
from apis.waits import MAX_WAIT_SECONDS
from proto.koord.v1 import metrichub_pb2 as pb

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
NOW_MS = 1714564800000
T0 = 1000.0


class FakeTime:
    def __init__(self) -> None:
        self.now = T0

    def monotonic(self) -> float:
        return self.now


class FakeStop(threading.Event):
    """``wait(timeout)`` advances the fake clock instead of sleeping; stops once ``until`` is passed."""

    def __init__(self, clock: FakeTime, until: float) -> None:
        super().__init__()
        self.clock = clock
        self.until = until
        self.waits: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        if timeout is None or self.clock.now + timeout > self.until:
            self.set()
            return True
        self.clock.now += timeout
        return self.is_set()


class Sources:
    def __init__(self, clock: FakeTime) -> None:
        self.clock = clock
        self.policy: NodeMetricCollectPolicy | None = None
        self.seen_from = T0  # nodemetric_seen() is True from this fake time on
        self.fail_pods_at: set[float] = set()

    def pods(self) -> Sequence[PodMeta]:
        if self.clock.now - T0 in self.fail_pods_at:
            raise RuntimeError("pods source broken")
        return ()

    def host_apps(self) -> Sequence[HostApplicationSpec] | None:
        return None

    def collect_policy(self) -> NodeMetricCollectPolicy | None:
        return self.policy

    def nodemetric_seen(self) -> bool:
        return self.clock.now >= self.seen_from


class Writer:
    def __init__(self, clock: FakeTime) -> None:
        self.clock = clock
        self.writes: list[tuple[float, dict[str, Any]]] = []
        self.fail_at: set[float] = set()

    def write_nodemetric_status(self, status: dict[str, Any]) -> None:
        t = self.clock.now - T0
        if t in self.fail_at:
            raise RuntimeError("nodemetrics/n1: conflict")
        self.writes.append((t, status))


class Pusher:
    def __init__(self, clock: FakeTime) -> None:
        self.clock = clock
        self.pushes: list[tuple[float, pb.NodeMetricReport | None]] = []

    def push(self, report: pb.NodeMetricReport | None = None) -> bool:
        self.pushes.append((self.clock.now - T0, report))
        return True


class Harness:
    def __init__(self, *, writer: bool = True, pusher: bool = True, push_interval: float = 5.0) -> None:
        self.time = FakeTime()
        self.sources = Sources(self.time)
        self.writer = Writer(self.time) if writer else None
        self.pusher = Pusher(self.time) if pusher else None
        self.results: list[tuple[float, str, str]] = []
        self.statuses: list[tuple[float, NodeMetricStatus]] = []
        self.cache = MetricCache()
        self.cache.append(
            [Sample("node_cpu_usage", {}, NOW_MS, 1.5), Sample("node_memory_usage", {}, NOW_MS, 1024.0**3)]
        )
        self.loop = ReporterLoop(
            node_name="n1",
            cache=self.cache,
            sources=self.sources,
            writer=self.writer,
            pusher=self.pusher,
            push_interval=push_interval,
            on_result=lambda target, result: self.results.append((self.time.now - T0, target, result)),
            on_status=lambda status: self.statuses.append((self.time.now - T0, status)),
            clock=lambda: NOW,
            monotonic=self.time.monotonic,
        )

    def run(self, seconds: float) -> FakeStop:
        stop = FakeStop(self.time, T0 + seconds)
        self.loop.run(stop)
        return stop


def test_first_cr_write_one_interval_after_start_then_every_interval() -> None:
    h = Harness(push_interval=5.0)
    h.run(125)
    assert h.writer is not None and h.pusher is not None
    # unknown spec → 60 s; never immediately at start.
    assert [t for t, _ in h.writer.writes] == [60.0, 120.0]
    assert [t for t, _ in h.pusher.pushes] == [5.0 * i for i in range(1, 26)]
    assert [r for r in h.results if r[1] == "cr"] == [(60.0, "cr", "succeeded"), (120.0, "cr", "succeeded")]
    assert h.writer.writes[0][1]["nodeMetric"]["nodeUsage"] == {
        "resources": {"cpu": "1500m", "memory": "1Gi"}
    }


def test_cr_writes_skipped_until_nodemetric_seen() -> None:
    h = Harness(pusher=False)
    h.sources.seen_from = T0 + 100  # the manager creates the NodeMetric after 100 s
    h.run(190)
    assert h.writer is not None
    assert [t for t, _ in h.writer.writes] == [120.0, 180.0]
    # a skipped round is neither a success nor a failure
    assert h.results == [(120.0, "cr", "succeeded"), (180.0, "cr", "succeeded")]
    # the status is still built on the skipped round (it is what the hub would get)
    assert [t for t, _ in h.statuses] == [60.0, 120.0, 180.0]


def test_cr_never_written_while_unseen_but_hub_still_pushed() -> None:
    h = Harness(push_interval=30.0)
    h.sources.seen_from = float("inf")
    h.run(130)
    assert h.writer is not None and h.pusher is not None
    assert h.writer.writes == []
    assert [t for t, _ in h.pusher.pushes] == [30.0, 60.0, 90.0, 120.0]
    assert h.results == []


def test_writer_exception_counts_as_failed_and_loop_continues() -> None:
    h = Harness(pusher=False)
    assert h.writer is not None
    h.writer.fail_at = {60.0}
    h.run(125)
    assert h.results == [(60.0, "cr", "failed"), (120.0, "cr", "succeeded")]
    assert [t for t, _ in h.writer.writes] == [120.0]


def test_push_and_cr_share_one_status_when_due_together() -> None:
    h = Harness(push_interval=60.0)
    h.sources.policy = NodeMetricCollectPolicy(report_interval_seconds=60)
    h.run(61)
    assert h.writer is not None and h.pusher is not None
    assert len(h.statuses) == 1  # built once for both targets
    t, status = h.statuses[0]
    assert t == 60.0
    assert h.loop.last_status is status
    assert h.writer.writes == [(60.0, status.to_dict())]
    assert len(h.pusher.pushes) == 1
    report = h.pusher.pushes[0][1]
    assert report is not None
    assert report.node_name == "n1"
    assert report == report_to_proto("n1", status, h.sources.policy)
    assert report.HasField("collect_policy")


def test_report_interval_follows_policy_with_30s_floor() -> None:
    h = Harness(pusher=False)
    h.sources.policy = NodeMetricCollectPolicy(report_interval_seconds=10)  # floored to 30
    h.run(95)
    assert h.writer is not None
    assert [t for t, _ in h.writer.writes] == [30.0, 60.0, 90.0]


def test_report_interval_recomputed_after_each_report() -> None:
    h = Harness(pusher=False)
    assert h.writer is not None
    h.sources.policy = NodeMetricCollectPolicy(report_interval_seconds=40)

    orig = h.writer.write_nodemetric_status

    def write_then_change(status: dict[str, Any]) -> None:
        orig(status)
        h.sources.policy = NodeMetricCollectPolicy(report_interval_seconds=100)

    h.writer.write_nodemetric_status = write_then_change  # type: ignore[method-assign]
    h.run(250)
    # first at 40 (the interval known at start), then every 100 s
    assert [t for t, _ in h.writer.writes] == [40.0, 140.0, 240.0]


def test_build_failure_skips_the_tick_and_reschedules() -> None:
    h = Harness(push_interval=10.0, writer=False)
    h.sources.fail_pods_at = {20.0}
    h.run(45)
    assert h.pusher is not None
    assert [t for t, _ in h.pusher.pushes] == [10.0, 30.0, 40.0]
    assert [t for t, _ in h.statuses] == [10.0, 30.0, 40.0]


def test_without_writer_nothing_written_and_pushes_run() -> None:
    h = Harness(writer=False, push_interval=20.0)
    h.run(130)
    assert h.pusher is not None
    assert [t for t, _ in h.pusher.pushes] == [20.0, 40.0, 60.0, 80.0, 100.0, 120.0]
    assert h.loop.write_cr(h.loop.build()) is False


def test_without_writer_and_pusher_waits_for_stop() -> None:
    h = Harness(writer=False, pusher=False)
    stop = h.run(1000)
    assert stop.waits == [None]
    assert h.statuses == []


def test_push_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="push interval"):
        ReporterLoop(
            node_name="n1",
            cache=MetricCache(),
            sources=Sources(FakeTime()),
            writer=None,
            pusher=None,
            push_interval=0,
        )


def test_push_without_pusher_is_false() -> None:
    h = Harness(pusher=False)
    assert h.loop.push(h.loop.build()) is False


def test_real_time_loop_pushes_and_stops() -> None:
    pushes: list[pb.NodeMetricReport | None] = []
    enough = threading.Event()

    class RealPusher:
        def push(self, report: pb.NodeMetricReport | None = None) -> bool:
            pushes.append(report)
            if len(pushes) >= 3:
                enough.set()
            return True

    clock = FakeTime()
    loop = ReporterLoop(
        node_name="n1",
        cache=MetricCache(),
        sources=Sources(clock),
        writer=None,
        pusher=RealPusher(),
        push_interval=0.01,
        clock=lambda: NOW,
    )
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,), daemon=True)
    thread.start()
    try:
        assert enough.wait(5.0)
    finally:
        stop.set()
        thread.join(5.0)
    assert not thread.is_alive()
    assert all(r is not None and r.node_name == "n1" for r in pushes)


def test_huge_report_interval_waits_the_clamped_maximum() -> None:
    h = Harness(pusher=False)
    h.sources.policy = NodeMetricCollectPolicy(report_interval_seconds=2**62)
    stop = h.run(MAX_WAIT_SECONDS * 2.5)
    assert h.writer is not None
    # docs/configuration.md#duration-limits: the interval is at most 30 days, every wait too.
    assert [t for t, _ in h.writer.writes] == [MAX_WAIT_SECONDS, 2 * MAX_WAIT_SECONDS]
    assert all(w is not None and 0 <= w <= MAX_WAIT_SECONDS for w in stop.waits)


@pytest.mark.parametrize("push_interval", [1e300, 2.0**80])
def test_real_wait_survives_huge_intervals(push_interval: float) -> None:
    # Once an OverflowError on every start: threading refuses waits beyond TIMEOUT_MAX (~292 years).
    clock = FakeTime()
    sources = Sources(clock)
    sources.policy = NodeMetricCollectPolicy(report_interval_seconds=2**62)
    loop = ReporterLoop(
        node_name="n1",
        cache=MetricCache(),
        sources=sources,
        writer=Writer(clock),
        pusher=Pusher(clock),
        push_interval=push_interval,
        clock=lambda: NOW,
    )
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            loop.run(stop)
        except BaseException as e:  # the test reports whatever escaped
            errors.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(0.2)
    stop.set()
    thread.join(5.0)
    assert not thread.is_alive() and errors == []
