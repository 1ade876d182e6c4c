"""Kubernetes ``metav1.LabelSelector``: parsing from JSON, validation and matching of label sets.

Semantics of ``metav1.LabelSelectorAsSelector``: ``matchLabels`` and ``matchExpressions`` are ANDed;
operators ``In``, ``NotIn``, ``Exists``, ``DoesNotExist`` (case-sensitive); In/NotIn need values,
Exists/DoesNotExist forbid them; keys and values must be valid label syntax. An empty selector
``{}`` matches every label set, a missing (``None``) selector matches none (``selector_matches``).
JSON keys are matched like Go's ``encoding/json`` (exact, else case-insensitive); unknown keys are ignored.
Imports: the standard library only. Pure, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

OP_IN: Final = "In"
OP_NOT_IN: Final = "NotIn"
OP_EXISTS: Final = "Exists"
OP_DOES_NOT_EXIST: Final = "DoesNotExist"
OPERATORS: Final = (OP_IN, OP_NOT_IN, OP_EXISTS, OP_DOES_NOT_EXIST)

_NAME: Final = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS1123_SUBDOMAIN: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


class LabelSelectorError(ValueError):
    """A selector that cannot be decoded (``type_error``) or is semantically invalid.

    ``field`` is the JSON path inside the selector (e.g. ``matchExpressions[0].operator``).
    """

    def __init__(self, field: str, value: Any, message: str, *, type_error: bool = False) -> None:
        self.field = field
        self.value = value
        self.message = message
        self.type_error = type_error
        super().__init__(f"label selector field {field or '(selector)'}={value!r}: {message}")


@dataclass(frozen=True)
class Requirement:
    """One ``matchExpressions`` entry."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a label set satisfies this requirement."""
        if self.operator == OP_IN:
            return self.key in labels and labels[self.key] in self.values
        if self.operator == OP_NOT_IN:
            return self.key not in labels or labels[self.key] not in self.values
        if self.operator == OP_EXISTS:
            return self.key in labels
        return self.key not in labels

    def to_dict(self) -> dict[str, Any]:
        """Go JSON form (``values`` omitted when empty)."""
        out: dict[str, Any] = {"key": self.key, "operator": self.operator}
        if self.values:
            out["values"] = list(self.values)
        return out


@dataclass(frozen=True)
class LabelSelector:
    """A parsed, validated label selector. ``LabelSelector()`` (empty) matches everything."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[Requirement, ...] = ()

    def __hash__(self) -> int:
        return hash((tuple(sorted(self.match_labels.items())), self.match_expressions))

    def is_empty(self) -> bool:
        """True for ``{}``: no labels and no expressions (matches every node)."""
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether every matchLabels pair and every expression holds for the label set."""
        for key, value in self.match_labels.items():
            if labels.get(key) != value:
                return False
        return all(req.matches(labels) for req in self.match_expressions)

    def to_dict(self) -> dict[str, Any]:
        """Go JSON form (empty parts omitted, so the empty selector is ``{}``)."""
        out: dict[str, Any] = {}
        if self.match_labels:
            out["matchLabels"] = dict(self.match_labels)
        if self.match_expressions:
            out["matchExpressions"] = [r.to_dict() for r in self.match_expressions]
        return out

    @classmethod
    def from_dict(cls, data: Any) -> LabelSelector:
        """Decode and validate a selector object; raises LabelSelectorError naming field and value."""
        if not isinstance(data, Mapping):
            raise LabelSelectorError("", data, "a label selector must be a JSON object", type_error=True)
        raw_labels = _lookup(data, "matchLabels")
        raw_exprs = _lookup(data, "matchExpressions")
        labels = _decode_labels(raw_labels)
        exprs = _decode_expressions(raw_exprs)
        for key, value in labels.items():
            _check_key(f"matchLabels[{key}]", key)
            _check_value(f"matchLabels[{key}]", value)
        for i, req in enumerate(exprs):
            _check_requirement(f"matchExpressions[{i}]", req)
        return cls(labels, tuple(exprs))


def selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """Kubernetes rule: a missing selector matches nothing, an empty one matches everything."""
    return selector is not None and selector.matches(labels)


def _lookup(data: Mapping[str, Any], name: str) -> Any:
    """Go encoding/json key lookup: exact match first, else a case-insensitive one."""
    if name in data:
        return data[name]
    lowered = name.lower()
    for key, value in data.items():
        if isinstance(key, str) and key.lower() == lowered:
            return value
    return None


def _decode_labels(raw: Any) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise LabelSelectorError("matchLabels", raw, "must be an object of strings", type_error=True)
    out: dict[str, str] = {}
    for key, value in raw.items():
        if value is None:  # Go leaves a string unchanged on null: the empty value
            value = ""
        if not isinstance(value, str):
            raise LabelSelectorError(f"matchLabels[{key}]", value, "must be a string", type_error=True)
        out[str(key)] = value
    return out


def _decode_expressions(raw: Any) -> list[Requirement]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise LabelSelectorError("matchExpressions", raw, "must be a list of objects", type_error=True)
    out: list[Requirement] = []
    for i, item in enumerate(raw):
        path = f"matchExpressions[{i}]"
        if item is None:
            item = {}
        if not isinstance(item, Mapping):
            raise LabelSelectorError(path, item, "must be an object", type_error=True)
        strings: dict[str, str] = {}
        for name in ("key", "operator"):
            value = _lookup(item, name)
            if value is None:
                value = ""
            if not isinstance(value, str):
                raise LabelSelectorError(f"{path}.{name}", value, "must be a string", type_error=True)
            strings[name] = value
        raw_values = _lookup(item, "values")
        values: list[str] = []
        if raw_values is not None:
            if not isinstance(raw_values, list):
                raise LabelSelectorError(f"{path}.values", raw_values, "must be a list", type_error=True)
            for j, v in enumerate(raw_values):
                if v is None:
                    v = ""
                if not isinstance(v, str):
                    raise LabelSelectorError(f"{path}.values[{j}]", v, "must be a string", type_error=True)
                values.append(v)
        out.append(Requirement(strings["key"], strings["operator"], tuple(values)))
    return out


def _check_requirement(path: str, req: Requirement) -> None:
    _check_key(f"{path}.key", req.key)
    if req.operator not in OPERATORS:
        raise LabelSelectorError(
            f"{path}.operator", req.operator, f"is not a valid operator (one of {', '.join(OPERATORS)})"
        )
    if req.operator in (OP_IN, OP_NOT_IN) and not req.values:
        raise LabelSelectorError(f"{path}.values", list(req.values), f"must be non-empty for {req.operator}")
    if req.operator in (OP_EXISTS, OP_DOES_NOT_EXIST) and req.values:
        raise LabelSelectorError(f"{path}.values", list(req.values), f"must be empty for {req.operator}")
    for j, value in enumerate(req.values):
        _check_value(f"{path}.values[{j}]", value)


def is_qualified_name(key: str) -> bool:
    """A Kubernetes qualified name (label keys, resource names): ``[prefix/]name``, name ≤63
    alphanumerics with ``-_.`` inside, prefix a DNS-1123 subdomain ≤253."""
    prefix, sep, name = key.rpartition("/")
    if sep and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix)):
        return False
    return 0 < len(name) <= 63 and _NAME.fullmatch(name) is not None


def is_label_value(value: str) -> bool:
    """A label value: empty, or ≤63 alphanumerics with ``-_.`` inside."""
    return value == "" or (len(value) <= 63 and _NAME.fullmatch(value) is not None)


def _check_key(path: str, key: str) -> None:
    """A qualified label key: ``[prefix/]name``, name ≤63 chars, prefix a DNS-1123 subdomain."""
    prefix, sep, name = key.rpartition("/")
    if sep and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix)):
        raise LabelSelectorError(path, key, "the key prefix must be a DNS-1123 subdomain")
    if not name or len(name) > 63 or not _NAME.fullmatch(name):
        raise LabelSelectorError(path, key, "is not a valid label key (qualified name)")


def _check_value(path: str, value: str) -> None:
    """A label value: empty, or ≤63 alphanumerics with ``-_.`` inside."""
    if value and (len(value) > 63 or not _NAME.fullmatch(value)):
        raise LabelSelectorError(path, value, "is not a valid label value")
