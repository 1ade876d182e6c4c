"""NodeName filter of kube-scheduler v1.20: a pod whose ``spec.nodeName`` is set fits only the node of
that name; every other node rejects it with UNSCHEDULABLE_AND_UNRESOLVABLE,
``node(s) didn't match the requested hostname`` (docs/rules/scheduler-basic.md#nodename). A pod
without ``spec.nodeName`` (absent, empty or not a string) fits every node.

Vectorised: one lookup of the name in the snapshot's index, one mask.
Imports: numpy, apis.jsonfields, scheduler.framework.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from apis.jsonfields import as_mapping
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterResult, Pod
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status

NAME: Final = "NodeName"
ERR_REASON: Final = "node(s) didn't match the requested hostname"


def requested_node(pod: Pod) -> str:
    """``spec.nodeName``, "" when absent or not a string."""
    name = as_mapping(pod.get("spec")).get("nodeName")
    return name if isinstance(name, str) else ""


class NodeName:
    """Filter plugin; see the module docstring."""

    def __init__(self) -> None:
        self._status = Status.unresolvable(ERR_REASON, plugin=NAME)

    @property
    def name(self) -> str:
        return NAME

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        wanted = requested_node(pod)
        if not wanted:
            return FilterResult.all_pass(snapshot.n)
        failed = np.ones(snapshot.n, np.bool_)
        i = snapshot.index.get(wanted)
        if i is not None:
            failed[i] = False
        return FilterResult.from_mask(failed, self._status)
