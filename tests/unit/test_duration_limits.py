"""Duration limits (docs/configuration.md#duration-limits): ``apis.waits.clamp_seconds`` bounds every wait,
sleep and time offset computed from configuration to [0, 30 days], warns once per name, and the sites that
route through it survive absurd values (huge, infinite, NaN) instead of raising ``OverflowError`` or
``ValueError``."""

from __future__ import annotations

import logging
import math
import threading
import time
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from agent.qosmanager.evictplan import EvictState, cool_down_active
from agent.qosmanager.runner import SystemClock
from agent.reporter.build import report_interval_seconds
from apis import waits
from apis.nodemetric import NodeMetricCollectPolicy
from apis.waits import MAX_WAIT_SECONDS, clamp_seconds
from kube import ratelimit
from kube.ratelimit import RateLimiter
from manager.controllerruntime.runtime import Controller
from manager.noderesource.resources import is_degraded

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waits, "_warned", set())


@pytest.mark.parametrize(
    ("value", "want"),
    [
        (0, 0.0),
        (1.5, 1.5),
        (-3, 0.0),
        (-math.inf, 0.0),
        (MAX_WAIT_SECONDS, MAX_WAIT_SECONDS),
        (MAX_WAIT_SECONDS + 1, MAX_WAIT_SECONDS),
        (2**62, MAX_WAIT_SECONDS),
        (10**400, MAX_WAIT_SECONDS),  # larger than any float
        (math.inf, MAX_WAIT_SECONDS),
        (math.nan, MAX_WAIT_SECONDS),  # never a busy loop
    ],
)
def test_clamp_seconds(value: float, want: float) -> None:
    got = clamp_seconds(value, "x")
    assert got == want and isinstance(got, float)


def test_the_maximum_fits_every_wait_and_datetime() -> None:
    assert MAX_WAIT_SECONDS < threading.TIMEOUT_MAX
    assert datetime(9999, 1, 1, tzinfo=UTC) + timedelta(seconds=MAX_WAIT_SECONDS) < datetime.max.replace(
        tzinfo=UTC
    )


def test_warns_once_per_name_and_never_for_a_passed_deadline(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="apis.waits"):
        for _ in range(3):
            clamp_seconds(1e300, "--push-interval-seconds")
            clamp_seconds(-5, "--push-interval-seconds")
        clamp_seconds(10**400, "reportIntervalSeconds")
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "--push-interval-seconds: 1e+300 s is beyond the longest wait koord allows; using 2592000 s",
        "reportIntervalSeconds: about 2^1329 s is beyond the longest wait koord allows; using 2592000 s",
    ]


def test_report_interval_from_the_nodemetric_spec_is_clamped() -> None:
    assert report_interval_seconds(NodeMetricCollectPolicy(report_interval_seconds=2**62)) == MAX_WAIT_SECONDS
    assert report_interval_seconds(NodeMetricCollectPolicy(report_interval_seconds=600)) == 600


def test_qos_clock_waits_survive_huge_timeouts() -> None:
    event = threading.Event()
    timer = threading.Timer(0.05, event.set)
    timer.start()
    try:
        assert SystemClock().wait(event, 1e300) is True  # was OverflowError
    finally:
        timer.cancel()


def test_eviction_cool_down_with_huge_seconds() -> None:
    state = EvictState(last_evict_time=NOW)
    assert cool_down_active(state, NOW + timedelta(days=29), 1e300)
    assert not cool_down_active(state, NOW + timedelta(days=31), 1e300)
    assert cool_down_active(EvictState(last_evict_time=datetime.max.replace(tzinfo=UTC)), NOW, 60)


def test_degrade_time_minutes_is_clamped() -> None:
    nm = {"status": {"updateTime": "2026-01-01T00:00:00Z"}}
    for minutes in (2**62, -(2**62), 10**30):
        is_degraded(nm, NOW, minutes)  # was OverflowError
    assert not is_degraded(nm, NOW + timedelta(days=29), 2**62)
    assert is_degraded(nm, NOW + timedelta(days=31), 2**62)  # 30 days at most
    assert is_degraded(nm, NOW + timedelta(seconds=1), -5)  # negative: 0
    assert not is_degraded({"status": {"updateTime": "9999-12-31T23:59:59Z"}}, NOW, 15)


def test_controller_requeue_delays_are_clamped() -> None:
    ctl = Controller("c", lambda key: None, clock=lambda: 100.0)
    ctl.enqueue_after("k", 1e300)
    ctl.enqueue_after("n", math.nan)
    ready = sorted(at for at, *_ in ctl.queue._waiting)
    assert ready == [100.0 + MAX_WAIT_SECONDS] * 2


def test_rate_limiter_sleeps_are_clamped(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(ratelimit, "time", SimpleNamespace(sleep=slept.append, monotonic=time.monotonic))
    limiter = RateLimiter(qps=1e-300, burst=1)
    assert limiter.acquire() and limiter.acquire()
    assert slept == [MAX_WAIT_SECONDS]
