"""A heap of items addressable by key, for the scheduling queue's activeQ and backoffQ (scheduler.queue):
push replaces an item with the same key, removal is lazy (tombstoned entries, compacted when they
outnumber the live ones). Items expose their key as `.key`.
Imports: the standard library only.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar


class Keyed(Protocol):
    @property
    def key(self) -> str: ...


T = TypeVar("T", bound=Keyed)


class KeyedHeap(Generic[T]):
    """A heap of T addressable by pod key; removal is lazy (tombstoned entries)."""

    def __init__(self, sort_key: Callable[[T], tuple[float, ...]]) -> None:
        self._sort_key = sort_key
        self._heap: list[list[Any]] = []  # [sort key, seq, info, alive]
        self._entries: dict[str, list[Any]] = {}
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def get(self, key: str) -> T | None:
        entry = self._entries.get(key)
        return None if entry is None else entry[2]

    def push(self, info: T) -> None:
        self.remove(info.key)
        entry = [self._sort_key(info), next(self._seq), info, True]
        self._entries[info.key] = entry
        heapq.heappush(self._heap, entry)

    def remove(self, key: str) -> T | None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        entry[3] = False
        if len(self._heap) > 64 and len(self._heap) > 2 * len(self._entries):
            self._heap = [e for e in self._heap if e[3]]
            heapq.heapify(self._heap)
        return entry[2]  # type: ignore[no-any-return]

    def peek(self) -> T | None:
        while self._heap and not self._heap[0][3]:
            heapq.heappop(self._heap)
        return self._heap[0][2] if self._heap else None

    def pop(self) -> T | None:
        info = self.peek()
        if info is not None:
            heapq.heappop(self._heap)
            del self._entries[info.key]
        return info

    def values(self) -> list[T]:
        return [e[2] for e in self._entries.values()]
