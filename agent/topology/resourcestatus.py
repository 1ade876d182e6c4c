"""The pod's ``scheduling.koordinator.sh/resource-status`` annotation read as the koordlet reads it
(docs/rules/koordlet-cpuset.md#resource-status): a Go ``json.Unmarshal`` into
``{"cpuset": string, "numaNodeResources": [{"node": int32, "resources": ResourceList}]}`` — field names
matched case-insensitively, ``null`` leaves a field unset, unknown fields ignored, any type mismatch, a
malformed quantity or malformed JSON is an error. A missing annotation is the empty status. Pure.

Imports: standard library, apis.{constants,quantity}.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from apis import constants as c
from apis.quantity import Quantity, QuantityError

__all__ = ["NUMANodeResource", "ResourceStatus", "ResourceStatusError", "parse_resource_status"]

_INT32_MIN: Final = -(2**31)
_INT32_MAX: Final = 2**31 - 1


class ResourceStatusError(ValueError):
    """The annotation does not decode; the message says which part."""


@dataclass(frozen=True)
class NUMANodeResource:
    node: int
    resources: Mapping[str, Quantity] | None
    """None when absent or ``null`` (upstream's nil ResourceList)."""


@dataclass(frozen=True)
class ResourceStatus:
    cpuset: str = ""
    """As written (not parsed: the koordlet hands it on as is)."""
    numa_node_resources: tuple[NUMANodeResource, ...] = ()


def _reject_constant(name: str) -> Any:
    raise ResourceStatusError(f"invalid JSON: {name} is not a JSON value")


def _fields(pairs: list[tuple[str, Any]], names: tuple[str, ...]) -> dict[str, Any]:
    """Go's field matching: each key, in order, sets the field it names exactly or case-insensitively; the
    last one wins."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        for name in names:
            if key == name or key.lower() == name.lower():
                out[name] = value
                break
    return out


def _pairs(value: Any, what: str) -> list[tuple[str, Any]] | None:
    if value is None:
        return None
    if not isinstance(value, _Obj):
        raise ResourceStatusError(f"{what}: expected an object, got {_kind(value)}")
    return list(value)


class _Obj(list[tuple[str, Any]]):
    """A decoded JSON object, its key/value pairs in document order (duplicates kept)."""


def _kind(value: Any) -> str:
    if isinstance(value, _Obj):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}"
    return repr(value)


def _numa_entry(value: Any, index: int) -> NUMANodeResource:
    where = f"numaNodeResources[{index}]"
    pairs = _pairs(value, where)
    if pairs is None:
        return NUMANodeResource(0, None)
    f = _fields(pairs, ("node", "resources"))
    node = f.get("node")
    if node is None:
        node = 0
    elif isinstance(node, bool) or not isinstance(node, int):
        raise ResourceStatusError(f"{where}.node: expected an int32, got {_kind(node)}")
    elif not _INT32_MIN <= node <= _INT32_MAX:
        raise ResourceStatusError(f"{where}.node: {node} overflows int32")
    res_pairs = _pairs(f.get("resources"), f"{where}.resources")
    resources: dict[str, Quantity] | None = None
    if res_pairs is not None:
        resources = {}
        for name, qty in res_pairs:
            try:
                resources[name] = Quantity.from_json(qty)
            except (QuantityError, ValueError, TypeError) as exc:
                raise ResourceStatusError(f"{where}.resources[{name!r}]: {exc}") from exc
    return NUMANodeResource(node, resources)


def parse_resource_status(annotations: Mapping[str, Any] | None) -> ResourceStatus:
    """The pod's resource status; ``ResourceStatusError`` when the annotation does not decode."""
    text = (annotations or {}).get(c.ANNOTATION_RESOURCE_STATUS)
    if text is None:
        return ResourceStatus()
    if not isinstance(text, str):
        raise ResourceStatusError(f"annotation value {text!r} is not a string")
    try:
        doc = json.loads(text, object_pairs_hook=_Obj, parse_constant=_reject_constant)
    except RecursionError as exc:
        raise ResourceStatusError("invalid JSON: nested too deep") from exc
    except ValueError as exc:
        raise ResourceStatusError(f"invalid JSON: {exc}") from exc
    pairs = _pairs(doc, c.ANNOTATION_RESOURCE_STATUS)
    if pairs is None:
        return ResourceStatus()
    f = _fields(pairs, ("cpuset", "numaNodeResources"))
    cpuset = f.get("cpuset")
    if cpuset is None:
        cpuset = ""
    elif not isinstance(cpuset, str):
        raise ResourceStatusError(f"cpuset: expected a string, got {_kind(cpuset)}")
    numa = f.get("numaNodeResources")
    entries: tuple[NUMANodeResource, ...] = ()
    if numa is not None:
        if isinstance(numa, _Obj) or not isinstance(numa, list):
            raise ResourceStatusError(f"numaNodeResources: expected an array, got {_kind(numa)}")
        entries = tuple(_numa_entry(v, i) for i, v in enumerate(numa))
    return ResourceStatus(cpuset, entries)
