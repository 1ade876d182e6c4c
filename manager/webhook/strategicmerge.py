"""Kubernetes strategic merge patch on JSON objects, with the Pod's patch metadata (pure).

This is what a ClusterColocationProfile's ``patch`` does to a pod
(docs/rules/colocation-profile.md#the-patch-field): the algorithm of apimachinery's
``StrategicMergePatch`` as the API server applies it (unmatched ``null`` ignored, parallel lists merged):

* objects merge key by key; ``null`` deletes the key; a value of another JSON type replaces;
* lists replace, unless the field's patch strategy is ``merge``: lists of objects then merge element by
  element on the field's merge key (``containers``/``initContainers``/``volumes``/``env`` by ``name``,
  ``ports`` by ``containerPort``, ``volumeMounts`` by ``mountPath``…; ``strategicmerge_meta``), lists
  of scalars (``finalizers``) become the union. Order: the patch's items in the patch's order, each
  other live item slotted in before the first patch item that follows it in the live list; a patch item
  new to the list is placed as soon as it is reached (a patch naming only a new container puts it first);
* directives: ``$patch: replace`` / ``$patch: delete`` in an object or a list element, ``$retainKeys``,
  ``$deleteFromPrimitiveList/<field>`` and ``$setElementOrder/<field>``.

Where Go panics (comparing objects, ``null`` list elements) a ``PatchError`` is raised instead. The
inputs are never modified. Checked against all 94 raw test cases of apimachinery's strategic merge
tests (188 patch applications, list order included); tests/unit/manager/webhook/test_strategicmerge.py
ports 34 of them.
Imports: the standard library and the two ``strategicmerge_*`` helpers.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from manager.webhook.strategicmerge_meta import NO_META, POD, Field, Schema
from manager.webhook.strategicmerge_order import (
    DIRECTIVE,
    MAP,
    SLICE,
    PatchError,
    aliased_view,
    bad_arg,
    dedupe_in_place,
    element_kind,
    eq,
    find,
    go_cap,
    go_type,
    no_merge_key,
    normalize_order,
    partition,
)

__all__ = ["POD", "PatchError", "strategic_merge"]

RETAIN_KEYS: Final = "$retainKeys"
DELETE_FROM_PRIMITIVE_LIST: Final = "$deleteFromPrimitiveList"
SET_ELEMENT_ORDER: Final = "$setElementOrder"


def strategic_merge(original: Mapping[str, Any], patch: Any, schema: Schema = POD) -> dict[str, Any]:
    """``original`` with the strategic merge ``patch`` applied (a new object); raises PatchError."""
    if not isinstance(patch, Mapping):
        raise PatchError("invalid JSON document")
    return _merge_map(copy.deepcopy(dict(original)), copy.deepcopy(dict(patch)), schema)


def _extract_key(key: str, prefix: str, error: str) -> str:
    head, sep, rest = key.partition("/")
    if not sep or head != prefix:
        raise PatchError(error)
    return rest


# --- objects -------------------------------------------------------------------------------------
def _merge_map(original: dict[str, Any] | None, patch: dict[str, Any], schema: Schema) -> dict[str, Any]:
    if DIRECTIVE in patch:
        directive = patch[DIRECTIVE]
        if directive == "replace":
            del patch[DIRECTIVE]
            return patch
        if directive == "delete":
            return {}
        raise PatchError(f"unknown patch type: {directive} in map: {patch}")
    original = {} if original is None else original
    _apply_retain_keys(original, patch)
    _merge_ordered_lists(original, patch, schema)
    for key, value in list(patch.items()):
        delete_list = key.startswith(DELETE_FROM_PRIMITIVE_LIST)
        if delete_list:
            key = _extract_key(key, DELETE_FROM_PRIMITIVE_LIST, "invalid patch format of primitive list")
        if value is None:
            original.pop(key, None)
            continue
        if key not in original or go_type(original[key]) != go_type(value):
            if not delete_list:
                _discard_nulls(value)
                _set(original, key, value)
            continue
        meta = schema.get(key, NO_META)
        current = original[key]
        if isinstance(current, dict):
            original[key] = value if meta.strategy == "replace" else _merge_map(current, value, meta.schema)
        elif isinstance(current, list):
            original[key] = _merge_list_field(current, value, meta, delete_list)
        else:
            _set(original, key, value)
    return original


def _set(original: dict[str, Any], key: str, value: Any) -> None:
    """``original[key]`` = the patch value without its directives (dropped if it is one)."""
    kept, keep = _remove_directives(value)
    if keep:
        original[key] = kept
    else:
        original.pop(key, None)


def _apply_retain_keys(original: dict[str, Any], patch: dict[str, Any]) -> None:
    """``$retainKeys``: the original keeps only the listed keys; the patch may set no other key."""
    if RETAIN_KEYS not in patch:
        return
    retain = patch.pop(RETAIN_KEYS)
    if not isinstance(retain, list):
        raise PatchError("invalid patch format of retainKeys")
    for item in retain:
        if go_type(item) in (MAP, SLICE):
            raise PatchError(f"runtime error: hash of unhashable type {go_type(item)}")
    for key, value in patch.items():
        if value is None or key.startswith((DELETE_FROM_PRIMITIVE_LIST, SET_ELEMENT_ORDER)):
            continue
        if not any(eq(key, r) for r in retain):
            raise PatchError("invalid patch format of retainKeys")
    for key in [k for k in original if not any(eq(k, r) for r in retain)]:
        del original[key]


def _discard_nulls(value: Any) -> None:
    if isinstance(value, dict):
        for key in [k for k, v in value.items() if v is None]:
            del value[key]
        for v in value.values():
            _discard_nulls(v)
    elif isinstance(value, list):
        for v in value:
            _discard_nulls(v)


def _remove_directives(value: Any) -> tuple[Any, bool]:
    """The value without its ``$patch`` objects, and whether it is kept at all."""
    if isinstance(value, dict):
        if DIRECTIVE in value:
            return None, False
        for key in list(value):
            kept, keep = _remove_directives(value[key])
            if keep:
                value[key] = kept
            else:
                del value[key]
        return value, True
    if isinstance(value, list):
        out = []
        for item in value:
            kept, keep = _remove_directives(item)
            if keep:
                out.append(kept)
        return out, True
    return value, True


# --- lists ---------------------------------------------------------------------------------------
def _merge_list_field(original: Any, patch: Any, meta: Field, delete_list: bool) -> list[Any]:
    if not isinstance(original, list):
        raise bad_arg(SLICE, original)
    if not isinstance(patch, list):
        raise bad_arg(SLICE, patch)
    if meta.strategy == "merge" or delete_list:
        return _merge_list(original, patch, meta.schema, meta.merge_key, delete_list)
    return patch


def _merge_list(
    original: list[Any], patch: list[Any], schema: Schema, key: str, delete_list: bool
) -> list[Any]:
    if not original and not patch:
        return original
    kind = element_kind(original, patch)
    if kind != MAP:
        if delete_list:
            return [v for v in original if not any(eq(v, d) for d in patch)]
        both = [*original, *patch]
        merged = both[: dedupe_in_place(both, len(both))]
        if len(both) <= go_cap(len(original)):  # Go appended in place: the dedupe wrote into original
            original = both[: len(original)]
    else:
        if not key:
            raise PatchError("cannot merge lists without merge key")
        original, patch = _special_elements(original, patch, key)
        merged = list(original)
        for item in patch:
            if key not in item:
                raise no_merge_key(item, key)
            index = find(merged, key, item[key])
            if index >= 0:
                merged[index] = _merge_map(merged[index], item, schema)
            else:
                merged.append(item)
    in_patch, server_only = partition(merged, patch, key)
    return normalize_order(in_patch, server_only, patch, original, key, kind)


def _special_elements(original: list[Any], patch: list[Any], key: str) -> tuple[list[Any], list[Any]]:
    """Apply the ``$patch`` elements (delete by merge key, or replace the whole list); return the
    live list and the plain patch items."""
    plain: list[Any] = []
    replace = False
    for item in patch:
        if DIRECTIVE not in item:
            plain.append(item)
            continue
        directive = item[DIRECTIVE]
        if directive == "delete":
            if key not in item:
                raise no_merge_key(item, key)
            while (index := find(original, key, item[key])) >= 0:
                original = original[:index] + original[index + 1 :]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise PatchError("merging lists cannot yet be specified in the patch")
        else:
            raise PatchError(f"unknown patch type: {directive} in map: {item}")
    return (plain, []) if replace else (original, plain)


# --- $setElementOrder --------------------------------------------------------------------------------
def _merge_ordered_lists(original: dict[str, Any], patch: dict[str, Any], schema: Schema) -> None:
    """``$setElementOrder/<field>``: merge the field's list and order it as the directive says."""
    for directive_key in [k for k in patch if k.startswith(SET_ELEMENT_ORDER)]:
        order = patch.pop(directive_key)
        if not isinstance(order, list):
            raise bad_arg(SLICE, order)
        name = _extract_key(directive_key, SET_ELEMENT_ORDER, "invalid patch format of setElementOrder list")
        meta = schema.get(name, NO_META)
        in_original, in_patch = name in original, name in patch
        original_list: list[Any] = []
        patch_list: list[Any] = []
        if in_original:
            if not isinstance(original[name], list):
                raise bad_arg(SLICE, original[name])
            original_list = original[name]
        if in_patch:
            if not isinstance(patch[name], list):
                raise bad_arg(SLICE, patch[name])
            patch_list = patch[name]
        _check_order(patch_list, order, meta.merge_key)
        live = original_list
        if in_original and not in_patch:
            merged = original_list
        elif in_patch and not in_original:
            merged = _remove_directives(patch_list)[0]
        elif in_patch:
            merged = _merge_list_field(original_list, patch_list, meta, False)
            if meta.strategy == "merge":
                live = aliased_view(original_list, patch_list, meta.merge_key)
        else:
            continue
        in_order, others = partition(merged, order, meta.merge_key)
        kind = element_kind(original_list, patch_list)
        original[name] = normalize_order(in_order, others, order, live, meta.merge_key, kind)
        patch.pop(name, None)


def _check_order(patch_list: list[Any], order: list[Any], key: str) -> None:
    """The patch list's items must appear in the ``$setElementOrder`` list, in the same order."""
    if not order or not patch_list:
        return
    items = patch_list
    if key:
        for item in items:
            if not isinstance(item, dict):
                raise bad_arg(MAP, item)
        items = [i for i in items if i.get(DIRECTIVE) != "delete"]
    pi = si = 0
    while pi < len(items) and si < len(order):
        if isinstance(items[pi], dict) and DIRECTIVE in items[pi]:
            pi += 1
            continue
        if _same(items[pi], order[si], key):
            pi += 1
        si += 1
    if pi < len(items) and si >= len(order):
        raise PatchError(
            f"The order in patch list:\n{patch_list}\n doesn't match {SET_ELEMENT_ORDER} list:\n{order}\n"
        )


def _same(a: Any, b: Any, key: str) -> bool:
    if not key:
        return eq(a, b)
    for item in (a, b):
        if not isinstance(item, dict):
            raise bad_arg(MAP, item)
        if key not in item:
            raise no_merge_key(item, key)
    return eq(a[key], b[key])
