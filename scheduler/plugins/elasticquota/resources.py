"""The quota core's resource lists: one exact integer per resource name in the core's units (cpu in
milli-cores, every other resource in whole units, both rounded away from zero; Python integers, so sums and
products never overflow) and their Go helpers: Add, Subtract, Mask, LessThanOrEqual and the reason
strings' ``printResourceList`` (docs/rules/scheduler-elasticquota.md#units).
Imports: the standard library and apis (quantity). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Final

from apis.quantity import Format, Quantity

CPU: Final = "cpu"
MEMORY: Final = "memory"
Res = dict[str, int]


def _away_from_zero(value: Fraction) -> int:
    magnitude = abs(value)
    whole = magnitude.numerator // magnitude.denominator
    if whole * magnitude.denominator != magnitude.numerator:
        whole += 1
    return -whole if value < 0 else whole


def to_int(name: str, q: Quantity) -> int:
    """``MilliValue()`` for cpu, ``Value()`` otherwise, without Go's int64 saturation."""
    value = q.as_fraction()
    return _away_from_zero(value * 1000 if name == CPU else value)


def of_quantities(d: Mapping[str, Quantity]) -> Res:
    return {name: to_int(name, q) for name, q in d.items()}


def to_quantity(name: str, value: int) -> Quantity:
    """``createQuantity``: cpu as milli DecimalSI, memory BinarySI, others DecimalSI."""
    if name == CPU:
        return Quantity.from_milli(value)
    return Quantity.from_int(value, Format.BINARY_SI if name == MEMORY else Format.DECIMAL_SI)


def whole_value(name: str, value: int) -> int:
    """Go ``Quantity.Value()`` of a core amount: cpu milli-cores rounded away from zero to cores."""
    return _away_from_zero(Fraction(value, 1000)) if name == CPU else value


def add(a: Mapping[str, int], b: Mapping[str, int]) -> Res:
    out = dict(a)
    for name, v in b.items():
        out[name] = out.get(name, 0) + v
    return out


def subtract(a: Mapping[str, int], b: Mapping[str, int]) -> Res:
    """``quotav1.Subtract``: every name of either list; a name only in ``b`` becomes negative."""
    out = dict(a)
    for name, v in b.items():
        out[name] = out.get(name, 0) - v
    return out


def clamp_non_negative(a: Mapping[str, int]) -> Res:
    return {name: max(v, 0) for name, v in a.items()}


def mask(a: Mapping[str, int], names: Iterable[str]) -> Res:
    keep = set(names)
    return {name: v for name, v in a.items() if name in keep}


def limited(request: Mapping[str, int], max_: Mapping[str, int]) -> Res:
    """``min(request, max)`` for every name of ``request``; a name missing from ``max`` is not limited."""
    return {name: min(v, max_[name]) if name in max_ else v for name, v in request.items()}


def less_than_or_equal(a: Mapping[str, int], b: Mapping[str, int]) -> tuple[bool, list[str]]:
    """``quotav1.LessThanOrEqual``: over the names of ``b``, those present in ``a`` with a larger value
    fail. The failing names come back sorted (docs/rules/scheduler-elasticquota.md#koord-decisions)."""
    exceeded = sorted(name for name, limit in b.items() if name in a and a[name] > limit)
    return not exceeded, exceeded


def print_resource_list(d: Mapping[str, int | Quantity]) -> str:
    """``printResourceList``: ``<empty>``, or ``name:quantity`` items sorted as strings, joined by ``,``.
    A core amount prints as the quantity upstream creates for it; a Quantity (a spec's min or max, a
    pod's request) prints as itself."""
    if not d:
        return "<empty>"
    items = (f"{n}:{v if isinstance(v, Quantity) else to_quantity(n, v)}" for n, v in d.items())
    return ",".join(sorted(items))


def go_list(items: Iterable[str]) -> str:
    """A Go ``%v`` of a string slice: ``[a b c]``."""
    return "[" + " ".join(items) + "]"


def to_json(d: Mapping[str, int]) -> dict[str, str]:
    """A core list as a Kubernetes ResourceList of canonical quantity strings (status annotations)."""
    return {name: str(to_quantity(name, v)) for name, v in sorted(d.items())}
