"""The scheduler's node list: which row of the snapshot holds which node, changed in place as nodes
join and leave (docs/scheduler-scale.md#node-list).

A node that leaves is replaced by the last row (swap-with-last); a node that joins is appended and
then swapped with a row drawn uniformly from [0, n] (the inside-out Fisher–Yates step), so the rows
are always a uniformly random permutation of the nodes: any window of rows is a uniform sample of
the nodes. Each step is O(1); `RowChange` tells the row-aligned data (the snapshot's matrices and
every plugin view) how the rows moved, so each follows in O(moves), not O(nodes).
Imports: the standard library, numpy.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class RowChange:
    """How a snapshot's rows moved when nodes were added or removed in place (no full rebuild).

    `take[i]` is the old row whose data new row i keeps, or -1 for a row that holds a new node
    (`added`, ascending; views get `refresh` for them after `resize`). `removed`: old rows whose node
    left (their data is dropped; views keeping aggregates over rows subtract them). `moves`: the
    (old, new) pairs of surviving rows whose index changed. `old_n`/`n`: row counts before/after."""

    take: I64
    removed: tuple[int, ...]
    moves: tuple[tuple[int, int], ...]
    added: tuple[int, ...]
    old_n: int
    n: int

    def array(self, arr: npt.NDArray[Any], fill: Any = 0) -> npt.NDArray[Any]:
        """`arr` (rows on its last axis) in the new layout, new rows holding `fill`. Written into
        `arr`'s own buffer when it has room for `n` rows (O(moved + new rows)): the result is then a
        view of that buffer and `arr` itself may have been overwritten, so only the array's owner may
        call this. Without room: one copy into a new buffer with spare rows past the end (amortised
        O(1) per row added)."""
        n = self.n
        buf = _buffer(arr)
        olds = [o for o, _ in self.moves]
        news = [w for _, w in self.moves]
        if buf is not None and buf.shape[-1] >= n:
            moved = buf[..., olds]  # a copy: every moved row is read before any is written
            out = buf[..., :n]
        else:
            spare = np.empty((*arr.shape[:-1], n + max(16, n // 8)), arr.dtype)
            out = spare[..., :n]
            keep = min(arr.shape[-1], n)
            out[..., :keep] = arr[..., :keep]
            moved = arr[..., olds]
        if news:
            out[..., news] = moved
        if self.added:
            out[..., list(self.added)] = fill
        return out

    def list(self, old: list[Any], fill: Any = None) -> None:
        """Moves `old`'s items to the new layout in place, O(moves + added + removed): every moved
        item is read before any is written, so chains of moves are safe. New rows hold `fill`."""
        moved = [(new, old[o]) for o, new in self.moves]
        if self.n < len(old):
            del old[self.n :]
        else:
            old.extend([fill] * (self.n - len(old)))
        for new, item in moved:
            old[new] = item
        for i in self.added:
            old[i] = fill


def reindex_rows(
    rows: list[Any], change: RowChange, index: Callable[[int, Any, bool], None], empty: Any
) -> None:
    """Moves an inverted index's per-row keys (`rows[i]`, indexed by `index(row, keys, add)`) to
    `change`'s layout: removed and moved rows are unindexed under their old row, moved ones indexed
    under their new one (O(their keys)); new rows hold `empty` until the owner refreshes them."""
    for old in change.removed:
        index(old, rows[old], False)
    for old, _ in change.moves:
        index(old, rows[old], False)
    for old, new in change.moves:
        index(new, rows[old], True)
    change.list(rows, empty)


def move_rows(
    names: list[str], index: dict[str, int], removed: Iterable[str], added: Sequence[str], rng: random.Random
) -> RowChange:
    """Removes then adds nodes to the row list `names` (and its inverse `index`) in place: a removed
    node's row takes the last row's node, an added node goes to a uniformly drawn row whose node moves
    to the end. Unknown removed names and already present added names are ignored. O(changes), plus
    one O(n) `take` array built in C."""
    old_n = len(names)
    held: dict[int, int] = {}  # row → the old row whose data it holds now (-1: a new node); default itself
    gone: list[int] = []
    for name in removed:
        i = index.pop(name, None)
        if i is None:
            continue
        gone.append(held.get(i, i))
        last = len(names) - 1
        if i != last:
            names[i] = names[last]
            index[names[i]] = i
            held[i] = held.get(last, last)
        names.pop()
        held.pop(last, None)
    for name in added:
        if name in index:
            continue
        n = len(names)
        names.append(name)
        index[name] = n
        held[n] = -1
        j = rng.randint(0, n)  # inclusive: the new node may stay last
        if j != n:
            names[j], names[n] = name, names[j]
            index[name], index[names[n]] = j, n
            held[j], held[n] = -1, held.get(j, j)
    n = len(names)
    take = np.arange(n, dtype=np.int64)
    if held:
        rows = np.fromiter(held.keys(), np.int64, len(held))
        take[rows] = np.fromiter(held.values(), np.int64, len(held))
    return RowChange(
        take,
        tuple(sorted(gone)),
        tuple(sorted((o, i) for i, o in held.items() if o >= 0 and o != i)),
        tuple(sorted(i for i, o in held.items() if o < 0)),
        old_n,
        n,
    )


def _buffer(arr: npt.NDArray[Any]) -> npt.NDArray[Any] | None:
    """The array owning `arr`'s memory when `arr` is a prefix of its rows (last axis) with every other
    axis whole, else None."""
    if arr.base is None:
        return arr if arr.flags.c_contiguous else None
    base = arr.base
    if (
        isinstance(base, np.ndarray)
        and base.base is None
        and base.flags.c_contiguous
        and base.dtype == arr.dtype
        and base.shape[:-1] == arr.shape[:-1]
        and base.strides == arr.strides
        and base.ctypes.data == arr.ctypes.data
    ):
        return base
    return None
