"""NodeUnschedulable filter: a node with ``spec.unschedulable: true`` (cordoned) rejects every pod that
does not tolerate the taint ``node.kubernetes.io/unschedulable:NoSchedule``, as Kubernetes'
``nodeunschedulable`` plugin does (code UNSCHEDULABLE_AND_UNRESOLVABLE, reason
``node(s) were unschedulable``).

The all-nodes form keeps a boolean "cordoned" column aligned to the snapshot rows and its count (no
cordoned row: every row passes without a mask); a row is re-read when the snapshot layout or the row's
generation changes (found by the shared ``resourcemath.RowWatch``).
Imports: numpy, scheduler.framework, scheduler.plugins.tainttoleration (toleration matching),
scheduler.plugins.resourcemath (RowWatch).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import BoolArray, FilterResult, Pod
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.resourcemath import RowWatch, watch
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
        self._watch: RowWatch | None = None  # the snapshot's, when the column was synced
        self._epoch = 0  # the RowWatch epoch the column was synced at
        self._cordoned: BoolArray = np.zeros(0, np.bool_)
        self._count = 0  # cordoned rows

    @property
    def name(self) -> str:
        return NAME

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> Status:
        if node_unschedulable(snapshot.infos[i].node) and not tolerates_unschedulable(pod):
            return self._status
        return Status.success()

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        cordoned = self._column(snapshot)
        if not self._count or tolerates_unschedulable(pod):  # no row is cordoned, or none rejects
            return FilterResult.all_pass(snapshot.n)
        return FilterResult.from_mask(cordoned, self._status)

    def _column(self, snapshot: Snapshot) -> BoolArray:
        """The cordoned flag of every row, re-reading only rows whose generation moved."""
        w = watch(snapshot, self._watch)
        rows = w.since(self._epoch) if w is self._watch else None
        self._watch, self._epoch = w, w.epoch
        if rows is None:
            self._cordoned = np.fromiter(
                (node_unschedulable(info.node) for info in snapshot.infos), np.bool_, snapshot.n
            )
            self._count = int(np.count_nonzero(self._cordoned))
            return self._cordoned
        for i in rows:
            flag = node_unschedulable(snapshot.infos[i].node)
            if flag != self._cordoned.item(i):
                self._cordoned[i] = flag
                self._count += 1 if flag else -1
        return self._cordoned
