"""NodeUnschedulable filter: a node with ``spec.unschedulable: true`` (cordoned) rejects every pod that
does not tolerate the taint ``node.kubernetes.io/unschedulable:NoSchedule``, as Kubernetes'
``nodeunschedulable`` plugin does (code UNSCHEDULABLE_AND_UNRESOLVABLE, reason
``node(s) were unschedulable``).

The all-nodes form keeps a boolean "cordoned" column aligned to the snapshot rows and its count (no
cordoned row: every row passes without a mask); a row is re-read when the snapshot layout or the row's
generation changes.
Imports: numpy, scheduler.framework, scheduler.plugins.tainttoleration (toleration matching).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import BoolArray, FilterResult, Pod
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.tainttoleration import toleration_tolerates

NAME: Final = "NodeUnschedulable"
ERR_REASON_UNSCHEDULABLE: Final = "node(s) were unschedulable"
TAINT_NODE_UNSCHEDULABLE: Final = "node.kubernetes.io/unschedulable"
EFFECT_NO_SCHEDULE: Final = "NoSchedule"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def tolerates_unschedulable(pod: Pod) -> bool:
    """Whether any of the pod's tolerations tolerates ``node.kubernetes.io/unschedulable:NoSchedule``."""
    tolerations = _mapping(pod.get("spec")).get("tolerations")
    if not isinstance(tolerations, list):
        return False
    return any(
        isinstance(t, Mapping) and toleration_tolerates(t, (TAINT_NODE_UNSCHEDULABLE, "", EFFECT_NO_SCHEDULE))
        for t in tolerations
    )


def node_unschedulable(node: Mapping[str, Any]) -> bool:
    return _mapping(node.get("spec")).get("unschedulable") is True


class NodeUnschedulable:
    """Filter plugin; see the module docstring."""

    def __init__(self) -> None:
        self._status = Status.unresolvable(ERR_REASON_UNSCHEDULABLE, plugin=NAME)
        self._snap: weakref.ref[Snapshot] | None = None
        self._layout = -1
        self._gen: npt.NDArray[np.int64] = np.zeros(0, np.int64)
        self._cordoned: BoolArray = np.zeros(0, np.bool_)
        self._count = 0  # cordoned rows
        self._moved: BoolArray = np.zeros(0, np.bool_)  # scratch: rows whose generation moved

    @property
    def name(self) -> str:
        return NAME

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> Status:
        if node_unschedulable(snapshot.infos[i].node) and not tolerates_unschedulable(pod):
            return self._status
        return Status.success()

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        if tolerates_unschedulable(pod):
            return FilterResult.all_pass(snapshot.n)
        cordoned = self._column(snapshot)
        if not self._count:  # no row is cordoned: the mask would be all false
            return FilterResult.all_pass(snapshot.n)
        return FilterResult.from_mask(cordoned, self._status)

    def _column(self, snapshot: Snapshot) -> BoolArray:
        """The cordoned flag of every row, re-reading only rows whose generation moved."""
        same = self._snap is not None and self._snap() is snapshot and self._layout == snapshot.layout
        if not same or len(self._gen) != snapshot.n:
            self._snap = weakref.ref(snapshot)
            self._layout = snapshot.layout
            self._gen = snapshot.generation.copy()
            self._moved = np.zeros(snapshot.n, np.bool_)
            self._cordoned = np.fromiter(
                (node_unschedulable(info.node) for info in snapshot.infos), np.bool_, snapshot.n
            )
            self._count = int(np.count_nonzero(self._cordoned))
            return self._cordoned
        moved = np.not_equal(self._gen, snapshot.generation, out=self._moved)
        if not moved.any():
            return self._cordoned
        for i in np.flatnonzero(moved).tolist():
            self._gen[i] = snapshot.generation[i]
            flag = node_unschedulable(snapshot.infos[i].node)
            if flag != bool(self._cordoned[i]):
                self._cordoned[i] = flag
                self._count += 1 if flag else -1
        return self._cordoned
