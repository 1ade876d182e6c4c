"""Per-field repair of a typed config value: every field that breaks its declared rule takes the value
the same field has in a fallback (the last good config, or the default when there is none).

``repair(obj, fallback)`` walks a typed dataclass as ``gojson.validate`` does and, instead of only
reporting, replaces each invalid field: a scalar, list of scalars or map whose bound, enum or check
fails falls back whole; nested structs, and list elements and map values that are structs, are repaired
field by field (list element ``i`` against the fallback's element ``i``, a map value against the
fallback's value of the same key, if any); a ``_GREATER`` pair that is inverted
falls back as a pair. Each replacement is one ``Repair`` naming the JSON path, the bad value and the
value that now applies. The fallback is assumed valid (a last good value or a default), so one pass
is enough; what it cannot mend (a fallback that is itself invalid) is left for ``validate`` to report.
Imports: the standard library and ``apis.gojson`` / ``apis.gojson_base`` / ``apis.gojson_collections``. Pure,
no I/O.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar

from apis.gojson import StructKind, _check_scalar, _table, encode
from apis.gojson_base import FieldError, join_path
from apis.gojson_collections import ListKind, MapKind

__all__ = ["Repair", "repair"]

T = TypeVar("T")


@dataclass(frozen=True)
class Repair:
    """Field ``path`` had ``value`` (``message`` says why it is invalid); ``applied`` is in force now
    (``None``: the field is unset)."""

    path: str
    value: Any
    message: str
    applied: Any


def _shown(spec_kind: Any, value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    try:
        return spec_kind.encode(value)
    except Exception:  # a value the kind cannot encode is shown as Python sees it
        return repr(value)


def repair(obj: T, fallback: T | None, path: str = "") -> tuple[T, list[Repair]]:
    """``obj`` with every invalid field replaced by ``fallback``'s (``None`` fallback: unset)."""
    if obj is None:
        return obj, []
    repairs: list[Repair] = []
    changes: dict[str, Any] = {}
    for attr, spec in _table(type(obj))[0]:
        value = getattr(obj, attr)
        if value is None:
            continue
        backup = getattr(fallback, attr, None) if fallback is not None else None
        if spec.inline:
            fixed, found = repair(value, backup, path)
            if found:
                changes[attr] = fixed
                repairs += found
            continue
        where = join_path(path, spec.name)
        message = _check_scalar(spec, value)
        if message is None:
            fixed, found = _repair_nested(spec.kind, value, backup, where)
            if found:
                changes[attr] = fixed
                repairs += found
            continue
        changes[attr] = backup
        repairs.append(Repair(where, _shown(spec.kind, value), message, _shown(spec.kind, backup)))
    result: T = dataclasses.replace(obj, **changes) if changes else obj  # type: ignore[type-var]
    return _repair_pairs(result, fallback, path, repairs)


def _repair_nested(kind: Any, value: Any, backup: Any, where: str) -> tuple[Any, list[Repair]]:
    """A value whose own rule holds: recurse into structs and lists of structs; any other value with a
    nested error (a map element, a list of scalars) falls back whole."""
    if isinstance(kind, StructKind):
        return repair(value, backup, where)
    if isinstance(kind, ListKind) and isinstance(kind.elem, StructKind):
        out: list[Any] = []
        found: list[Repair] = []
        for i, item in enumerate(value):
            if item is None:  # a null element cannot be mended: dropped (validate calls it an error)
                found.append(Repair(f"{where}[{i}]", None, "must not be null", "(element dropped)"))
                continue
            old = backup[i] if isinstance(backup, list) and i < len(backup) else None
            fixed, inner = repair(item, old, f"{where}[{i}]")
            out.append(fixed)
            found += inner
        if not found:
            return value, []
        return (out if out or kind.keep_empty else kind.zero()), found
    if isinstance(kind, MapKind) and isinstance(kind.elem, StructKind):
        fixed_map: dict[Any, Any] = {}
        found = []
        for key, item in value.items():
            old = backup.get(key) if isinstance(backup, dict) else None
            fixed_map[key], inner = repair(item, old, kind._path(where, str(key)))
            found += inner
        return (fixed_map if found else value), found
    errs: list[FieldError] = []
    kind.validate(value, where, errs)
    if not errs:
        return value, []
    first = errs[0]
    return backup, [Repair(first.path, first.value, first.message, _shown(kind, backup))]


def _repair_pairs(obj: T, fallback: Any, path: str, repairs: list[Repair]) -> tuple[T, list[Repair]]:
    """``_GREATER`` rules: an inverted pair takes both values from the fallback."""
    rules: tuple[tuple[str, str], ...] = getattr(type(obj), "_GREATER", ())
    if not rules:
        return obj, repairs
    specs = {spec.name: attr for attr, spec in _table(type(obj))[0]}
    for upper, lower in rules:
        values = encode(obj)
        if upper not in values or lower not in values or values[upper] > values[lower]:
            continue
        pair = {specs[upper]: None, specs[lower]: None}
        if fallback is not None:
            pair = {attr: getattr(fallback, attr) for attr in pair}
        obj = dataclasses.replace(obj, **pair)  # type: ignore[type-var]
        applied = {name: pair[specs[name]] for name in (upper, lower)}
        repairs.append(
            Repair(
                join_path(path, upper),
                values[upper],
                f"must be greater than {lower}={values[lower]}",
                applied,
            )
        )
    return obj, repairs
