"""A rate-limited work queue of string keys with client-go's workqueue semantics.

* Deduplication: a key waiting in the queue is queued once however often it is added.
* A key being processed (handed out by ``get`` and not yet ``done``) is not handed out again; re-adding
  it marks it dirty, and ``done`` queues it again, so it is processed once more afterwards.
* ``add_after(key, seconds)`` delays an add (the earliest pending time per key wins).
* ``add_rate_limited(key)`` delays by the rate limiter: the max of a per-key exponential failure backoff
  (5 ms doubling to 1000 s, reset by ``forget``) and an overall token bucket (10 qps, burst 100), as
  client-go's ``DefaultControllerRateLimiter``.
Thread-safe; the clock is injectable for tests. Imports: the standard library only.
"""

from __future__ import annotations

import contextlib
import heapq
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

__all__ = [
    "BucketRateLimiter",
    "ItemExponentialFailureRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "RateLimitingQueue",
    "default_rate_limiter",
]

Clock = Callable[[], float]


class RateLimiter:
    """How long to wait before (re)processing a key."""

    def when(self, key: str) -> float:
        raise NotImplementedError

    def forget(self, key: str) -> None:
        raise NotImplementedError

    def num_requeues(self, key: str) -> int:
        raise NotImplementedError


class ItemExponentialFailureRateLimiter(RateLimiter):
    """``base * 2**failures`` seconds per key, capped at ``cap``; ``forget`` resets the key."""

    def __init__(self, base: float = 0.005, cap: float = 1000.0) -> None:
        self.base, self.cap = base, cap
        self._failures: dict[str, int] = {}
        self._lock = threading.Lock()

    def when(self, key: str) -> float:
        with self._lock:
            n = self._failures.get(key, 0)
            self._failures[key] = n + 1
        if n > 62:  # 2**n overflows any useful delay
            return self.cap
        return min(self.cap, self.base * float(2**n))

    def forget(self, key: str) -> None:
        with self._lock:
            self._failures.pop(key, None)

    def num_requeues(self, key: str) -> int:
        with self._lock:
            return self._failures.get(key, 0)


class BucketRateLimiter(RateLimiter):
    """An overall token bucket (``qps`` refill, ``burst`` capacity) by reservation: each call takes a
    token and returns how long until that token exists (0 while the burst lasts)."""

    def __init__(self, qps: float = 10.0, burst: int = 100, clock: Clock = time.monotonic) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("qps must be > 0 and burst >= 1")
        self.qps, self.burst = float(qps), int(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()

    def when(self, key: str) -> float:
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def forget(self, key: str) -> None:
        return None

    def num_requeues(self, key: str) -> int:
        return 0


class MaxOfRateLimiter(RateLimiter):
    """The longest wait any of the limiters asks for."""

    def __init__(self, *limiters: RateLimiter) -> None:
        self.limiters = limiters

    def when(self, key: str) -> float:
        return max(limiter.when(key) for limiter in self.limiters)

    def forget(self, key: str) -> None:
        for limiter in self.limiters:
            limiter.forget(key)

    def num_requeues(self, key: str) -> int:
        return max(limiter.num_requeues(key) for limiter in self.limiters)


def default_rate_limiter(clock: Clock = time.monotonic) -> RateLimiter:
    """client-go's default: per-key 5 ms → 1000 s exponential backoff, max'ed with a 10 qps/100 bucket."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0), BucketRateLimiter(10, 100, clock)
    )


class RateLimitingQueue:
    """The work queue. ``get`` blocks until a key is ready (or ``timeout``/shutdown: ``None``)."""

    def __init__(
        self,
        rate_limiter: RateLimiter | None = None,
        *,
        clock: Clock = time.monotonic,
        on_depth: Callable[[int], None] | None = None,
    ) -> None:
        self.rate_limiter = rate_limiter if rate_limiter is not None else default_rate_limiter(clock)
        self._clock = clock
        self._on_depth = on_depth
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._waiting: list[tuple[float, int, str]] = []  # heap of (ready_at, seq, key)
        self._ready_at: dict[str, float] = {}  # earliest pending time per delayed key
        self._seq = 0
        self._shutdown = False
        self._cond = threading.Condition()

    # -- adding ----------------------------------------------------------------------------------------

    def add(self, key: str) -> None:
        with self._cond:
            self._add_locked(key)

    def add_all(self, keys: Iterable[str]) -> None:
        with self._cond:
            for key in keys:
                self._add_locked(key)

    def _add_locked(self, key: str) -> None:
        if self._shutdown or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.append(key)
            self._report()
            self._cond.notify()

    def add_after(self, key: str, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shutdown:
                return
            at = self._clock() + delay
            known = self._ready_at.get(key)
            if known is not None and known <= at:
                return
            self._ready_at[key] = at
            self._seq += 1
            heapq.heappush(self._waiting, (at, self._seq, key))
            self._cond.notify_all()  # a getter may have to wake earlier than it planned

    def add_rate_limited(self, key: str) -> None:
        self.add_after(key, self.rate_limiter.when(key))

    def forget(self, key: str) -> None:
        self.rate_limiter.forget(key)

    def num_requeues(self, key: str) -> int:
        return self.rate_limiter.num_requeues(key)

    # -- processing ------------------------------------------------------------------------------------

    def get(self, timeout: float | None = None) -> str | None:
        """The next ready key (now being processed: call ``done`` after), or ``None`` on timeout/shutdown."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while True:
                self._promote_locked()
                if self._shutdown:
                    return None
                if self._queue:
                    key = self._queue.popleft()
                    self._processing.add(key)
                    self._dirty.discard(key)
                    self._report()
                    return key
                now = self._clock()
                waits = [] if deadline is None else [deadline - now]
                if self._waiting:
                    waits.append(self._waiting[0][0] - now)
                if deadline is not None and now >= deadline:
                    return None
                self._cond.wait(max(0.0, min(waits)) if waits else None)

    def done(self, key: str) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty and not self._shutdown:
                self._queue.append(key)
                self._report()
                self._cond.notify()

    def _promote_locked(self) -> None:
        now = self._clock()
        while self._waiting and self._waiting[0][0] <= now:
            at, _, key = heapq.heappop(self._waiting)
            if self._ready_at.get(key) != at:
                continue  # superseded by an earlier time, already promoted
            del self._ready_at[key]
            self._add_locked(key)

    # -- state -----------------------------------------------------------------------------------------

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    def pending(self) -> int:
        """Keys waiting for a delay to pass."""
        with self._cond:
            return len(self._ready_at)

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()

    @property
    def shutting_down(self) -> bool:
        with self._cond:
            return self._shutdown

    def wake(self) -> None:
        """Wake blocked getters (they re-check their timeout and the queue)."""
        with self._cond:
            self._cond.notify_all()

    def _report(self) -> None:
        if self._on_depth is not None:
            with contextlib.suppress(Exception):  # a metrics callback never breaks the queue
                self._on_depth(len(self._queue))
