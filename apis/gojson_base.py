"""The Go-JSON codec's contract (``apis.gojson``, ``apis.gojson_kinds``, ``apis.gojson_collections``):
the ``Kind`` interface every value kind implements (decode into an existing value, encode with
``omitempty``, validate, describe in OpenAPI v3), the ``FieldError`` a kind reports at a JSON path and
the ``DecodeError`` that gathers a document's errors, with JSON path joining and bounded reprs for
their messages.
Imports: the standard library only. Pure, no I/O.
"""

from __future__ import annotations

import reprlib
from typing import Any

__all__ = ["DecodeError", "FieldError", "Kind", "join_path", "short_repr"]


class FieldError(ValueError):
    """One bad value at a JSON path. ``fatal=False`` marks a problem that only disables a node entry."""

    def __init__(self, path: str, value: Any, message: str, *, fatal: bool = True) -> None:
        self.path = path
        self.value = value
        self.message = message
        self.fatal = fatal
        super().__init__(f"field {path or '(document)'}={short_repr(value)}: {message}")


class DecodeError(ValueError):
    """All errors found while decoding one document."""

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors))


def _short_repr() -> reprlib.Repr:
    # repr() of a value nested a thousand deep (valid JSON) recurses past Python's limit; reprlib
    # stops at a depth and length, so an error message costs the same for any input
    r = reprlib.Repr()
    r.maxlevel, r.maxlist, r.maxtuple, r.maxdict, r.maxset = 12, 40, 40, 40, 40
    r.maxstring = r.maxlong = r.maxother = 200
    return r


_SHORT = _short_repr()


def short_repr(value: Any, limit: int = 120) -> str:
    """`repr(value)` for an error message: at most `limit` characters, bounded in depth and length
    whatever the value (a document nested a thousand deep included)."""
    text = _SHORT.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
