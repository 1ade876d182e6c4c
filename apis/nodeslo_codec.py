"""Go ``encoding/json`` semantics over typed dataclasses: the codec behind NodeSLO and slo-controller-config.

Each dataclass field carries a ``FieldSpec`` (JSON name, value ``Kind`` from ``apis.nodeslo_kinds``,
optional bounds/enum). From it: ``decode_into`` reproduces Go's decode-into-an-existing-value rules with
case-insensitive keys and ignored unknown keys, ``encode`` reproduces ``omitempty`` marshalling,
``overlay`` is upstream's ``MergeCfg`` (marshal new, unmarshal onto a copy of old), ``validate`` checks
the declared bounds and ``struct_openapi`` derives a structural OpenAPI v3 schema.
Imports: the standard library and ``apis.nodeslo_kinds``. Pure, no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final, TypeVar

from apis.nodeslo_kinds import (
    AnyKind,
    BoolKind,
    DecodeError,
    DurationKind,
    ExtensionsKind,
    FieldError,
    FloatKind,
    IntKind,
    IntOrStrKind,
    Kind,
    ListKind,
    MapKind,
    QuantityKind,
    SelectorKind,
    StrKind,
    join_path,
)

__all__ = [
    "AnyKind",
    "BoolKind",
    "DecodeError",
    "DurationKind",
    "ExtensionsKind",
    "FieldError",
    "FieldSpec",
    "FloatKind",
    "GoStruct",
    "IntKind",
    "IntOrStrKind",
    "Kind",
    "ListKind",
    "MapKind",
    "QuantityKind",
    "SelectorKind",
    "StrKind",
    "StructKind",
    "decode_into",
    "encode",
    "inline",
    "jf",
    "overlay",
    "struct_openapi",
    "validate",
]

SPEC_KEY: Final = "koord.gojson"
T = TypeVar("T")


class StructKind(Kind):
    """A Go struct (``pointer``: ``*T``, omitted when nil; else always written, null has no effect)."""

    def __init__(self, cls: type[Any], pointer: bool = True) -> None:
        self.cls = cls
        self.pointer = pointer

    def zero(self) -> Any:
        return None if self.pointer else self.cls()

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if raw is None:
            return None if self.pointer else old
        if not isinstance(raw, Mapping):
            errs.append(FieldError(path, raw, "must be an object"))
            return old
        return _decode_struct(self.cls, old if old is not None else self.cls(), raw, path, errs)

    def encode(self, value: Any) -> Any:
        return encode(value)

    def validate(self, value: Any, path: str, errs: list[FieldError]) -> None:
        errs.extend(validate(value, path))

    def openapi(self) -> dict[str, Any]:
        return struct_openapi(self.cls)


@dataclasses.dataclass(frozen=True)
class FieldSpec:
    """JSON name and kind of a field, plus optional bounds checked by ``validate``.

    ``inline`` embeds a struct's fields at the parent's level (Go's embedded struct).
    """

    name: str
    kind: Kind
    inline: bool = False
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    enum: tuple[str, ...] | None = None
    check: Callable[[Any], str | None] | None = None


def jf(name: str, kind: Kind, **options: Any) -> Any:
    """A dataclass field described by a ``FieldSpec``; defaults to the kind's zero value."""
    spec = FieldSpec(name, kind, **options)
    zero = kind.zero()
    if zero is None or isinstance(zero, (bool, float, str)):
        return dataclasses.field(default=zero, metadata={SPEC_KEY: spec})
    return dataclasses.field(default_factory=kind.zero, metadata={SPEC_KEY: spec})


def inline(cls: type[Any], pointer: bool = True) -> Any:
    """An embedded struct whose JSON fields sit at the parent's level."""
    return jf("", StructKind(cls, pointer), inline=True)


class GoStruct:
    """Mixin for the typed dataclasses: ``to_dict`` / ``from_dict`` with Go JSON semantics.

    ``_GREATER`` lists (field, other) JSON-name pairs that must satisfy field > other when both are set.
    """

    _GREATER: ClassVar[tuple[tuple[str, str], ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        """Go ``json.Marshal`` output (``omitempty`` applied)."""
        return encode(self)

    @classmethod
    def from_dict(cls: type[T], data: Any) -> T:
        """Decode a JSON object; raises DecodeError listing every type error (paths and values)."""
        errs: list[FieldError] = []
        obj = StructKind(cls).decode(cls(), data if data is not None else {}, "", errs)
        fatal = [e for e in errs if e.fatal]
        if fatal:
            raise DecodeError(fatal)
        return obj  # type: ignore[no-any-return]


_Table = tuple[list[tuple[str, "FieldSpec"]], dict[str, str], dict[str, str]]
_TABLES: dict[type[Any], _Table] = {}


def _table(cls: type[Any]) -> _Table:
    """(attr, spec) pairs plus exact and case-folded JSON-name → attr maps (inline fields expanded)."""
    cached = _TABLES.get(cls)
    if cached is not None:
        return cached
    specs = [(f.name, f.metadata[SPEC_KEY]) for f in dataclasses.fields(cls) if SPEC_KEY in f.metadata]
    exact: dict[str, str] = {}
    folded: dict[str, str] = {}
    for attr, spec in specs:
        names = [spec.name]
        if spec.inline:
            assert isinstance(spec.kind, StructKind)
            inner = _table(spec.kind.cls)
            names = list(inner[1])
        for name in names:
            exact.setdefault(name, attr)
            folded.setdefault(name.lower(), attr)
    _TABLES[cls] = (specs, exact, folded)
    return specs, exact, folded


def _decode_struct(
    cls: type[Any], base: Any, raw: Mapping[str, Any], path: str, errs: list[FieldError]
) -> Any:
    specs, exact, folded = _table(cls)
    by_attr = dict(specs)
    values = {attr: getattr(base, attr) for attr, _ in specs}
    for key, item in raw.items():
        if not isinstance(key, str):
            continue
        attr = exact.get(key) or folded.get(key.lower())
        if attr is None:
            continue  # unknown keys are ignored, as in Go
        spec = by_attr[attr]
        if spec.inline:
            kind = spec.kind
            assert isinstance(kind, StructKind)
            current = values[attr] if values[attr] is not None else kind.cls()
            values[attr] = _decode_struct(kind.cls, current, {key: item}, path, errs)
        else:
            values[attr] = spec.kind.decode(values[attr], item, join_path(path, spec.name), errs)
    return dataclasses.replace(base, **values)


def encode(obj: Any) -> dict[str, Any]:
    """Marshal a typed dataclass to a JSON-ready dict (Go ``omitempty`` rules)."""
    out: dict[str, Any] = {}
    for attr, spec in _table(type(obj))[0]:
        value = getattr(obj, attr)
        if spec.inline:
            if value is not None:
                out.update(encode(value))
        elif not spec.kind.omit(value):
            out[spec.name] = spec.kind.encode(value)
    return out


def decode_into(old: T, raw: Any, path: str = "") -> tuple[T, list[FieldError]]:
    """Go ``json.Unmarshal(raw, &old)`` on a copy of ``old``: the result and every error met."""
    errs: list[FieldError] = []
    result = StructKind(type(old)).decode(old, raw, path, errs)
    return result, errs


def overlay(old: T, new: T | None) -> T:
    """Upstream ``MergeCfg(old, new)``: marshal ``new`` (dropping unset/empty fields) onto ``old``."""
    if new is None:
        return old
    base = old if old is not None else type(new)()
    result, _ = decode_into(base, encode(new))
    return result


def validate(obj: Any, path: str = "") -> list[FieldError]:
    """Bounds/enum/check violations of every set field, recursively, with JSON paths."""
    errs: list[FieldError] = []
    for attr, spec in _table(type(obj))[0]:
        value = getattr(obj, attr)
        if value is None:
            continue
        if spec.inline:
            errs.extend(validate(value, path))
            continue
        where = join_path(path, spec.name)
        message = _check_scalar(spec, value)
        if message:
            shown = value if isinstance(value, (bool, int, float, str)) else spec.kind.encode(value)
            errs.append(FieldError(where, shown, message))
        spec.kind.validate(value, where, errs)
    rules: tuple[tuple[str, str], ...] = getattr(type(obj), "_GREATER", ())
    values = encode(obj)
    for upper, lower in rules:
        if upper in values and lower in values and not values[upper] > values[lower]:
            errs.append(
                FieldError(
                    join_path(path, upper), values[upper], f"must be greater than {lower}={values[lower]}"
                )
            )
    return errs


def _check_scalar(spec: FieldSpec, value: Any) -> str | None:
    if spec.enum is not None and value not in spec.enum:
        return f"must be one of {', '.join(spec.enum)}"
    if spec.check is not None:
        return spec.check(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if spec.minimum is not None and value < spec.minimum:
        return f"must be >= {spec.minimum:g}"
    if spec.maximum is not None and value > spec.maximum:
        return f"must be <= {spec.maximum:g}"
    if spec.exclusive_minimum is not None and value <= spec.exclusive_minimum:
        return f"must be > {spec.exclusive_minimum:g}"
    return None


def struct_openapi(cls: type[Any]) -> dict[str, Any]:
    """Structural OpenAPI v3 schema of a typed dataclass (inline fields expanded, enums included)."""
    props: dict[str, Any] = {}
    for _, spec in _table(cls)[0]:
        if spec.inline:
            assert isinstance(spec.kind, StructKind)
            props.update(struct_openapi(spec.kind.cls).get("properties", {}))
            continue
        schema = spec.kind.openapi()
        if spec.enum is not None:
            schema["enum"] = list(spec.enum)
        props[spec.name] = schema
    out: dict[str, Any] = {"type": "object"}
    if props:
        out["properties"] = props
    return out
