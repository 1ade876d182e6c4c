"""Value kinds of the Go-JSON codec (``apis.gojson``): how one Go type decodes, encodes, validates.

A ``Kind`` decodes raw JSON *into an existing value* like Go's ``encoding/json`` (pointer fields: null
→ ``None``; non-pointer fields: null has no effect; ints must be integer literals within int64/int32;
lists take the new length and decode element i into the old element i; maps gain keys and replace each
value whole; ``interface{}`` values are replaced), encodes with ``omitempty`` and describes itself in
OpenAPI v3. Unset Go pointers are ``None``; an empty list, map or non-pointer string is normalised to
``None`` because Go writes none of them, unless the kind is built ``nullable=False`` (the Python value
is then always a list/dict). Also: enum strings, RFC 3339 times (``metav1.Time``), free-form objects.
Errors are collected as ``FieldError`` with a JSON path. The ``Kind`` interface and the errors are
``apis.gojson_base``'s; the slice and map kinds are ``apis.gojson_collections``'s.
Imports: the standard library, ``apis.duration``, ``apis.gojson_base``, ``apis.labelselector``,
``apis.quantity``, ``apis.rfc3339``. Pure, no I/O.
"""

from __future__ import annotations

import copy
import enum
import math
from collections.abc import Mapping
from typing import Any, Final

from apis.duration import Duration, DurationError
from apis.gojson_base import FieldError, Kind, join_path
from apis.labelselector import LabelSelector, LabelSelectorError
from apis.quantity import Quantity, QuantityError
from apis.rfc3339 import format_rfc3339, parse_rfc3339

_INT_RANGES: Final = {64: (-(1 << 63), (1 << 63) - 1), 32: (-(1 << 31), (1 << 31) - 1)}
_NUMBER: Final = r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
QUANTITY_PATTERN: Final = rf"^(\+|-)?{_NUMBER}(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?{_NUMBER}))?$"


class BoolKind(Kind):
    def __init__(self, pointer: bool = True) -> None:
        self.pointer = pointer

    def zero(self) -> Any:
        return None if self.pointer else False

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if raw is None:
            return None if self.pointer else old
        if not isinstance(raw, bool):
            errs.append(FieldError(path, raw, "must be a boolean"))
            return old
        return raw

    def openapi(self) -> dict[str, Any]:
        return {"type": "boolean"}


class IntKind(Kind):
    """``*int64``/``*int32``; ``pointer=False``: a plain int without ``omitempty`` (0, always written)."""

    def __init__(self, bits: int = 64, pointer: bool = True) -> None:
        self.bits = bits
        self.pointer = pointer

    def zero(self) -> Any:
        return None if self.pointer else 0

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if raw is None:
            return None if self.pointer else old
        if isinstance(raw, bool) or not isinstance(raw, int):
            errs.append(
                FieldError(path, raw, f"must be an integer (int{self.bits}), not {type(raw).__name__}")
            )
            return old
        low, high = _INT_RANGES[self.bits]
        if not low <= raw <= high:
            errs.append(FieldError(path, raw, f"is out of the int{self.bits} range"))
            return old
        return raw

    def openapi(self) -> dict[str, Any]:
        return {"type": "integer", "format": f"int{self.bits}"}


class FloatKind(Kind):
    def __init__(self, pointer: bool = True) -> None:
        self.pointer = pointer

    def zero(self) -> Any:
        return None if self.pointer else 0.0

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if raw is None:
            return None if self.pointer else old
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            errs.append(FieldError(path, raw, "must be a number (float64)"))
            return old
        try:
            value = float(raw)
        except OverflowError:
            value = math.inf
        if not math.isfinite(value):
            errs.append(FieldError(path, raw, "is out of the float64 range"))
            return old
        return value

    def encode(self, value: Any) -> Any:
        """Go writes integral floats without a fraction (``1``, not ``1.0``)."""
        if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
            return int(value)
        return value

    def openapi(self) -> dict[str, Any]:
        return {"type": "number"}


class StrKind(Kind):
    """A string; non-pointer strings are ``None`` when empty (``omitempty`` drops them), or ``""`` when
    built ``nullable=False``."""

    def __init__(self, pointer: bool = False, nullable: bool = True) -> None:
        self.pointer = pointer
        self.nullable = nullable or pointer

    def zero(self) -> Any:
        return None if self.nullable else ""

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if raw is None:
            return None if self.pointer else old
        if not isinstance(raw, str):
            errs.append(FieldError(path, raw, "must be a string"))
            return old
        return raw if (raw or self.pointer) else self.zero()

    def omit(self, value: Any) -> bool:
        return value is None or (not self.pointer and value == "")

    def openapi(self) -> dict[str, Any]:
        return {"type": "string"}


class QuantityKind(Kind):
    """``resource.Quantity`` value (not a pointer): always written, ``"0"`` when unset, null → 0."""

    pointer = False

    def zero(self) -> Any:
        return Quantity.parse("0")

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        try:
            return Quantity.from_json(raw)
        except (QuantityError, TypeError, ValueError) as exc:
            errs.append(FieldError(path, raw, f"is not a quantity: {exc}"))
            return old

    def encode(self, value: Any) -> Any:
        return str(value)

    def omit(self, value: Any) -> bool:
        return False

    def openapi(self) -> dict[str, Any]:
        return {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True,
        }


class IntOrStrKind(Kind):
    """``*intstr.IntOrString``: a JSON int32 or a string."""

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if raw is None or isinstance(raw, str):
            return raw
        return IntKind(32).decode(old, raw, path, errs)

    def openapi(self) -> dict[str, Any]:
        return {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}


class DurationKind(Kind):
    """``metav1.Duration``: a Go duration string; null is rejected like Go unless ``null_ok`` (then it
    has no effect). The zero value is ``0s``."""

    pointer = False

    def __init__(self, null_ok: bool = False) -> None:
        self.null_ok = null_ok

    def zero(self) -> Any:
        return Duration(0)

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if raw is None and self.null_ok:
            return old
        try:
            return Duration.parse(raw if raw is not None else "")
        except DurationError as exc:
            errs.append(FieldError(path, raw, str(exc)))
            return old

    def encode(self, value: Any) -> Any:
        return str(value)

    def openapi(self) -> dict[str, Any]:
        return {"type": "string"}


class AnyKind(Kind):
    """``interface{}``: any JSON value, replaced whole."""

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        return copy.deepcopy(raw)

    def encode(self, value: Any) -> Any:
        return copy.deepcopy(value)

    def openapi(self) -> dict[str, Any]:
        return {"x-kubernetes-preserve-unknown-fields": True}


class EnumKind(Kind):
    """A string restricted to a StrEnum's values (decoded to the member) or to a tuple of strings.
    Non-pointer: omitted when ``""`` (the zero value: the ``""`` member if the enum has one)."""

    def __init__(self, values: type[enum.StrEnum] | tuple[str, ...], pointer: bool = False) -> None:
        self.cls = None if isinstance(values, tuple) else values
        self.values = values if isinstance(values, tuple) else tuple(m.value for m in values)
        self.pointer = pointer

    def zero(self) -> Any:
        return None if self.pointer else ("" if self.cls is None or "" not in self.values else self.cls(""))

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if raw is None:
            return None if self.pointer else old
        if not isinstance(raw, str) or raw not in self.values:
            errs.append(FieldError(path, raw, f"must be one of {list(self.values)}"))
            return old
        return raw if self.cls is None else self.cls(raw)

    def encode(self, value: Any) -> Any:
        return str(value)

    def omit(self, value: Any) -> bool:
        return value is None or (not self.pointer and value == "")

    def openapi(self) -> dict[str, Any]:
        return {"type": "string", "enum": list(self.values)}


class TimeKind(Kind):
    """``*metav1.Time``: an RFC 3339 string (any offset, any fraction) as an aware UTC ``datetime``;
    written in UTC at second precision."""

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if raw is None:
            return None
        try:
            return parse_rfc3339(raw)
        except ValueError as exc:
            errs.append(FieldError(path, raw, str(exc)))
            return old

    def encode(self, value: Any) -> Any:
        return format_rfc3339(value)

    def openapi(self) -> dict[str, Any]:
        return {"type": "string", "format": "date-time"}


class ObjectKind(Kind):
    """A free-form JSON object (``map[string]interface{}`` / raw object), replaced whole and deep-copied.
    Non-pointer: ``{}`` when unset and always written."""

    def __init__(self, pointer: bool = True) -> None:
        self.pointer = pointer

    def zero(self) -> Any:
        return None if self.pointer else {}

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if raw is None:
            return None if self.pointer else old
        if not isinstance(raw, Mapping):
            errs.append(FieldError(path, raw, "must be an object"))
            return old
        return copy.deepcopy(dict(raw))

    def encode(self, value: Any) -> Any:
        return copy.deepcopy(value)

    def openapi(self) -> dict[str, Any]:
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


class SelectorKind(Kind):
    """``*metav1.LabelSelector``. A selector that decodes but does not validate becomes ``None``
    (it can never match, as upstream skips it) and yields a non-fatal error."""

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if raw is None:
            return None
        try:
            return LabelSelector.from_dict(raw)
        except LabelSelectorError as exc:
            errs.append(FieldError(join_path(path, exc.field), exc.value, exc.message, fatal=exc.type_error))
            return old if exc.type_error else None

    def encode(self, value: Any) -> Any:
        return value.to_dict()

    def openapi(self) -> dict[str, Any]:
        string: dict[str, Any] = {"type": "string"}
        req = {
            "type": "object",
            "properties": {"key": string, "operator": string, "values": {"type": "array", "items": string}},
        }
        return {
            "type": "object",
            "properties": {
                "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
                "matchExpressions": {"type": "array", "items": req},
            },
        }


class ExtensionsKind(ObjectKind):
    """NodeSLO ``*ExtensionsMap``: Go writes ``{"Object": {...}}``; a plain object is accepted too."""

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if raw is None:
            return None
        if not isinstance(raw, Mapping):
            errs.append(FieldError(path, raw, "must be an object"))
            return old
        inner: Any = raw
        wrapped = [k for k in raw if isinstance(k, str) and k.lower() == "object"]
        if wrapped:
            inner = raw["Object"] if "Object" in raw else raw[wrapped[0]]
            if inner is None:
                inner = {}
            if not isinstance(inner, Mapping):
                errs.append(FieldError(join_path(path, "Object"), inner, "must be an object"))
                return old
        out = dict(old or {})
        out.update(copy.deepcopy(dict(inner)))
        return out

    def encode(self, value: Any) -> Any:
        return {"Object": copy.deepcopy(value)}
