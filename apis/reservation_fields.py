"""Readers of a raw Reservation's JSON fields for ``apis.reservation.parse_reservation``
(docs/rules/scheduler-reservation.md#the-crd): each returns the field's value, with an absent or
``null`` field as the empty value, or raises ValueError naming the field's path and the value found.

Imports: the standard library and apis.rfc3339. Pure.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping
from typing import Any

from apis.rfc3339 import parse_rfc3339

__all__ = [
    "as_object",
    "bool_at",
    "condition",
    "fail",
    "list_at",
    "object_ref",
    "owner_term",
    "show",
    "str_at",
    "str_map_at",
    "taint",
    "time_at",
]


def show(value: object) -> str:
    text = json.dumps(value) if isinstance(value, str | int | float | bool | type(None)) else repr(value)
    return text if len(text) <= 80 else text[:79] + "…"


def fail(where: str, expected: str, value: object) -> ValueError:
    return ValueError(f"{where}: expected {expected}, got {show(value)}")


def as_object(value: object, where: str, absent_ok: bool = True) -> dict[str, Any]:
    if value is None and absent_ok:
        return {}
    if not isinstance(value, dict):
        raise fail(where, "an object", value)
    return value


def str_at(d: Mapping[str, Any], key: str, where: str) -> str:
    value = d.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise fail(f"{where}.{key}", "a string", value)
    return value


def bool_at(d: Mapping[str, Any], key: str, where: str) -> bool | None:
    value = d.get(key)
    if value is not None and not isinstance(value, bool):
        raise fail(f"{where}.{key}", "a boolean", value)
    return value


def str_map_at(d: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    raw = as_object(d.get(key), f"{where}.{key}")
    for k, v in raw.items():
        if not isinstance(v, str):
            raise fail(f"{where}.{key}.{k}", "a string", v)
    return dict(raw)


def list_at(d: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = d.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise fail(f"{where}.{key}", "a list", value)
    return value


def time_at(d: Mapping[str, Any], key: str, where: str) -> _dt.datetime | None:
    value = d.get(key)
    if value is None:
        return None
    try:
        return parse_rfc3339(value)
    except ValueError as e:
        raise ValueError(f"{where}.{key}={show(value)}: {e}") from None


def owner_term(raw: object, where: str) -> dict[str, Any]:
    term = as_object(raw, where, absent_ok=False)
    obj = as_object(term.get("object"), f"{where}.object")
    for key in ("uid", "name", "namespace", "apiVersion", "kind", "resourceVersion", "fieldPath"):
        str_at(obj, key, f"{where}.object")
    ctrl = as_object(term.get("controller"), f"{where}.controller")
    for key in ("apiVersion", "kind", "name", "uid", "namespace"):
        str_at(ctrl, key, f"{where}.controller")
    for key in ("controller", "blockOwnerDeletion"):
        bool_at(ctrl, key, f"{where}.controller")
    as_object(term.get("labelSelector"), f"{where}.labelSelector")
    return term


def condition(raw: object, where: str) -> dict[str, str]:
    c = as_object(raw, where, absent_ok=False)
    keys = ("type", "status", "reason", "message", "lastProbeTime", "lastTransitionTime")
    return {k: str_at(c, k, where) for k in keys if c.get(k) is not None}


def object_ref(raw: object, where: str) -> dict[str, str]:
    ref = as_object(raw, where, absent_ok=False)
    return {k: str_at(ref, k, where) for k in ("namespace", "name", "uid")}


def taint(raw: object, where: str) -> dict[str, str]:
    t = as_object(raw, where, absent_ok=False)
    return {k: str_at(t, k, where) for k in ("key", "value", "effect")}
