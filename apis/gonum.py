"""Go integer arithmetic that Python spells differently: ``go_div`` truncates toward zero like Go's int64
``/`` (Python's ``//`` floors); ``go_int64`` converts a float64 as ``int64(f)`` does on amd64, where an
infinite, NaN or out-of-range value gives MinInt64 instead of Python's OverflowError; ``wrap_int64``
leaves an integer as Go's int64 ``+``/``-`` would (wrapped modulo 2^64). One definition for every port
of an upstream formula.
Imports: the standard library.
"""

from __future__ import annotations

import math

__all__ = ["go_div", "go_int64", "wrap_int64"]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def go_div(a: int, b: int) -> int:
    """Go's integer division ``a / b``: truncates toward zero (``ZeroDivisionError`` when ``b`` is 0)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def go_int64(f: float) -> int:
    """Go's ``int64(f)`` on amd64: truncates toward zero; NaN, infinities and values outside int64 give
    MinInt64 (the CPU's "integer indefinite"), as the upstream formulas would see them."""
    if not math.isfinite(f) or not INT64_MIN <= f < 2.0**63:
        return INT64_MIN
    return int(f)


def wrap_int64(x: int) -> int:
    """``x`` as Go's int64 ``+``/``-`` leave it: wrapped modulo 2^64 into [MinInt64, MaxInt64]."""
    return ((x - INT64_MIN) & 0xFFFF_FFFF_FFFF_FFFF) + INT64_MIN
