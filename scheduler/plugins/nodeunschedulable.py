"""NodeUnschedulable filter: a node with ``spec.unschedulable: true`` (cordoned) rejects every pod that
does not tolerate the taint ``node.kubernetes.io/unschedulable:NoSchedule``, as Kubernetes'
``nodeunschedulable`` plugin does (code UNSCHEDULABLE_AND_UNRESOLVABLE, reason
``node(s) were unschedulable``). Vectorised over a snapshot column of the cordoned flag.
Imports: numpy, apis.jsonfields, scheduler.framework, scheduler.plugins.tainttoleration (toleration matching).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import numpy as np

from apis.jsonfields import as_mapping
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterResult, Pod
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.tainttoleration import toleration_tolerates

NAME: Final = "NodeUnschedulable"
ERR_REASON_UNSCHEDULABLE: Final = "node(s) were unschedulable"
TAINT_NODE_UNSCHEDULABLE: Final = "node.kubernetes.io/unschedulable"
EFFECT_NO_SCHEDULE: Final = "NoSchedule"


def tolerates_unschedulable(pod: Pod) -> bool:
    """Whether any of the pod's tolerations tolerates ``node.kubernetes.io/unschedulable:NoSchedule``."""
    tolerations = as_mapping(pod.get("spec")).get("tolerations")
    if not isinstance(tolerations, list):
        return False
    return any(
        isinstance(t, Mapping) and toleration_tolerates(t, (TAINT_NODE_UNSCHEDULABLE, "", EFFECT_NO_SCHEDULE))
        for t in tolerations
    )


def node_unschedulable(node: Mapping[str, Any]) -> bool:
    return as_mapping(node.get("spec")).get("unschedulable") is True


class NodeUnschedulable:
    """Filter plugin; see the module docstring."""

    def __init__(self) -> None:
        self._status = Status.unresolvable(ERR_REASON_UNSCHEDULABLE, plugin=NAME)

    @property
    def name(self) -> str:
        return NAME

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        cordoned = snapshot.column((NAME, "cordoned"), node_unschedulable, np.bool_)
        if tolerates_unschedulable(pod) or not np.count_nonzero(cordoned):
            return FilterResult.all_pass(snapshot.n)
        return FilterResult.from_mask(cordoned, self._status)
