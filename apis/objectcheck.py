"""Run-time shape checks for Kubernetes objects and numbers read from hand-written JSON (``koord simulate``
scenario files; docs/simulate.md#input-errors).

The API server only ever hands out objects of the right shape, so the daemons read the ``TypedDict``s of
``apis.kubeobjects`` without checking them. A scenario file is written by hand: before its objects reach
that code, ``check_object`` walks every field the ``TypedDict`` declares (strings, integers, booleans,
lists, string maps, nested objects, and the quantities of resource lists; free-form ``Any`` parts are left
to their own decoders) and raises ``ValueError`` naming the field's path and value, e.g.
``pods[0].metadata.labels.app: expected a string, got 5``. ``null`` is refused like any other wrong type:
the API server never sends it for these fields.

Imports: the standard library and apis.{kubeobjects,quantity}.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from typing import Any, Final, NoReturn, TypeVar, cast, get_args, get_origin, get_type_hints, is_typeddict

from apis.kubeobjects import Node, NodeStatus, Pod, PodSpec, ResourceRequirements
from apis.quantity import Quantity, QuantityError

__all__ = [
    "as_node",
    "as_pod",
    "as_pods",
    "bounded_int",
    "check_object",
    "finite_number",
    "object_list",
    "require_mapping",
    "show",
]

T = TypeVar("T")

NUMBER_LIMIT: Final = float(2**63)
"""Largest magnitude ``finite_number`` accepts: any usage in cores, bytes or milli-units fits, and every
product the strategies form from it stays a finite float."""

_SCALARS: Final[dict[type, str]] = {str: "a string", bool: "a boolean", int: "an integer", float: "a number"}
# Resource lists (resource name -> quantity, a string or a JSON number).
_QUANTITY_MAPS: Final = frozenset(
    {
        (ResourceRequirements, "limits"),
        (ResourceRequirements, "requests"),
        (PodSpec, "overhead"),
        (NodeStatus, "capacity"),
        (NodeStatus, "allocatable"),
    }
)


def show(value: object) -> str:
    """``value`` as JSON text for a message, cut to 80 characters."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"


def _fail(where: str, expected: str, value: object) -> NoReturn:
    raise ValueError(f"{where}: expected {expected}, got {show(value)}")


@functools.cache
def _fields(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _describe(tp: Any) -> str:
    if is_typeddict(tp):
        return f"an object ({tp.__name__})"
    origin = get_origin(tp)
    if origin is list:
        return "a list"
    if origin is dict:
        return "an object"
    return _SCALARS.get(tp, "a value")


def _check(value: object, tp: Any, where: str) -> Any:
    """``value`` checked against ``tp``, as Go would decode it: a ``null`` field of an object is the
    field left unset (dropped from the copy returned), as the API server's own objects carry them."""
    if tp is Any:
        return value
    origin = get_origin(tp)
    if is_typeddict(tp):
        if not isinstance(value, dict):
            _fail(where, _describe(tp), value)
        fields = _fields(tp)
        out: dict[str, Any] = {}
        for key, item in value.items():
            if item is None:
                continue
            if (tp, key) in _QUANTITY_MAPS:
                _check_quantities(item, f"{where}.{key}")
                out[key] = item
            elif key in fields:
                out[key] = _check(item, fields[key], f"{where}.{key}")
            else:
                out[key] = item
        return out
    if origin is list:
        if not isinstance(value, list):
            _fail(where, "a list", value)
        (item_type,) = get_args(tp)
        return [_check(item, item_type, f"{where}[{i}]") for i, item in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            _fail(where, "an object", value)
        item_type = get_args(tp)[1]
        return {key: _check(item, item_type, f"{where}.{key}") for key, item in value.items()}
    if tp in _SCALARS:
        if tp is bool:
            ok = isinstance(value, bool)
        elif tp is float:
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        else:
            ok = isinstance(value, tp) and not isinstance(value, bool)
        if not ok:
            _fail(where, _SCALARS[tp], value)
    return value


def _check_quantities(value: object, where: str) -> None:
    if not isinstance(value, dict):
        _fail(where, "an object of quantities", value)
    for name, item in value.items():
        try:
            Quantity.from_json(item)
        except QuantityError as err:
            raise ValueError(f"{where}.{name}: {err}") from None


def check_object(value: object, cls: type[T], where: str) -> T:
    """``value`` if every field ``cls`` (a ``TypedDict``) declares has its declared JSON type, else
    ``ValueError`` naming the first field that does not (``where`` is the object's own path). A copy:
    fields that are ``null`` are dropped, as Go's decoder leaves them unset."""
    return cast(T, _check(value, cls, where))


def as_pod(value: object, where: str) -> Pod:
    return check_object(value, Pod, where)


def as_node(value: object, where: str) -> Node:
    return check_object(value, Node, where)


def as_pods(value: object, where: str) -> list[Pod]:
    """A list of pods; absent or ``null`` is an empty list."""
    if value is None:
        return []
    if not isinstance(value, list):
        _fail(where, "a list of Pod objects", value)
    return [as_pod(p, f"{where}[{i}]") for i, p in enumerate(value)]


def object_list(document: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    """``document[key]`` as a list of JSON objects (a scenario file's `nodes`, `pods`, …); absent or
    ``null`` is an empty list. A ValueError names the key (and the item) otherwise."""
    value = document.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{key}: expected a list of objects, got {value!r:.80}")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise ValueError(f"{key}[{i}]: expected an object, got {item!r:.80}")
    return value


def finite_number(value: object, where: str) -> float:
    """A JSON number of magnitude at most 2^63 (no boolean, no infinity)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        _fail(where, "a number", value)
    if isinstance(value, int) and abs(value) > NUMBER_LIMIT:
        _fail(where, "a number of magnitude at most 2^63", value)
    number = float(value)
    if not math.isfinite(number) or abs(number) > NUMBER_LIMIT:
        _fail(where, "a finite number of magnitude at most 2^63", value)
    return number


def bounded_int(value: object, where: str) -> int:
    """A JSON integer of magnitude at most 2^63 (no boolean)."""
    if isinstance(value, bool) or not isinstance(value, int):
        _fail(where, "an integer", value)
    if abs(value) > NUMBER_LIMIT:
        _fail(where, "an integer of magnitude at most 2^63", value)
    return value


def require_mapping(value: object, where: str) -> Mapping[str, Any]:
    """``value`` if it is a JSON object, else ``ValueError`` naming ``where`` and the value."""
    if not isinstance(value, dict):
        _fail(where, "an object", value)
    return value
