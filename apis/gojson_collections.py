"""The Go-JSON codec's slice and map kinds (``ListKind``, ``MapKind``): Go's decode-into-an-existing-value
rules for ``[]T`` (the new length, element i decoded into the old element i) and ``map[string]T`` (keys
gained or overwritten, each new value replacing the old one whole), ``omitempty`` encoding and their
OpenAPI v3 schemas. The struct kind and the field specs are ``apis.gojson``'s.
Imports: the standard library and ``apis.gojson_base``. Pure, no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from apis.gojson_base import FieldError, Kind, join_path

__all__ = ["ListKind", "MapKind"]


class ListKind(Kind):
    """A slice: takes the new length, element i decoded into the old element i. ``nullable=False``: the
    value is always a list (``[]`` for null); ``keep_empty``: a decoded ``[]`` stays ``[]``;
    ``null_items=False``: a null element is a decode error."""

    def __init__(
        self, elem: Kind, *, nullable: bool = True, keep_empty: bool = False, null_items: bool = True
    ) -> None:
        self.elem = elem
        self.pointer = nullable
        self.keep_empty = keep_empty or not nullable
        self.null_items = null_items

    def zero(self) -> Any:
        return None if self.pointer else []

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if raw is None:
            return self.zero()
        if not isinstance(raw, list):
            errs.append(FieldError(path, raw, "must be a list"))
            return old
        previous = old or []
        out = []
        for i, item in enumerate(raw):
            if item is None and not self.null_items:
                errs.append(FieldError(f"{path}[{i}]", None, "must not be null"))
                continue
            prev = previous[i] if i < len(previous) else self.elem.zero()
            out.append(self.elem.decode(prev, item, f"{path}[{i}]", errs))
        return out if out or self.keep_empty else None

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
    """A map with string keys: keys gained/overwritten, each new value replaces the old one whole.
    Encoded in Go's sorted key order. ``keys``: a StrEnum the keys must belong to (converted to it);
    ``nullable=False``: the value is always a dict; ``dotted``: element paths ``a.key``, not ``a[key]``."""

    def __init__(
        self,
        elem: Kind,
        *,
        keys: type[enum.StrEnum] | None = None,
        nullable: bool = True,
        dotted: bool = False,
    ) -> None:
        self.elem = elem
        self.keys = keys
        self.pointer = nullable
        self.dotted = dotted

    def zero(self) -> Any:
        return None if self.pointer else {}

    def _path(self, path: str, key: str) -> str:
        return join_path(path, key) if self.dotted else f"{path}[{key}]"

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if raw is None:
            return self.zero()
        if not isinstance(raw, Mapping):
            errs.append(FieldError(path, raw, "must be an object"))
            return old
        out = dict(old or {})
        allowed = None if self.keys is None else [m.value for m in self.keys]
        for key, item in raw.items():
            if allowed is not None and key not in allowed:
                errs.append(FieldError(path, key, f"has a key not in {allowed}"))
                continue
            name = key if self.keys is None else self.keys(key)
            out[name] = self.elem.decode(self.elem.zero(), item, self._path(path, key), errs)
        return out if out or not self.pointer else None

    def encode(self, value: Any) -> Any:
        return {
            str(k): None if value[k] is None else self.elem.encode(value[k]) for k in sorted(value, key=str)
        }

    def omit(self, value: Any) -> bool:
        return not value

    def validate(self, value: Any, path: str, errs: list[FieldError]) -> None:
        for key, item in (value or {}).items():
            if item is not None:
                self.elem.validate(item, self._path(path, str(key)), errs)

    def openapi(self) -> dict[str, Any]:
        return {"type": "object", "additionalProperties": self.elem.openapi()}
