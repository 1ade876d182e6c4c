"""Go ``encoding/json`` semantics over typed dataclasses: the codec behind NodeSLO, slo-controller-config
and NodeMetric.

Each dataclass field carries a ``FieldSpec`` (JSON name, value ``Kind``, optional bounds/enum). The
scalar kinds live in ``apis.gojson_kinds``, the slice and map kinds (``ListKind``, ``MapKind``) in
``apis.gojson_collections``; the struct kind (``StructKind``) lives here. From the specs:
``decode_into`` reproduces Go's decode-into-an-existing-value rules with case-insensitive keys and
ignored unknown keys, ``encode`` reproduces ``omitempty`` marshalling, ``overlay`` is upstream's
``MergeCfg`` (marshal new, unmarshal onto a copy of old), ``validate`` checks the declared bounds and
``struct_openapi`` derives a structural OpenAPI v3 schema.
Imports: the standard library, ``apis.gojson_base`` and ``apis.gojson_collections``. Pure, no I/O.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final, TypeVar

from apis.gojson_base import DecodeError, FieldError, Kind, join_path

__all__ = [
    "SPEC_KEY",
    "FieldSpec",
    "GoStruct",
    "StructKind",
    "decode_into",
    "encode",
    "go_zero",
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
        return None if self.pointer else go_zero(self.cls)

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if raw is None:
            return None if self.pointer else old
        if not isinstance(raw, Mapping):
            errs.append(FieldError(path, raw, "must be an object"))
            return old
        return _decode_struct(self.cls, old if old is not None else go_zero(self.cls), raw, path, errs)

    def encode(self, value: Any) -> Any:
        return encode(value)

    def validate(self, value: Any, path: str, errs: list[FieldError]) -> None:
        errs.extend(validate(value, path))

    def openapi(self) -> dict[str, Any]:
        return struct_openapi(self.cls)


@dataclasses.dataclass(frozen=True)
class FieldSpec:
    """JSON name and kind of a field, plus optional bounds checked by ``validate``.

    ``inline`` embeds a struct's fields at the parent's level (Go's embedded struct); ``required`` lists
    the field under the CRD schema's ``required``. ``minimum``/``maximum``/``exclusive_minimum``/``enum``/
    ``check`` are the webhook rules ``validate`` applies; ``crd_minimum``/``crd_maximum``/``crd_default``
    are what the CRD schema declares (upstream's kubebuilder markers, which may be looser than the
    webhook rules or absent), so the API server checks exactly what upstream's does.
    """

    name: str
    kind: Kind
    inline: bool = False
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    enum: tuple[str, ...] | None = None
    check: Callable[[Any], str | None] | None = None
    required: bool = False
    crd_minimum: float | None = None
    crd_maximum: float | None = None
    crd_default: Any = None


def jf(name: str, kind: Kind, *, default_factory: Callable[[], Any] | None = None, **options: Any) -> Any:
    """A dataclass field described by a ``FieldSpec``; defaults to the kind's zero value (or to
    ``default_factory()``: decoding still starts from the zero value, see ``go_zero``)."""
    spec = FieldSpec(name, kind, **options)
    meta = {SPEC_KEY: spec}
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    zero = kind.zero()
    if zero is None or isinstance(zero, (bool, float, str, enum.Enum)):
        return dataclasses.field(default=zero, metadata=meta)
    return dataclasses.field(default_factory=kind.zero, metadata=meta)


def inline(cls: type[Any], pointer: bool = True) -> Any:
    """An embedded struct whose JSON fields sit at the parent's level."""
    return jf("", StructKind(cls, pointer), inline=True)


class GoStruct:
    """Mixin for the typed dataclasses: ``to_dict`` / ``from_dict`` with Go JSON semantics.

    ``_GREATER`` lists (field, other) JSON-name pairs that must satisfy field > other when both are set;
    ``_JSON_ORDER`` lists JSON names written first (Go's field order when it differs from the
    dataclass's constructor order).
    """

    __slots__ = ()
    _GREATER: ClassVar[tuple[tuple[str, str], ...]] = ()
    _JSON_ORDER: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        """Go ``json.Marshal`` output (``omitempty`` applied)."""
        return encode(self)

    @classmethod
    def from_dict(cls: type[T], data: Any, path: str = "") -> T:
        """Decode a JSON object (``path``: where it sits, prefixing error paths) into the Go zero value;
        raises DecodeError listing every type error (paths and values)."""
        errs: list[FieldError] = []
        obj = StructKind(cls).decode(go_zero(cls), data if data is not None else {}, path, errs)
        fatal = [e for e in errs if e.fatal]
        if fatal:
            raise DecodeError(fatal)
        return obj  # type: ignore[no-any-return]


_Table = tuple[list[tuple[str, "FieldSpec"]], dict[str, str], dict[str, str]]
_TABLES: dict[type[Any], _Table] = {}


@dataclasses.dataclass(frozen=True, slots=True)
class _Shape:
    """Per class, what decoding needs besides the table: the field specs by attribute, the init fields
    no spec covers (copied from the base as ``dataclasses.replace`` would), and the pointer-kind
    attributes whose default is not None (nil in Go's zero value)."""

    by_attr: dict[str, FieldSpec]
    others: tuple[str, ...]
    nils: tuple[str, ...]


_SHAPES: dict[type[Any], _Shape] = {}


def _table(cls: type[Any]) -> _Table:
    """(attr, spec) pairs plus exact and case-folded JSON-name → attr maps (inline fields expanded)."""
    cached = _TABLES.get(cls)
    if cached is not None:
        return cached
    specs = [(f.name, f.metadata[SPEC_KEY]) for f in dataclasses.fields(cls) if SPEC_KEY in f.metadata]
    first: tuple[str, ...] = getattr(cls, "_JSON_ORDER", ())
    specs.sort(key=lambda item: first.index(item[1].name) if item[1].name in first else len(first))
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


def _shape(cls: type[Any]) -> _Shape:
    cached = _SHAPES.get(cls)
    if cached is not None:
        return cached
    specs = _table(cls)[0]
    by_attr = dict(specs)
    others = tuple(f.name for f in dataclasses.fields(cls) if f.init and f.name not in by_attr)
    obj = cls()
    nils = tuple(a for a, spec in specs if spec.kind.pointer and getattr(obj, a) is not None)
    shape = _SHAPES[cls] = _Shape(by_attr, others, nils)
    return shape


def go_zero(cls: type[T]) -> T:
    """What Go decodes into: the dataclass defaults with every pointer-kind field ``None``."""
    nils = _shape(cls).nils
    return cls(**dict.fromkeys(nils)) if nils else cls()


def _decode_struct(
    cls: type[Any], base: Any, raw: Mapping[str, Any], path: str, errs: list[FieldError]
) -> Any:
    specs, exact, folded = _table(cls)
    shape = _shape(cls)
    by_attr = shape.by_attr
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
            current = values[attr] if values[attr] is not None else go_zero(kind.cls)
            values[attr] = _decode_struct(kind.cls, current, {key: item}, path, errs)
        else:
            values[attr] = spec.kind.decode(values[attr], item, join_path(path, spec.name), errs)
    if type(base) is not cls:  # a subclass instance: replace() knows its own fields
        return dataclasses.replace(base, **values)
    for attr in shape.others:  # what dataclasses.replace(base, **values) would carry over
        values[attr] = getattr(base, attr)
    return cls(**values)


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
    # "" in an enum field means "unset / default", as upstream reads it (docs/configuration.md).
    if spec.enum is not None and value != "" and value not in spec.enum:
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
    """Structural OpenAPI v3 schema of a typed dataclass (inline fields expanded; enums and the CRD
    bounds and defaults of ``FieldSpec`` included)."""
    props: dict[str, Any] = {}
    required: list[str] = []
    for _, spec in _table(cls)[0]:
        if spec.inline:
            assert isinstance(spec.kind, StructKind)
            inner = struct_openapi(spec.kind.cls)
            props.update(inner.get("properties", {}))
            required += inner.get("required", [])
            continue
        schema = spec.kind.openapi()
        if spec.enum is not None:  # "" is admitted as unset, as ``validate`` reads it
            schema["enum"] = [*spec.enum, ""] if "" not in spec.enum else list(spec.enum)
        if spec.crd_default is not None:
            schema["default"] = spec.crd_default
        if spec.crd_maximum is not None:
            schema["maximum"] = spec.crd_maximum
        if spec.crd_minimum is not None:
            schema["minimum"] = spec.crd_minimum
        props[spec.name] = schema
        if spec.required:
            required.append(spec.name)
    out: dict[str, Any] = {"type": "object"}
    if props:
        out["properties"] = props
    if required:
        out["required"] = required
    return out
