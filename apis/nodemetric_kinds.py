"""Shortcuts through the Go-JSON decoder for the parts of a NodeMetric that are decoded in bulk.

The scheduler decodes every node's NodeMetric on its informer's thread about once a minute (333 a second
at 20,000 nodes; docs/architecture.md#informer-mailbox), each with a ResourceMap per pod and per
aggregated window; the generic ``apis.gojson`` struct decoder builds a zero value, a JSON path and a field
lookup for every field of every one of them. These kinds read the form reporters write (exact key names,
known enum values, strings, quantities) straight into the dataclasses when decoding into an empty value,
and hand anything else — case-folded or unknown keys, ``devices``, ``extensions``, a wrong type, a bad
value, a non-empty value to decode into — to the generic decoder unchanged, which so alone decides odd
input and names the field and value of every error. Where a shortcut applies it yields what the generic
decoder yields (tests/unit/apis/test_nodemetric_kinds.py checks both ways on generated input). The
metadata kind copies a plain JSON tree without ``copy.deepcopy``'s bookkeeping; the window kind reads each
recurring duration text ("5m0s") once.
Imports: the standard library and apis (duration, gojson, gojson_base, gojson_collections, gojson_kinds,
quantity).
Pure, no I/O.
"""

from __future__ import annotations

import copy
import enum
import functools
from typing import Any, Final

from apis.duration import Duration, DurationError
from apis.gojson import StructKind
from apis.gojson_base import FieldError
from apis.gojson_collections import ListKind, MapKind
from apis.gojson_kinds import DurationKind, ObjectKind
from apis.quantity import Quantity, QuantityError

__all__ = ["JsonObjectKind", "PodsMetricKind", "ResourceMapKind", "UsageMapKind", "WindowKind"]

_JSON_SCALARS: Final = (str, int, float, bool, type(None))


class _NotJsonError(Exception):
    """A value that is not a plain JSON tree (copy.deepcopy copies it instead)."""


def _copy_json(value: Any) -> Any:
    # Only exact dict/list/str/int/float/bool/None: anything else (subclasses included) is deepcopy's.
    kind = type(value)
    if kind is dict:
        return {k: _copy_json(v) for k, v in value.items()}
    if kind is list:
        return [_copy_json(v) for v in value]
    if kind in _JSON_SCALARS:
        return value
    raise _NotJsonError


class JsonObjectKind(ObjectKind):
    """``ObjectKind`` (a free-form object, replaced whole and deep-copied) copying a plain JSON tree
    without ``copy.deepcopy``'s memo bookkeeping: the same values, the same independence from the input."""

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if type(raw) is dict:
            try:
                return _copy_json(raw)
            except (_NotJsonError, RecursionError):
                return copy.deepcopy(raw)
        return super().decode(old, raw, path, errs)


@functools.lru_cache(maxsize=256)
def _window(text: str) -> Duration:
    return Duration.parse(text)  # a Duration is immutable: one instance serves every report


class WindowKind(DurationKind):
    """``DurationKind`` reading each duration text once (a report carries the same few windows)."""

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if type(raw) is str and len(raw) <= 32:
            try:
                return _window(raw)
            except DurationError:
                pass
        return super().decode(old, raw, path, errs)


def _resources(raw: dict[Any, Any]) -> dict[Any, Quantity] | None:
    """``{"resources": {...}}`` or ``{}`` as the generic decoder reads it into an empty map, or None."""
    if not raw:
        return {}
    if len(raw) != 1:
        return None
    resources = raw.get("resources")
    if type(resources) is not dict:
        return None
    from_json = Quantity.from_json
    try:
        return {name: from_json(value) for name, value in resources.items()}
    except (QuantityError, TypeError, ValueError):
        return None


class ResourceMapKind(StructKind):
    """The non-pointer ``ResourceMap`` struct kind with the shortcut for ``{"resources": {...}}``."""

    def __init__(self, cls: type[Any]) -> None:
        super().__init__(cls, pointer=False)

    def fast(self, raw: dict[Any, Any]) -> Any | None:
        """What decoding ``raw`` into the zero value gives, when the shortcut applies; else None."""
        resources = _resources(raw)
        return None if resources is None else self.cls(resources=resources, devices=None)

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if type(raw) is dict and (
            old is None or (type(old) is self.cls and not old.resources and old.devices is None)
        ):
            value = self.fast(raw)
            if value is not None:
                return value
        return super().decode(old, raw, path, errs)


class UsageMapKind(MapKind):
    """``AggregatedUsage.usage``: a map (never null) from aggregation type to ResourceMap, with the
    shortcut for a map of known types to ``{"resources": {...}}`` values."""

    def __init__(self, usage: ResourceMapKind, keys: type[enum.StrEnum]) -> None:
        super().__init__(usage, keys=keys, nullable=False, dotted=True)
        self.usage = usage
        self.members: dict[str, Any] = {m.value: m for m in keys}

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if not old and type(raw) is dict:
            out = {}
            for key, item in raw.items():
                member = self.members.get(key) if type(key) is str else None
                value = self.usage.fast(item) if member is not None and type(item) is dict else None
                if value is None:
                    break
                out[member] = value
            else:
                return out
        return super().decode(old, raw, path, errs)


_POD_KEYS: Final = frozenset(("name", "namespace", "podUsage", "priority", "qos"))


def _member(values: dict[str, Any], zero: Any, raw: Any) -> Any:
    """A non-pointer enum field's value (null: the zero member), or None when the shortcut does not apply."""
    if raw is None:
        return zero
    return values.get(raw) if type(raw) is str else None


def _string(raw: Any) -> str | None:
    """A non-pointer, non-nullable string field's value (null: ``""``), or None."""
    if raw is None:
        return ""
    return raw if type(raw) is str else None


class PodsMetricKind(ListKind):
    """``status.podsMetric``: a list (never null) of ``PodMetricInfo`` structs, null items refused,
    with the shortcut for items of exactly the fields reporters write (no ``extensions``)."""

    def __init__(
        self,
        cls: type[Any],
        usage: ResourceMapKind,
        priorities: type[enum.StrEnum],
        qos: type[enum.StrEnum],
    ) -> None:
        super().__init__(StructKind(cls, pointer=False), nullable=False, null_items=False)
        self.cls = cls
        self.usage = usage
        self.priorities: dict[str, Any] = {m.value: m for m in priorities}
        self.qos: dict[str, Any] = {m.value: m for m in qos}
        self.zero_priority = priorities("")
        self.zero_qos = qos("")

    def fast(self, raw: dict[Any, Any]) -> Any | None:
        """What decoding ``raw`` into the zero ``PodMetricInfo`` gives, when the shortcut applies; else
        None."""
        if not _POD_KEYS.issuperset(raw):
            return None
        get = raw.get
        name = _string(get("name"))
        namespace = _string(get("namespace"))
        priority = _member(self.priorities, self.zero_priority, get("priority"))
        qos = _member(self.qos, self.zero_qos, get("qos"))
        usage = get("podUsage")
        pod_usage = self.usage.zero() if usage is None else None
        if type(usage) is dict:
            pod_usage = self.usage.fast(usage)
        if name is None or namespace is None or priority is None or qos is None or pod_usage is None:
            return None
        return self.cls(
            name=name, namespace=namespace, pod_usage=pod_usage, priority=priority, qos=qos, extensions=None
        )

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if not old and type(raw) is list:
            out = []
            fast = self.fast
            for item in raw:
                value = fast(item) if type(item) is dict else None
                if value is None:
                    break
                out.append(value)
            else:
                return out
        return super().decode(old, raw, path, errs)
