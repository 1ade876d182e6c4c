"""Value kinds of the Go-JSON codec (``apis.nodeslo_codec``): how one Go type decodes, encodes, validates.

A ``Kind`` decodes raw JSON *into an existing value* like Go's ``encoding/json`` (pointer fields: null
→ ``None``; non-pointer fields: null has no effect; ints must be integer literals within int64/int32;
lists take the new length and decode element i into the old element i; maps gain keys and replace each
value whole; ``interface{}`` values are replaced), encodes with ``omitempty`` and describes itself in
OpenAPI v3. Unset Go pointers are ``None``; an empty list, map or non-pointer string is normalised to
``None`` because Go writes none of them. Errors are collected as ``FieldError`` with a JSON path.
Imports: the standard library, ``apis.duration``, ``apis.labelselector``, ``apis.quantity``. Pure, no I/O.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any, Final

from apis.duration import Duration, DurationError
from apis.labelselector import LabelSelector, LabelSelectorError
from apis.quantity import Quantity, QuantityError

_INT_RANGES: Final = {64: (-(1 << 63), (1 << 63) - 1), 32: (-(1 << 31), (1 << 31) - 1)}


class FieldError(ValueError):
    """One bad value at a JSON path. ``fatal=False`` marks a problem that only disables a node entry."""

    def __init__(self, path: str, value: Any, message: str, *, fatal: bool = True) -> None:
        self.path = path
        self.value = value
        self.message = message
        self.fatal = fatal
        super().__init__(f"field {path or '(document)'}={_short(value)}: {message}")


class DecodeError(ValueError):
    """All errors found while decoding one document."""

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def join_path(path: str, name: str) -> str:
    """``a.b`` JSON path join (inline fields and the document root add no segment)."""
    return f"{path}.{name}" if path and name else path or name


class Kind:
    """How one Go type decodes, encodes, validates and is described in OpenAPI."""

    pointer: bool = True

    def zero(self) -> Any:
        return None

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        raise NotImplementedError

    def encode(self, value: Any) -> Any:
        return value

    def omit(self, value: Any) -> bool:
        return value is None

    def validate(self, value: Any, path: str, errs: list[FieldError]) -> None:
        """Recurse into nested values (scalars have nothing to check here)."""

    def openapi(self) -> dict[str, Any]:
        raise NotImplementedError


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
    def __init__(self, bits: int = 64) -> None:
        self.bits = bits

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if raw is None:
            return None
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
    """A string; non-pointer strings are ``None`` when empty (``omitempty`` drops them)."""

    def __init__(self, pointer: bool = False) -> None:
        self.pointer = pointer

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if raw is None:
            return None if self.pointer else old
        if not isinstance(raw, str):
            errs.append(FieldError(path, raw, "must be a string"))
            return old
        return raw if (raw or self.pointer) else None

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
        return {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}


class IntOrStrKind(Kind):
    """``*intstr.IntOrString``: a JSON int32 or a string."""

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if raw is None or isinstance(raw, str):
            return raw
        return IntKind(32).decode(old, raw, path, errs)

    def openapi(self) -> dict[str, Any]:
        return {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}


class DurationKind(Kind):
    """``metav1.Duration`` (a list element here): a Go duration string; null is rejected like Go."""

    pointer = False

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
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


class ListKind(Kind):
    """A slice: takes the new length, element i decoded into the old element i."""

    def __init__(self, elem: Kind) -> None:
        self.elem = elem

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if raw is None:
            return None
        if not isinstance(raw, list):
            errs.append(FieldError(path, raw, "must be a list"))
            return old
        previous = old or []
        out = []
        for i, item in enumerate(raw):
            prev = previous[i] if i < len(previous) else self.elem.zero()
            out.append(self.elem.decode(prev, item, f"{path}[{i}]", errs))
        return out or None

    def encode(self, value: Any) -> Any:
        return [None if v is None else self.elem.encode(v) for v in value]

    def omit(self, value: Any) -> bool:
        return not value

    def validate(self, value: Any, path: str, errs: list[FieldError]) -> None:
        for i, item in enumerate(value or []):
            if item is None:  # a null element of a []*T list: the CRD schema has no nullable items
                errs.append(FieldError(f"{path}[{i}]", None, "must not be null"))
            else:
                self.elem.validate(item, f"{path}[{i}]", errs)

    def openapi(self) -> dict[str, Any]:
        return {"type": "array", "items": self.elem.openapi()}


class MapKind(Kind):
    """A map with string keys: keys gained/overwritten, each new value replaces the old one whole."""

    def __init__(self, elem: Kind) -> None:
        self.elem = elem

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if raw is None:
            return None
        if not isinstance(raw, Mapping):
            errs.append(FieldError(path, raw, "must be an object"))
            return old
        out = dict(old or {})
        for key, item in raw.items():
            out[key] = self.elem.decode(self.elem.zero(), item, f"{path}[{key}]", errs)
        return out or None

    def encode(self, value: Any) -> Any:
        return {k: None if v is None else self.elem.encode(v) for k, v in value.items()}

    def omit(self, value: Any) -> bool:
        return not value

    def validate(self, value: Any, path: str, errs: list[FieldError]) -> None:
        for key, item in (value or {}).items():
            if item is not None:
                self.elem.validate(item, f"{path}[{key}]", errs)

    def openapi(self) -> dict[str, Any]:
        return {"type": "object", "additionalProperties": self.elem.openapi()}


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


class ExtensionsKind(Kind):
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

    def openapi(self) -> dict[str, Any]:
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
