"""The CFS-quota burst token limiter of CPU burst (docs/rules/koordlet.md, "Token limiter"; upstream
``burstLimiter``), as an immutable value: ``allow`` returns the verdict and the limiter's next value.
Pure; the random initial fill is passed in so callers (and scenarios) stay deterministic.

Imports: standard library only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

__all__ = ["BurstLimiter", "limiter_allow", "new_limiter", "usage_scale_percent"]


@dataclass(frozen=True, slots=True)
class BurstLimiter:
    period_seconds: int
    capacity: int
    """``C = period × (cfsQuotaBurstPercent − 100)``; tokens live in ``[−C, C]``."""
    tokens: int
    last_update: datetime


def new_limiter(
    period_seconds: int, burst_percent: int, now: datetime, rand: Callable[[], float]
) -> BurstLimiter:
    """A fresh limiter: ``tokens = int64(C × r)`` with ``r = rand() × 0.5`` uniform in ``[0, 0.5)``."""
    capacity = period_seconds * (burst_percent - 100)
    return BurstLimiter(period_seconds, capacity, int(capacity * (rand() * 0.5)), now)


def limiter_allow(tokens: int, capacity: int, seconds: int, scale_percent: int) -> tuple[bool, int]:
    """One check: usage ≥ 100 % of the limit spends ``(u − 100)·t`` tokens, usage < 60 % earns
    ``(100 − u)·t``; the result is clamped to ``[−C, C]``; allowed iff tokens > 0."""
    if scale_percent >= 100:
        tokens -= (scale_percent - 100) * seconds
    elif scale_percent < 60:
        tokens += (100 - scale_percent) * seconds
    tokens = max(-capacity, min(tokens, capacity))
    return tokens > 0, tokens


def usage_scale_percent(usage_cores: float, limit_cores: float) -> int:
    """``int64(containerUsage / limitCores × 100)`` (float64, truncated)."""
    return int(usage_cores / limit_cores * 100)


def check(limiter: BurstLimiter, now: datetime, scale_percent: int) -> tuple[bool, BurstLimiter]:
    """``Allow(now, u)``: ``t`` = whole seconds since the last check (truncated)."""
    seconds = int((now - limiter.last_update).total_seconds())
    allowed, tokens = limiter_allow(limiter.tokens, limiter.capacity, seconds, scale_percent)
    return allowed, replace(limiter, tokens=tokens, last_update=now)


def expired(limiter: BurstLimiter, now: datetime) -> bool:
    """Not checked for more than ``2 × period`` seconds: the limiter is dropped."""
    return (now - limiter.last_update).total_seconds() > 2 * limiter.period_seconds
