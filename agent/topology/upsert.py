"""Writing one of this node's objects only when it differs (docs/rules/koordlet-topology.md#reporting,
docs/rules/koordlet-gpu.md#reporting): with no object known, create it — an ``AlreadyExists`` answer (409)
means another writer or our own earlier write the watch has not shown yet, so read it back — then
merge-patch it when it differs from what is wanted. The NodeResourceTopology and Device reporters share it.
The calls are injected (the gateway's); their errors propagate. Imports: standard library.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["upsert"]

Obj = Mapping[str, Any]


def upsert(
    current: Obj | None,
    *,
    create: Callable[[], Obj],
    read: Callable[[], Obj | None],
    changed: Callable[[Obj], bool],
    patch: Callable[[Obj], Obj],
) -> tuple[str, Obj]:
    """``("created" | "updated" | "unchanged", the object as written or as found)``. ``patch(current)``
    writes the difference from ``current``."""
    if current is None:
        try:
            return "created", create()
        except Exception as e:
            if getattr(e, "status", None) != 409:
                raise
            current = read()
            if current is None:
                raise
    if not changed(current):
        return "unchanged", current
    return "updated", patch(current)
