"""Go ``time.Duration`` / ``metav1.Duration`` values for the slo-controller config and NodeMetric spec.

``Duration`` holds integer nanoseconds like Go. ``Duration.parse`` follows ``time.ParseDuration``
(``"5m"``, ``"1h30m"``, ``"1.5s"``, ``"-2us"``, ``"0"``; units ns, us, µs, μs, ms, s, m, h; int64
overflow rejected) and ``str()`` follows ``Duration.String`` (``"5m0s"``, ``"1m30s"``, ``"0s"``).
Imports: the standard library only. Pure, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

NANOSECOND: Final = 1
MICROSECOND: Final = 1_000 * NANOSECOND
MILLISECOND: Final = 1_000 * MICROSECOND
SECOND: Final = 1_000 * MILLISECOND
MINUTE: Final = 60 * SECOND
HOUR: Final = 60 * MINUTE

_INT64_MAX: Final = (1 << 63) - 1
_UNITS: Final[dict[str, int]] = {
    "ns": NANOSECOND,
    "us": MICROSECOND,
    "\u00b5s": MICROSECOND,  # micro sign
    "\u03bcs": MICROSECOND,  # Greek small letter mu
    "ms": MILLISECOND,
    "s": SECOND,
    "m": MINUTE,
    "h": HOUR,
}
_DIGITS: Final = frozenset("0123456789")


class DurationError(ValueError):
    """Text that Go's ``time.ParseDuration`` rejects."""


@dataclass(frozen=True, order=True)
class Duration:
    """A Go duration: signed int64 nanoseconds."""

    nanoseconds: int

    @classmethod
    def parse(cls, text: str) -> Duration:
        """Parse Go duration text; raises DurationError naming the text."""
        return cls(parse_go_duration(text))

    @classmethod
    def of_seconds(cls, seconds: int) -> Duration:
        """The duration of a whole number of seconds."""
        return cls(seconds * SECOND)

    def total_seconds(self) -> float:
        """Seconds as a float (like Go's ``Duration.Seconds``)."""
        return self.nanoseconds / SECOND

    def __str__(self) -> str:
        return format_go_duration(self.nanoseconds)


def _leading_int(s: str, i: int) -> tuple[int, int]:
    """Digits at ``s[i:]`` as an integer; raises on int64 overflow (Go's ``leadingInt``)."""
    x = 0
    while i < len(s) and s[i] in _DIGITS:
        x = x * 10 + ord(s[i]) - 48
        if x > 1 << 63:
            raise OverflowError
        i += 1
    return x, i


def _leading_fraction(s: str, i: int) -> tuple[int, float, int]:
    """Fraction digits at ``s[i:]`` (Go's ``leadingFraction``: extra precision is dropped)."""
    x, scale, overflow = 0, 1.0, False
    while i < len(s) and s[i] in _DIGITS:
        if not overflow:
            if x > _INT64_MAX // 10:
                overflow = True
            else:
                y = x * 10 + ord(s[i]) - 48
                if y > 1 << 63:
                    overflow = True
                else:
                    x, scale = y, scale * 10
        i += 1
    return x, scale, i


def parse_go_duration(text: str) -> int:
    """Nanoseconds of Go duration text, exactly as ``time.ParseDuration`` computes them."""
    if not isinstance(text, str):
        raise DurationError(f"time: invalid duration {text!r}: not a string")
    invalid = DurationError(f"time: invalid duration {text!r}")
    s, i, neg = text, 0, False
    if s[:1] in ("-", "+"):
        neg, i = s[0] == "-", 1
    if s[i:] == "0":
        return 0
    if i == len(s):
        raise invalid
    total = 0
    while i < len(s):
        if not (s[i] == "." or s[i] in _DIGITS):
            raise invalid
        start = i
        try:
            whole, i = _leading_int(s, i)
        except OverflowError:
            raise invalid from None
        pre, post = i != start, False
        frac, scale = 0, 1.0
        if i < len(s) and s[i] == ".":
            i += 1
            start = i
            frac, scale, i = _leading_fraction(s, i)
            post = i != start
        if not pre and not post:
            raise invalid
        start = i
        while i < len(s) and s[i] != "." and s[i] not in _DIGITS:
            i += 1
        if i == start:
            raise DurationError(f"time: missing unit in duration {text!r}")
        name = s[start:i]
        unit = _UNITS.get(name)
        if unit is None:
            raise DurationError(f"time: unknown unit {name!r} in duration {text!r}")
        if whole > (1 << 63) // unit:
            raise invalid
        value = whole * unit
        if frac > 0:
            value += int(float(frac) * (float(unit) / scale))
            if value > 1 << 63:
                raise invalid
        total += value
        if total > 1 << 63:
            raise invalid
    if neg:
        return -total
    if total > _INT64_MAX:
        raise invalid
    return total


def _fmt_frac(v: int, prec: int) -> tuple[str, int]:
    """The ``.ddd`` fraction of the low ``prec`` digits of v (trailing zeros and lone dot dropped)."""
    digits = ""
    printed = False
    for _ in range(prec):
        digit = v % 10
        printed = printed or digit != 0
        if printed:
            digits = str(digit) + digits
        v //= 10
    return ("." + digits if printed else ""), v


def format_go_duration(ns: int) -> str:
    """Go's ``Duration.String``: ``"5m0s"``, ``"1h30m0s"``, ``"1.5s"``, ``"300ms"``, ``"0s"``."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    u = abs(ns)
    if u < SECOND:
        if u < MICROSECOND:
            prec, unit = 0, "ns"
        elif u < MILLISECOND:
            prec, unit = 3, "\u00b5s"
        else:
            prec, unit = 6, "ms"
        frac, u = _fmt_frac(u, prec)
        return f"{sign}{u}{frac}{unit}"
    frac, u = _fmt_frac(u, 9)
    out = f"{u % 60}{frac}s"
    u //= 60
    if u > 0:
        out = f"{u % 60}m{out}"
        u //= 60
        if u > 0:
            out = f"{u}h{out}"
    return sign + out
