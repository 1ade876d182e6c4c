"""Exact reformulations of the float64 tests of Filter and of the expiry check, so the per-pod work is one
comparison per resource (docs/rules/scheduler.md#filter, the usage and expiry tests;
docs/rules/scheduler.md#score, the expiry test).

* Filter: for ``cap > 0``, ``round_half_away(float(S) / float(cap) * 100) > T`` (Go's order, IEEE
  doubles) is a non-decreasing predicate of the integer ``S`` (int→double conversion, division by a
  positive double, multiplication by 100 and rounding are all monotone), so the failing sums are exactly
  the integers ``S >= min_exceeding_sum(T, cap)``. With ``S = existing + estimate`` the test becomes
  ``estimate >= min_exceeding_sum(T, cap) - existing`` (Python integers, no rounding at all).
* Expiry: ``now - updateTime >= E`` (double subtraction, exact comparison with the integer ``E``) is a
  non-decreasing predicate of the double ``now``, so it equals ``now >= expiry_instant(updateTime, E)``
  for every non-NaN ``now``.

Both thresholds are found by a guess from real arithmetic and an exact bisection around it that
evaluates the original float expression, so they hold by construction, not by an error bound.
Imports: the standard library, scheduler.plugins.loadaware.estimator.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Final

from scheduler.plugins.loadaware.estimator import round_half_away

#: Search range for sums: far beyond any int64 sum of int64 values; f(±2**200) is beyond every bound.
_SUM_RANGE: Final = 1 << 200
_CACHE_LIMIT: Final = 1 << 14
_expiry_cache: dict[tuple[float, int], float] = {}


def exceed_bound(threshold: int, capacity: int) -> float:
    """The smallest double x with ``round_half_away(x) > threshold`` (inf when the check is off)."""
    if threshold == 0 or capacity == 0:
        return math.inf
    b = threshold + 0.5
    return b if threshold >= 0 else math.nextafter(b, math.inf)


def usage_percent(total: int, capacity: int) -> float:
    """Filter's float64 usage expression ``float(total) / float(capacity) * 100``."""
    return float(total) / float(capacity) * 100


def _first_true_int(pred: Callable[[int], bool], lo: int, hi: int) -> int:
    """The smallest integer in ``(lo, hi]`` where the monotone ``pred`` holds, given ``not pred(lo)``
    and ``pred(hi)``."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid
    return hi


def min_exceeding_sum(threshold: int, capacity: int) -> int:
    """The smallest integer S with ``usage_percent(S, capacity) >= exceed_bound(threshold, capacity)``,
    i.e. the smallest sum whose Filter usage exceeds ``threshold``. Requires ``capacity > 0`` and
    ``threshold != 0``."""
    if capacity <= 0 or threshold == 0:
        raise ValueError("min_exceeding_sum: capacity must be > 0 and the threshold enabled")
    bound = exceed_bound(threshold, capacity)

    def fails(s: int) -> bool:  # Filter's own test (monotone in s); also exact for |threshold| > 2**53
        return round_half_away(usage_percent(s, capacity)) > threshold

    guess = math.ceil(bound * float(capacity) / 100)
    step = 2
    lo, hi = guess - step, guess + step
    while lo > -_SUM_RANGE and fails(lo):  # widen until the bracket holds
        step *= 16
        lo = max(guess - step, -_SUM_RANGE)
    while hi < _SUM_RANGE and not fails(hi):
        step *= 16
        hi = min(guess + step, _SUM_RANGE)
    return _first_true_int(fails, lo, hi)


# --- doubles in order ------------------------------------------------------------------------------------


def _key(x: float) -> int:
    """An integer that orders like the double ``x`` (``-0.0`` and ``0.0`` share key 0)."""
    bits: int = struct.unpack("<q", struct.pack("<d", abs(x)))[0]
    return -bits if x < 0 else bits


def _from_key(k: int) -> float:
    value: float = struct.unpack("<d", struct.pack("<q", abs(k)))[0]
    return -value if k < 0 else value


def expiry_instant(update_time: float, expiration_seconds: int) -> float:
    """The smallest double ``t`` with ``t - update_time >= expiration_seconds`` (the metric of
    ``update_time`` is expired at ``now`` iff ``now >= t``, for every non-NaN ``now``). ``update_time``
    must be finite and ``expiration_seconds`` > 0."""
    memo = (update_time, expiration_seconds)
    found = _expiry_cache.get(memo)
    if found is not None:
        return found

    def expired(t: float) -> bool:
        return t - update_time >= expiration_seconds

    try:
        guess = update_time + expiration_seconds
    except OverflowError:
        guess = math.inf
    lo, hi = guess, guess
    for _ in range(4):
        if expired(lo):
            lo = math.nextafter(lo, -math.inf)
    for _ in range(4):
        if not expired(hi):
            hi = math.nextafter(hi, math.inf)
    if expired(lo):
        lo = -math.inf
    if not expired(hi):
        hi = math.inf
    if expired(-math.inf):  # cannot happen for finite update_time and E > 0; kept for totality
        result = -math.inf
    else:
        key_lo, key_hi = _key(lo), _key(hi)
        result = _from_key(_first_true_int(lambda k: expired(_from_key(k)), key_lo, key_hi))
    if len(_expiry_cache) >= _CACHE_LIMIT:
        _expiry_cache.clear()
    _expiry_cache[memo] = result
    return result
