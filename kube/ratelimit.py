"""A thread-safe client-side token-bucket rate limiter (the equivalent of client-go's QPS/Burst), shared
by the full kubernetes client (kube.client) and the lean REST client (kube.rest).

Imports: the standard library and apis.waits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from apis.waits import clamp_seconds

__all__ = ["RateLimiter"]


class RateLimiter:
    """A token bucket: ``burst`` tokens at most, refilled at ``qps`` tokens per second. Safe to share
    between threads and between clients. ``qps <= 0`` disables limiting."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if burst < 1:
            raise ValueError(f"burst must be >= 1, got {burst}")
        self.qps = float(qps)
        self.burst = int(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()

    def _refill(self, now: float) -> None:
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now

    def try_acquire(self) -> bool:
        """Take one token if one is available now."""
        if self.qps <= 0:
            return True
        with self._lock:
            self._refill(self._clock())
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True
            return False

    def acquire(self, timeout: float | None = None) -> bool:
        """Wait for a token; False if none became available within ``timeout`` seconds (None: wait
        as long as it takes). Waiters reserve their token up front, so they are served in order."""
        if self.qps <= 0:
            return True
        with self._lock:
            now = self._clock()
            self._refill(now)
            wait = 0.0 if self._tokens >= 1.0 else (1.0 - self._tokens) / self.qps
            if timeout is not None and wait > timeout:
                return False
            self._tokens -= 1.0  # may go negative: a reservation that later callers queue behind
        if wait > 0:
            time.sleep(clamp_seconds(wait, "client rate limiter wait (qps)"))
        return True
