"""A snapshot view holding one value per row derived from the row's Node object (`Snapshot.column`):
re-derived for the rows whose Node object was replaced, moved with the rows when nodes join or leave.
Imports: numpy, apis.kubeobjects, scheduler.framework (rows; snapshot for types only).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from apis.kubeobjects import Node
from scheduler.framework.rows import RowChange

if TYPE_CHECKING:
    from scheduler.framework.snapshot import Snapshot


class NodeColumn:
    """One value per row, `fn(Node object)`, in a numpy array of `dtype`."""

    reads_pods = False

    def __init__(self, fn: Callable[[Node], Any], dtype: type[Any]) -> None:
        self.fn = fn
        self.dtype = dtype
        self.values: npt.NDArray[Any] = np.zeros(0, dtype)

    def rebuild(self, snapshot: Snapshot) -> None:
        self.values = np.fromiter((self.fn(info.node) for info in snapshot.infos), self.dtype, snapshot.n)

    def refresh(self, snapshot: Snapshot, rows: Sequence[int]) -> None:
        for i in rows:
            self.values[i] = self.fn(snapshot.infos[i].node)

    def resize(self, snapshot: Snapshot, change: RowChange) -> None:
        self.values = change.array(self.values)
