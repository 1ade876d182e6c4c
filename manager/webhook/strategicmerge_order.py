"""Go value semantics and list ordering of the strategic merge patch (``manager.webhook.strategicmerge``).

JSON values as Go's ``encoding/json`` decodes them into ``interface{}`` (numbers are float64; ``==`` on
two objects or lists panics in Go, here it raises ``PatchError``), the order a merged list ends in
(patch items in the patch's order, the others at their place in the live list) and the one place where
the result depends on Go's slice memory: a merge writes into the backing array of the live list, and
``$setElementOrder`` then reads that list through its old length (``aliased_view``).
Imports: the standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "DIRECTIVE",
    "PatchError",
    "aliased_view",
    "bad_arg",
    "dedupe_in_place",
    "element_kind",
    "eq",
    "find",
    "go_type",
    "no_merge_key",
    "normalize_order",
    "partition",
]

DIRECTIVE: Final = "$patch"
MAP: Final = "map[string]interface {}"
SLICE: Final = "[]interface {}"


class PatchError(ValueError):
    """The patch cannot be applied (the message is apimachinery's where it has one)."""


def go_type(value: Any) -> str:
    """The Go type ``encoding/json`` decodes a value into."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return MAP
    if isinstance(value, list):
        return SLICE
    raise PatchError(f"not a JSON value: {value!r:.80}")


def eq(a: Any, b: Any) -> bool:
    """Go ``==`` on two ``interface{}`` values: different types are unequal, objects and lists cannot
    be compared."""
    ta, tb = go_type(a), go_type(b)
    if ta != tb:
        return False
    if ta in (MAP, SLICE):
        raise PatchError(f"runtime error: comparing uncomparable type {ta}")
    if ta == "float64":
        try:
            return float(a) == float(b)
        except OverflowError:
            raise PatchError(f"a number is out of the float64 range: {a}, {b}") from None
    return bool(a == b)


def bad_arg(expected: str, actual: Any) -> PatchError:
    return PatchError(f"expected a {expected}, but received a {go_type(actual)}")


def no_merge_key(m: Any, key: str) -> PatchError:
    return PatchError(f"map: {m} does not contain declared merge key: {key}")


def find(items: list[Any], key: str, value: Any) -> int:
    """Index of the first object whose ``key`` equals ``value`` (-1); every item must be an object."""
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise PatchError(f"value for key {i} is not a map")
        if key in item and eq(item[key], value):
            return i
    return -1


def element_kind(*lists: list[Any]) -> str:
    """The one Go type of every element of the lists."""
    kind = ""
    for items in lists:
        for item in items:
            current = go_type(item)
            if current == "nil":
                raise PatchError("a list element is null")
            if not kind:
                kind = current
                if kind == SLICE:
                    raise PatchError("lists of lists are not supported")
            elif kind != current:
                raise PatchError(f"list element types are not identical: {list(lists)}")
    if not kind:
        raise PatchError("no elements in any of the given slices")
    return kind


def dedupe_in_place(s: list[Any], length: int) -> int:
    """Go's in-place deduplication of ``s[:length]``: a duplicate is overwritten by the last element
    (so the order changes); returns the new length. ``s`` beyond it keeps what was there."""
    last = length - 1
    i = 0
    while i < last:
        j = i + 1
        while j <= last:
            if eq(s[i], s[j]):
                s[j] = s[last]
                last -= 1
                j -= 1
            j += 1
        i += 1
    return last + 1


def partition(merged: list[Any], by: list[Any], key: str) -> tuple[list[Any], list[Any]]:
    """(items of ``merged`` present in ``by``, the others), each in ``merged`` order."""
    present: list[Any] = []
    others: list[Any] = []
    for item in merged:
        if not key:
            found = any(eq(item, b) for b in by)
        else:
            if not isinstance(item, dict):
                raise bad_arg(MAP, item)
            if key not in item:
                raise no_merge_key(item, key)
            found = find(by, key, item[key]) >= 0
        (present if found else others).append(item)
    return present, others


def _index(items: list[Any], value: Any, key: str, kind: str) -> int:
    def get(item: Any) -> Any:
        if kind != MAP:
            return item
        return item.get(key) if isinstance(item, dict) else None

    wanted = get(value)
    return next((i for i, item in enumerate(items) if eq(wanted, get(item))), -1)


def normalize_order(
    patch: list[Any],
    server_only: list[Any],
    patch_order: list[Any],
    server_order: list[Any],
    key: str,
    kind: str,
) -> list[Any]:
    """Patch items sorted by ``patch_order``, server-only items by ``server_order``, then interleaved."""
    patch = _sort_by(patch, patch_order, key, kind)
    server_only = _sort_by(server_only, server_order, key, kind)
    return _merge_sorted(server_only, patch, server_order, key, kind)


def _sort_by(items: list[Any], order: list[Any], key: str, kind: str) -> list[Any]:
    deleted: list[Any] = []
    if kind == MAP:
        for item in [*items, *order]:
            if not isinstance(item, dict):
                raise bad_arg(MAP, item)
            if key not in item:
                raise no_merge_key(item, key)
        deleted = [i for i in items if i.get(DIRECTIVE) == "delete"]
        items = [i for i in items if i.get(DIRECTIVE) != "delete"]
    positions = [_index(order, item, key, kind) for item in items]
    if all(p >= 0 for p in positions):
        ranked = sorted(range(len(items)), key=lambda i: positions[i])
        return [items[i] for i in ranked] + deleted

    # Go's sort.SliceStable with a comparator that says "less" whenever an item is not in ``order``:
    # its insertion sort, which is what Go runs on lists of up to 20 items.
    def less(a: int, b: int) -> bool:
        return not (positions[a] >= 0 and positions[b] >= 0) or positions[a] < positions[b]

    ranks = list(range(len(items)))
    for i in range(1, len(ranks)):
        j = i
        while j > 0 and less(ranks[j], ranks[j - 1]):
            ranks[j], ranks[j - 1] = ranks[j - 1], ranks[j]
            j -= 1
    return [items[i] for i in ranks] + deleted


def _merge_sorted(left: list[Any], right: list[Any], order: list[Any], key: str, kind: str) -> list[Any]:
    """Insert the server-only items (``left``) among the patch items (``right``) by the live order."""
    out: list[Any] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if i >= len(left):
            out.append(right[j])
            j += 1
        elif j >= len(right):
            out.append(left[i])
            i += 1
        else:
            li, ri = _index(order, left[i], key, kind), _index(order, right[j], key, kind)
            if li >= 0 and ri >= 0 and li < ri:
                out.append(left[i])
                i += 1
            else:
                out.append(right[j])
                j += 1
    return out


def go_cap(length: int) -> int:
    """The capacity of a slice ``encoding/json`` decoded with ``length`` elements (appended one by one
    to an empty slice: powers of two up to 256; beyond that Go's 1.25x growth, without the allocator's
    size-class rounding)."""
    cap = 0
    while cap < length:
        cap = max(cap * 2, 1) if cap < 256 else cap + (cap + 768) // 4
    return cap


def aliased_view(original: list[Any], patch: list[Any], key: str) -> list[Any]:
    """``original`` as Go reads it after merging ``patch`` into it (a merge-strategy list, merge done
    without error): deletions shift the live list left inside its backing array and appended items
    land in its spare capacity, so the old slice header sees them."""
    length = len(original)
    backing = [*original, *([None] * (go_cap(length) - length))]
    if not original and not patch:
        return original
    if element_kind(original, patch) != MAP:
        total = length + len(patch)
        if total <= len(backing):  # append(original, patch...) reuses the array, dedupe writes in it
            backing[length:total] = patch
            dedupe_in_place(backing, total)
        return backing[: len(original)]
    replaced = False
    plain: list[Any] = []
    for item in patch:
        if DIRECTIVE not in item:
            plain.append(item)
        elif item[DIRECTIVE] == "delete":
            while (index := find(backing[:length], key, item[key])) >= 0:
                backing[index : length - 1] = backing[index + 1 : length]
                length -= 1
        elif item[DIRECTIVE] == "replace":
            replaced = True
    for item in [] if replaced else plain:
        if find(backing[:length], key, item[key]) >= 0:
            continue  # merged in place: same merge key, same place
        if length == len(backing):
            break  # the append reallocates: the rest goes to a new array
        backing[length] = item
        length += 1
    return backing[: len(original)]
