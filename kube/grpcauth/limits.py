"""Limits on what one caller may cost a gRPC server, as decisions over an injected clock
(docs/rules/manager.md#metrichub-limits; the shard arbiter's, docs/shards.md#security): a token bucket,
a bounded map of buckets (one per key: a node, a peer address), a tarpit for rate-limited refusals, the
refusal itself (a gRPC status by name and the reason it is counted under) and thread-safe counts by
label that a Prometheus view reads.

A call refused for its rate is answered after 0.5-1 x the tarpit's delay: a flooder then pays with its
concurrency instead of the server's CPU (`Tarpit`).
Imports: the standard library only (asyncio for the tarpit).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable

__all__ = ["BucketMap", "Counts", "RefusedError", "Tarpit", "TokenBucket", "peer_host"]


def peer_host(peer: str) -> str:
    """The address part of a gRPC peer string ("ipv4:10.0.0.7:51234" → "ipv4:10.0.0.7",
    "ipv6:[::1]:5000" → "ipv6:[::1]"); other forms (unix sockets) are kept whole."""
    kind, _, rest = peer.partition(":")
    if kind in ("ipv4", "ipv6") and ":" in rest:
        return f"{kind}:{rest.rsplit(':', 1)[0]}"
    return peer


class TokenBucket:
    """`burst` tokens, refilled continuously at `rate` per second. Not thread-safe (BucketMap locks)."""

    __slots__ = ("stamp", "tokens")

    def __init__(self, burst: float, now: float) -> None:
        self.tokens = burst
        self.stamp = now

    def refill(self, rate: float, burst: float, now: float) -> None:
        if now > self.stamp:
            self.tokens = min(burst, self.tokens + (now - self.stamp) * rate)
            self.stamp = now

    def take(self, cost: float, rate: float, burst: float, now: float) -> float:
        """Takes `cost` tokens and returns 0.0, or returns the seconds until they would be there
        (nothing taken)."""
        self.refill(rate, burst, now)
        if self.tokens >= cost:
            self.tokens -= cost
            return 0.0
        return (cost - self.tokens) / rate if rate > 0 else float("inf")


class BucketMap:
    """A token bucket per key (a node, a peer address), at most `max_keys` kept: the least recently
    used is dropped first (its key starts again with a full bucket). Thread-safe."""

    def __init__(
        self, rate: float, burst: float, max_keys: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = burst
        self._max = max(1, max_keys)
        self._clock = clock
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()
        self._lock = threading.Lock()

    def _bucket_locked(self, key: str, now: float) -> TokenBucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket(self.burst, now)
            while len(self._buckets) > self._max:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
        return bucket

    def take(self, key: str, cost: float = 1.0) -> float:
        """0.0 when `key` may go on (`cost` tokens taken); else the seconds until it may."""
        now = self._clock()
        with self._lock:
            return self._bucket_locked(key, now).take(cost, self.rate, self.burst, now)

    def wait(self, key: str, cost: float = 1.0) -> float:
        """The seconds until `key` has `cost` tokens (0.0: now), without taking any."""
        now = self._clock()
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                return 0.0
            bucket.refill(self.rate, self.burst, now)
            missing = cost - bucket.tokens
        return 0.0 if missing <= 0 else missing / self.rate if self.rate > 0 else float("inf")

    def charge(self, key: str, cost: float = 1.0) -> None:
        """Takes `cost` tokens whether or not they are there (a bucket may go below zero); a negative
        cost gives tokens back (never past `burst`)."""
        now = self._clock()
        with self._lock:
            bucket = self._bucket_locked(key, now)
            bucket.refill(self.rate, self.burst, now)
            bucket.tokens = min(self.burst, bucket.tokens - cost)

    def __len__(self) -> int:
        with self._lock:
            return len(self._buckets)


class Tarpit:
    """Holds rate-limited refusals for a while (see the module docstring); at most `max_held` at once.
    Used on one event loop only, so the count needs no lock."""

    def __init__(self, delay: float, max_held: int) -> None:
        self.delay = delay
        self.max_held = max_held
        self.held = 0

    async def hold(self) -> None:
        if self.held >= self.max_held or self.delay <= 0:
            return
        self.held += 1
        try:
            # Jittered: flooders refused together must not come back together.
            await asyncio.sleep(self.delay * random.uniform(0.5, 1.0))
        finally:
            self.held -= 1


class RefusedError(Exception):
    """The hub refuses a call: `code` names its gRPC status (e.g. "RESOURCE_EXHAUSTED"), `reason` is
    the label it is counted under, `details` what the client reads."""

    def __init__(self, code: str, reason: str, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.reason = reason
        self.details = details


class Counts:
    """Counters by label value (e.g. refusals by reason), read at scrape time. Thread-safe."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def inc(self, label: str, n: int = 1) -> None:
        with self._lock:
            self._counts[label] += n

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def __getitem__(self, label: str) -> int:
        with self._lock:
            return self._counts[label]
