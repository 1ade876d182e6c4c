"""Kubernetes ``resource.Quantity`` that agrees with Go's k8s.io/apimachinery exactly.

See docs/upstream.md#conventions.

Role: the one place koord turns quantity text (``"500m"``, ``"1.5Gi"``, ``"12k"``, ``"1e3"``) into exact
numbers and back. Values are exact decimals, never floats: parsing rounds away from zero to nano (1e-9),
caps magnitudes at 2^63-1 (docs/upstream.md#quantity-limits) and remembers the suffix family (DecimalSI /
BinarySI / DecimalExponent), so a parsed amount has at most 28 digits and costs microseconds to use;
``str()`` is Go's canonical ``Quantity.String()``; ``value()`` / ``milli_value()`` round away from zero.
Where Go's behaviour is accidental we differ on purpose; the ``Quantity`` docstring lists where.
Imports: standard library only (and the private helper ``apis._quantity_format``). Pure, no I/O.
"""

from __future__ import annotations

import enum
import functools
import operator
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, Final, NoReturn, Self, cast

from apis import _quantity_format as _fmt

__all__ = [
    "Format",
    "Quantity",
    "QuantityError",
    "format_resource_list",
    "parse_resource_list",
]

_NUMBER_RE: Final = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)", re.DOTALL)
_EXPONENT_RE: Final = re.compile(r"[eE]([+-]?)([0-9]+)")
_CAP_NANOS: Final = _fmt.INT64_MAX * 10**9  # 2^63-1, in nanos
_CANONICAL_DIGITS: Final = 18
# Go's strings.TrimSpace set (unicode.IsSpace), used only for JSON input as UnmarshalJSON does.
_GO_SPACE: Final = "\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000" + "".join(
    chr(c) for c in range(0x2000, 0x200B)
)


class QuantityError(ValueError):
    """Text (or a JSON value) that is not a valid quantity; the message names the offending input."""


class Format(enum.Enum):
    """The suffix family a quantity was written in; it decides how ``str()`` prints it."""

    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


# suffix -> (integer factor, power of ten, format) of _parse_canonical: n, u and m scale by a power of ten
# below zero, the others by an integer.
_CANONICAL_SUFFIXES: Final[dict[str, tuple[int, int, Format]]] = {
    **{s: (_fmt.pow10(max(x, 0)), min(x, 0), Format.DECIMAL_SI) for s, x in _fmt.DECIMAL_SUFFIXES.items()},
    **{s: (1 << p, 0, Format.BINARY_SI) for s, p in _fmt.BINARY_SUFFIXES.items()},
}


def _invalid(text: str, reason: str) -> NoReturn:
    raise QuantityError(f"invalid quantity {_fmt.quote(text)}: {reason}")


def _suffix(text: str, suffix: str) -> tuple[Format, int, int]:
    """(format, base, exponent) of a suffix, like Go's ``quantitySuffixer.interpret``."""
    if suffix in _fmt.DECIMAL_SUFFIXES:
        return Format.DECIMAL_SI, 10, _fmt.DECIMAL_SUFFIXES[suffix]
    if suffix in _fmt.BINARY_SUFFIXES:
        return Format.BINARY_SI, 2, _fmt.BINARY_SUFFIXES[suffix]
    match = _EXPONENT_RE.fullmatch(suffix)
    if match is None:
        _invalid(text, f"unknown suffix {_fmt.quote(suffix)}")
    digits = match.group(2).lstrip("0") or "0"
    exponent = int(digits) if len(digits) <= 19 else 1 << 64
    if match.group(1) == "-":
        exponent = -exponent
    if not -(1 << 63) <= exponent < 1 << 63:  # Go: strconv.ParseInt(..., 64) fails
        _invalid(text, f"exponent out of range in suffix {_fmt.quote(suffix)}")
    # Go then keeps only int32(exponent): wrap exactly as it does.
    return Format.DECIMAL_EXPONENT, 10, (exponent + (1 << 31)) % (1 << 32) - (1 << 31)


def _parse(text: str) -> tuple[int, int, Format]:
    """Go's ``ParseQuantity`` as a normalized ``(m, e, format)``; raises ``QuantityError``.
    Memoised: the same few strings ("500m", "1Gi") recur across every pod and node."""
    if isinstance(text, str) and len(text) <= 64:
        return _parse_cached(text)
    return _parse_uncached(text)


@functools.lru_cache(maxsize=2048)
def _parse_cached(text: str) -> tuple[int, int, Format]:
    return _parse_uncached(text)


@functools.lru_cache(maxsize=2048)
def _parse_shared(text: str) -> Quantity:
    # Not through _parse_cached: a text missing here (a pod's memory in bytes, say) would miss there too.
    return Quantity._new(*_parse_uncached(text))


def _parse_uncached(text: str) -> tuple[int, int, Format]:
    if not isinstance(text, str):
        raise QuantityError(f"invalid quantity {text!r}: not a string")
    return _parse_canonical(text) or _parse_general(text)


def _parse_canonical(text: str) -> tuple[int, int, Format] | None:
    """The forms reporters write ("1234m", "8589934592", "512Mi"), read without the general parser's
    regular expressions: unsigned ASCII digits, at most 18 (below 2^63-1 on their own), then nothing or
    one suffix of Go's tables. None for any other text, which ``_parse_general`` reads; where both read a
    text they agree (tests/unit/apis/test_quantity_fast.py)."""
    last = text[-1:]
    if last.isdigit():
        digits, suffix = text, ""
    elif last == "i":
        digits, suffix = text[:-2], text[-2:]
    else:
        digits, suffix = text[:-1], last
    scaled = _CANONICAL_SUFFIXES.get(suffix)
    if scaled is None or not (0 < len(digits) <= _CANONICAL_DIGITS and digits.isascii() and digits.isdigit()):
        return None
    factor, e, fmt = scaled
    m = int(digits) * factor
    if m > _fmt.INT64_MAX:  # docs/upstream.md#quantity-limits
        return _fmt.INT64_MAX, 0, fmt
    if m % 10:
        return m, e, fmt
    return (*_fmt.normalize(m, e), fmt)


def _parse_general(text: str) -> tuple[int, int, Format]:
    """Every text ``ParseQuantity`` reads; ``text`` is a string."""
    if not text:
        _invalid(text, "empty string")
    match = _NUMBER_RE.fullmatch(text)
    assert match is not None  # every group may be empty
    sign, whole, fraction, suffix = match.group(1), match.group(2), match.group(3) or "", match.group(4)
    if not whole and not fraction:
        _invalid(text, "expected a number with at least one digit")
    fmt, base, exponent = _suffix(text, suffix)
    digits = (whole + fraction).lstrip("0")
    significant = digits.rstrip("0")
    if not significant:
        return 0, 0, fmt
    # The value is int(significant) * 10**e * 2**p; at least 10**(len(significant) - 1 + e).
    e = len(digits) - len(significant) - len(fraction) + (exponent if base == 10 else 0)
    p = exponent if base == 2 else 0
    nanos = _CAP_NANOS + 1 if len(significant) - 1 + e >= 19 else _fmt.parsed_nanos(significant, e, p)
    if nanos > _CAP_NANOS:  # docs/upstream.md#quantity-limits: every format is capped, not only BinarySI
        m, e = _fmt.INT64_MAX, 0
    else:
        m, e = _fmt.normalize(nanos, _fmt.NANO_EXP)
    if fmt is Format.BINARY_SI and _fmt.compare(m, e, 1, 0) < 0:  # 0 < |v| < 1 is DecimalSI
        fmt = Format.DECIMAL_SI
    return (-m if sign == "-" else m), e, fmt


class Quantity:
    """An immutable, hashable Kubernetes quantity: an exact decimal plus the format it prints in.

    Equality, hashing and ordering use the exact value only (Go ``Cmp``), never the format.
    ``Quantity("1.5Gi")`` is the same as ``Quantity.parse("1.5Gi")``.

    Deliberate differences from Go (all for inputs Go itself handles accidentally):
    text with no digit at all is rejected (Go reads ``"Gi"``, ``"."``, ``"+"`` as zero); ``value()`` and
    ``milli_value()`` saturate at ±(2^63-1) where Go's int64 overflows, and round negative values away
    from zero on every path (Go's big-decimal path truncates, then adds one: -0.5n gives +1);
    DecimalSI values above ``999E`` print as ``e<N>`` (current upstream) instead of a bare mantissa;
    parsing caps every format at 2^63-1, as Quantity's own documentation says, where Go caps only BinarySI
    and keeps ``"1e999999999"`` exact at a cost of seconds per sum (docs/upstream.md#quantity-limits).
    Sums may exceed the cap (as Go's ``Add``): they print exactly and parse back capped.
    """

    __slots__ = ("_e", "_format", "_m")
    _m: int  # the value is _m * 10**_e, _m without trailing zeros, _e >= -9
    _e: int
    _format: Format

    def __init__(self, text: str) -> None:
        m, e, fmt = _parse(text)
        self._set(m, e, fmt)

    def _set(self, m: int, e: int, fmt: Format) -> None:
        object.__setattr__(self, "_m", m)
        object.__setattr__(self, "_e", e)
        object.__setattr__(self, "_format", fmt)

    @classmethod
    def _new(cls, m: int, e: int, fmt: Format) -> Self:
        q = object.__new__(cls)
        # _set through the slots' own descriptors, a third cheaper: every parsed quantity passes here
        _SET_M(q, m)
        _SET_E(q, e)
        _SET_FORMAT(q, fmt)
        return q

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"Quantity is immutable (cannot set {name!r})")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"Quantity is immutable (cannot delete {name!r})")

    # --- constructors -------------------------------------------------------------------------
    @classmethod
    def parse(cls, s: str) -> Self:
        """Go ``ParseQuantity``: sign, digits with optional ``.``, then a suffix; no whitespace.
        Quantities are immutable, so a recurring string yields one shared instance."""
        if cls is Quantity and isinstance(s, str) and len(s) <= 64:
            return cast(Self, _parse_shared(s))
        return cls._new(*_parse(s))

    @classmethod
    def from_json(cls, v: object) -> Self:
        """Go ``UnmarshalJSON``: a string (space-trimmed), a JSON number read as a literal, or null (0)."""
        if type(v) is str and cls is Quantity:  # parse(), inlined: decoders call this per quantity
            text = v.strip(_GO_SPACE)
            return cast(Self, _parse_shared(text) if len(text) <= 64 else cls._new(*_parse(text)))
        if isinstance(v, cls):
            return v
        if v is None:
            return cls._new(0, 0, Format.DECIMAL_SI)
        if isinstance(v, str):
            return cls.parse(v.strip(_GO_SPACE))
        if isinstance(v, bool):
            raise QuantityError(f"invalid quantity {v!r}: a boolean is not a quantity")
        if isinstance(v, int):  # a JSON number is parsed as its text: capped like one
            return cls.from_int(max(-_fmt.INT64_MAX, min(v, _fmt.INT64_MAX)))
        if isinstance(v, float):
            return cls.parse(repr(v))  # "1.5", "1e-05", "1e+16": quantity literals; "nan"/"inf" fail
        raise QuantityError(f"invalid quantity {v!r}: expected a string, a number or null")

    @classmethod
    def from_milli(cls, milli: int, fmt: Format = Format.DECIMAL_SI) -> Self:
        """Go ``NewMilliQuantity(milli, fmt)``: the value ``milli / 1000``."""
        return cls._new(*_fmt.normalize(operator.index(milli), -3), fmt)

    @classmethod
    def from_int(cls, value: int, fmt: Format = Format.DECIMAL_SI) -> Self:
        """Go ``NewQuantity(value, fmt)``."""
        return cls._new(*_fmt.normalize(operator.index(value), 0), fmt)

    @classmethod
    def from_fraction(cls, value: Fraction, fmt: Format) -> Self:
        """An exact rational, rounded away from zero to nano like parsing (Go ``NewDecimalQuantity``)."""
        value = Fraction(value)
        magnitude = abs(value) * 10**9
        nanos = magnitude.numerator // magnitude.denominator
        if nanos * magnitude.denominator != magnitude.numerator:
            nanos += 1
        return cls._new(*_fmt.normalize(-nanos if value < 0 else nanos, _fmt.NANO_EXP), fmt)

    # --- accessors ----------------------------------------------------------------------------
    @property
    def format(self) -> Format:
        return self._format

    def value(self) -> int:
        """Go ``Value()``: the value rounded away from zero to an integer (saturating at ±(2^63-1))."""
        return _fmt.to_scale(self._m, self._e, 0)

    def milli_value(self) -> int:
        """Go ``MilliValue()``: value*1000 rounded away from zero (saturating at ±(2^63-1))."""
        return _fmt.to_scale(self._m, self._e, -3)

    def as_fraction(self) -> Fraction:
        """The exact value."""
        if self._e >= 0:
            return Fraction(self._m * _fmt.pow10(self._e))
        return Fraction(self._m, _fmt.pow10(-self._e))

    def __float__(self) -> float:
        if self._m != 0 and self._e + abs(self._m).bit_length() * 0.302 > 400:
            return float("inf") if self._m > 0 else float("-inf")
        return float(self.as_fraction())

    def is_zero(self) -> bool:
        return self._m == 0

    def sign(self) -> int:
        """Go ``Sign()``: -1, 0 or 1."""
        return (self._m > 0) - (self._m < 0)

    def cmp(self, other: Quantity) -> int:
        """Go ``Cmp``: -1, 0 or 1 by exact value."""
        return _fmt.compare(self._m, self._e, other._m, other._e)

    # --- text ---------------------------------------------------------------------------------
    def __str__(self) -> str:
        """Go ``Quantity.String()`` (``CanonicalizeBytes``)."""
        m, e = self._m, self._e
        if m == 0:
            return "0"
        if self._format is Format.BINARY_SI and e >= 0 and _fmt.compare(abs(m), e, 1024, 0) >= 0:
            return _fmt.canonical_binary(m * _fmt.pow10(e))
        # BinarySI with |v| < 1024 or a fractional part prints as DecimalSI, as in Go.
        return _fmt.canonical_decimal(m, e, self._format is Format.DECIMAL_EXPONENT)

    def to_json(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    # --- comparison and arithmetic ------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._m == other._m and self._e == other._e

    def __hash__(self) -> int:
        return hash((self._m, self._e))

    def __lt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.cmp(other) < 0

    def __le__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.cmp(other) <= 0

    def __gt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.cmp(other) > 0

    def __ge__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.cmp(other) >= 0

    def __add__(self, other: Quantity) -> Quantity:
        """Go ``Add``: exact; keeps the left format, or takes the right one when the left is zero."""
        if not isinstance(other, Quantity):
            return NotImplemented
        fmt = other._format if self._m == 0 else self._format
        return Quantity._new(*_fmt.add(self._m, self._e, other._m, other._e), fmt)

    def __sub__(self, other: Quantity) -> Quantity:
        """Go ``Sub``: exact; format as for ``+``."""
        if not isinstance(other, Quantity):
            return NotImplemented
        fmt = other._format if self._m == 0 else self._format
        return Quantity._new(*_fmt.add(self._m, self._e, -other._m, other._e), fmt)

    def __neg__(self) -> Quantity:
        return Quantity._new(-self._m, self._e, self._format)

    # --- copying and pickling (immutable) -----------------------------------------------------
    def __copy__(self) -> Self:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (self._m, self._e, self._format.value))


_SET_M: Final = Quantity.__dict__["_m"].__set__
_SET_E: Final = Quantity.__dict__["_e"].__set__
_SET_FORMAT: Final = Quantity.__dict__["_format"].__set__


def _restore(m: int, e: int, fmt: str) -> Quantity:
    return Quantity._new(m, e, Format(fmt))


def parse_resource_list(d: Mapping[str, object]) -> dict[str, Quantity]:
    """A Kubernetes ``ResourceList`` from decoded JSON; errors name the resource and its value."""
    if not isinstance(d, Mapping):
        raise QuantityError(f"invalid resource list {d!r}: expected an object")
    result: dict[str, Quantity] = {}
    for name, raw in d.items():
        try:
            result[str(name)] = Quantity.from_json(raw)
        except QuantityError as err:
            raise QuantityError(f"resource {_fmt.quote(str(name))}: {err}") from None
    return result


def format_resource_list(d: Mapping[str, Quantity]) -> dict[str, str]:
    """A ``ResourceList`` as JSON-ready canonical strings."""
    return {name: str(q) for name, q in d.items()}
