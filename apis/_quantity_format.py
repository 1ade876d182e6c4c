"""Exact-decimal helpers behind ``apis.quantity``: suffix tables, nano rounding, canonical strings.

A quantity's amount is held as ``(m, e)`` meaning ``m * 10**e`` with ``m`` an int free of trailing decimal
zeros (``(0, 0)`` for zero) and ``e >= -9`` once rounded to nano. Every helper here works on that pair
without building ``10**e`` for huge exponents; parsing caps magnitudes at 2^63-1, so every parsed amount
has at most 28 digits and arithmetic on parsed quantities costs microseconds
(docs/upstream.md#quantity-limits).
Imports: standard library only. Pure, no I/O.
"""

from __future__ import annotations

import json
from typing import Final

INT64_MAX: Final = (1 << 63) - 1
NANO_EXP: Final = -9

# Decimal SI suffix -> power of ten; binary SI suffix -> power of two (Go's suffix tables).
DECIMAL_SUFFIXES: Final[dict[str, int]] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
BINARY_SUFFIXES: Final[dict[str, int]] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXP: Final[dict[int, str]] = {exp: name for name, exp in DECIMAL_SUFFIXES.items()}
_BINARY_BY_POWER: Final = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")  # index = power of 1024

_LOG10_2: Final = 0.30102999566398120
# int()/str() refuse more than sys.get_int_max_str_digits() digits (>= 640 when limited): stay below it.
_CHUNK_DIGITS: Final = 600
_CHUNK_LIMIT: Final = 10**_CHUNK_DIGITS
_TEN16: Final = 10**16


def quote(text: str) -> str:
    """Go-``%q``-like double-quoted text for error messages, shortened when very long."""
    if len(text) > 200:
        text = text[:200] + "…"
    return json.dumps(text, ensure_ascii=False)


def pow10(n: int) -> int:
    """``10**n`` for ``n >= 0``, typed as int."""
    result: int = 10**n
    return result


_POW10: Final[tuple[int, ...]] = tuple(pow10(i) for i in range(19))


def int_of_digits(digits: str) -> int:
    """``int(digits)`` for a non-empty ASCII digit string of any length."""
    if len(digits) <= _CHUNK_DIGITS:
        return int(digits)
    half = len(digits) // 2
    return int_of_digits(digits[:-half]) * pow10(half) + int_of_digits(digits[-half:])


def digits_of(n: int) -> str:
    """``str(n)`` for an int of any size."""
    if n < 0:
        return "-" + digits_of(-n)
    if n < _CHUNK_LIMIT:
        return str(n)
    half = n.bit_length() * 3 // 20  # about half the decimal digits
    high, low = divmod(n, pow10(half))
    return digits_of(high) + digits_of(low).rjust(half, "0")


def normalize(m: int, e: int) -> tuple[int, int]:
    """Move all factors of ten from ``m`` into ``e``; zero becomes ``(0, 0)``."""
    if m == 0:
        return 0, 0
    while m % _TEN16 == 0:
        m //= _TEN16
        e += 16
    while m % 10 == 0:
        m //= 10
        e += 1
    return m, e


def parsed_nanos(significant: str, e: int, p: int) -> int:
    """``ceil(S * 10**e * 2**p * 10**9)`` for the digit string ``S`` (no leading or trailing zeros), read
    cheaply: the caller has ruled out values of 10**19 and more, so only the digits at or above the nano
    position (shifted by ``p``) are converted; any lower digit rounds the result up, away from zero.

    With ``2**p = 10**p / 5**p`` the value in nanos is ``(I + F) / 5**p`` where ``I`` is the integer part of
    ``S * 10**(e + 9 + p)`` and ``0 <= F < 1`` the rest; as ``I mod 5**p + F < 5**p`` the ceiling is
    ``I // 5**p`` plus one when either the remainder or ``F`` is non-zero.
    """
    shift = e + 9 + p
    keep = len(significant) + shift
    if shift >= 0:
        whole, rest = int_of_digits(significant) * pow10(shift), False
    elif keep > 0:
        whole, rest = int_of_digits(significant[:keep]), True  # the dropped tail ends in a non-zero digit
    else:
        whole, rest = 0, True
    quotient, remainder = divmod(whole, 5**p) if p else (whole, 0)
    return quotient + (1 if remainder or rest else 0)


def compare(m1: int, e1: int, m2: int, e2: int) -> int:
    """Sign of ``m1*10**e1 - m2*10**e2``; cheap even when the exponents are far apart."""
    s1 = (m1 > 0) - (m1 < 0)
    s2 = (m2 > 0) - (m2 < 0)
    if s1 != s2 or s1 == 0:
        return (s1 > s2) - (s1 < s2)
    a1, a2 = abs(m1), abs(m2)
    # e + bit_length*log10(2) over-estimates log10(|value|) by less than 0.302.
    log1 = e1 + a1.bit_length() * _LOG10_2
    log2 = e2 + a2.bit_length() * _LOG10_2
    if log1 > log2 + 2:
        return s1
    if log2 > log1 + 2:
        return -s1
    low = min(e1, e2)  # exponents now differ by about the digit counts: aligning is cheap
    x, y = a1 * pow10(e1 - low), a2 * pow10(e2 - low)
    return s1 * ((x > y) - (x < y))


def add(m1: int, e1: int, m2: int, e2: int) -> tuple[int, int]:
    """Exact sum of two decimals."""
    if m1 == 0:
        return m2, e2
    if m2 == 0:
        return m1, e1
    low = min(e1, e2)
    return normalize(m1 * pow10(e1 - low) + m2 * pow10(e2 - low), low)


def to_scale(m: int, e: int, scale: int) -> int:
    """``m*10**e / 10**scale`` rounded away from zero, saturated to ``±(2**63-1)``.

    Go's ``ScaledValue`` rounds away from zero on its int64 path; where Go overflows int64 (or its
    big-decimal path rounds negatives towards +inf) we saturate / round away instead
    (docs/upstream.md#conventions).
    """
    shift = e - scale
    if 0 <= shift < len(_POW10):  # the commonest case first: a whole number at that scale in int64
        whole = m * _POW10[shift]
        if -INT64_MAX <= whole <= INT64_MAX:
            return whole
    if m == 0:
        return 0
    sign = 1 if m > 0 else -1
    if e - scale >= 0:
        if e - scale >= 19:  # |value| >= 10**19 at that scale: beyond int64
            return sign * INT64_MAX
        result = abs(m) * pow10(e - scale)
    else:
        quotient, remainder = divmod(abs(m), pow10(scale - e))
        result = quotient + (1 if remainder else 0)
    return sign * min(result, INT64_MAX)


def canonical_decimal(m: int, e: int, exponent_form: bool) -> str:
    """Go's DecimalSI / DecimalExponent canonical text of a non-zero normalized decimal.

    The exponent is lowered to a multiple of three (the mantissa grows instead). DecimalSI uses
    ``n u m "" k M G T P E``; beyond ``E`` it falls back to ``e<N>`` like current upstream (older Go
    dropped the suffix and printed only the mantissa, e.g. ``"1"`` for 10^21).
    """
    extra = e % 3
    mantissa, exponent = m * pow10(extra), e - extra
    if not exponent_form and exponent in _DECIMAL_BY_EXP:
        return digits_of(mantissa) + _DECIMAL_BY_EXP[exponent]
    return digits_of(mantissa) + ("" if exponent == 0 else f"e{exponent}")


def canonical_binary(n: int) -> str:
    """Go's BinarySI canonical text of an integer with ``|n| >= 1024``: largest dividing power of 1024.

    Go has suffixes up to ``Ei``; a value divisible by 1024**7 keeps ``Ei`` with a larger mantissa
    (Go would print the bare mantissa there, losing the magnitude).
    """
    power = 0
    while power < len(_BINARY_BY_POWER) - 1 and n % 1024 == 0:
        n //= 1024
        power += 1
    return digits_of(n) + _BINARY_BY_POWER[power]
