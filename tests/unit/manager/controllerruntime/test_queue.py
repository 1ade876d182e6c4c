"""The work queue: dedup, re-add while processing, delays, per-key exponential backoff, token bucket."""

from __future__ import annotations

import threading

import pytest

from manager.controllerruntime.queue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    RateLimitingQueue,
    default_rate_limiter,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_dedup_keeps_one_copy_and_order() -> None:
    q = RateLimitingQueue()
    for key in ["a", "b", "a", "c", "b"]:
        q.add(key)
    assert len(q) == 3
    assert [q.get(0), q.get(0), q.get(0)] == ["a", "b", "c"]
    assert q.get(0) is None


def test_key_readded_while_processing_is_processed_again_after_done() -> None:
    q = RateLimitingQueue()
    q.add("a")
    assert q.get(0) == "a"
    q.add("a")
    q.add("a")
    assert q.get(0) is None  # not handed out twice concurrently
    q.done("a")
    assert q.get(0) == "a"
    q.done("a")
    assert q.get(0) is None


def test_add_after_waits_and_earliest_time_wins() -> None:
    clock = FakeClock()
    q = RateLimitingQueue(clock=clock)
    q.add_after("a", 10)
    q.add_after("a", 5)
    q.add_after("a", 20)
    assert q.get(0) is None
    assert q.pending() == 1
    clock.now += 5
    assert q.get(0) == "a"
    q.done("a")
    clock.now += 100
    assert q.get(0) is None  # the superseded later entries are not delivered again


def test_add_after_wakes_a_blocked_getter() -> None:
    q = RateLimitingQueue()
    got: list[str | None] = []
    t = threading.Thread(target=lambda: got.append(q.get(timeout=5)))
    t.start()
    q.add_after("x", 0.05)
    t.join(5)
    assert got == ["x"]


def test_item_backoff_doubles_from_5ms_to_1000s_and_forget_resets() -> None:
    rl = ItemExponentialFailureRateLimiter()
    delays = [rl.when("k") for _ in range(20)]
    assert delays[:4] == pytest.approx([0.005, 0.01, 0.02, 0.04])
    assert max(delays) == 1000.0
    assert delays[-1] == 1000.0
    assert rl.num_requeues("k") == 20
    assert rl.when("other") == pytest.approx(0.005)
    rl.forget("k")
    assert rl.when("k") == pytest.approx(0.005)
    assert rl.when("k") == pytest.approx(0.01)
    assert [rl.when("huge") for _ in range(100)][-1] == 1000.0


def test_bucket_allows_burst_then_spaces_at_qps() -> None:
    clock = FakeClock()
    rl = BucketRateLimiter(10, 100, clock)
    assert [rl.when(str(i)) for i in range(100)] == [0.0] * 100
    assert rl.when("x") == pytest.approx(0.1)
    assert rl.when("y") == pytest.approx(0.2)
    clock.now += 10
    assert rl.when("z") == 0.0


def test_default_limiter_is_max_of_both() -> None:
    clock = FakeClock()
    rl = default_rate_limiter(clock)
    assert rl.when("a") == pytest.approx(0.005)
    for _ in range(200):
        rl.when("b")
    assert rl.when("c") > 5  # the bucket is exhausted: its delay dominates the 5 ms


def test_add_rate_limited_uses_backoff() -> None:
    clock = FakeClock()
    q = RateLimitingQueue(ItemExponentialFailureRateLimiter(1.0, 8.0), clock=clock)
    q.add_rate_limited("k")
    assert q.get(0) is None
    clock.now += 1
    assert q.get(0) == "k"
    q.done("k")
    q.add_rate_limited("k")
    clock.now += 1.5
    assert q.get(0) is None
    clock.now += 0.5
    assert q.get(0) == "k"
    assert q.num_requeues("k") == 2
    q.forget("k")
    assert q.num_requeues("k") == 0


def test_shutdown_unblocks_getters_and_drops_adds() -> None:
    q = RateLimitingQueue()
    got: list[str | None] = ["unset"]
    t = threading.Thread(target=lambda: got.__setitem__(0, q.get()))
    t.start()
    q.shutdown()
    t.join(5)
    assert got == [None]
    q.add("a")
    assert len(q) == 0


def test_depth_callback_reports_queue_length() -> None:
    depths: list[int] = []
    q = RateLimitingQueue(on_depth=depths.append)
    q.add("a")
    q.add("b")
    q.get(0)
    assert depths == [1, 2, 1]
