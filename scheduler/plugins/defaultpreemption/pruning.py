"""Nodes where preemption cannot help, found for all nodes in one numpy pass before the dry run
(docs/rules/scheduler-preemption.md#pruning).

`select_victims_on_node` removes every pod of lower priority than the preemptor from a copy of the node
and runs the profile's filters, the nominated pods of at least the preemptor's priority added (they
only add usage); it returns None when there is no such pod or the filters reject the node. So a node
is hopeless, and the victim search would return None there, when
- no pod on it has a lower priority (counted by `FreeableView`, scheduler.plugins.defaultpreemption
  .freeable), or, with NodeResourcesFit among the profile's filters,
- ``pod_count - lower_pods + 1 > allocatable pods`` (Fit's ``Too many pods``), or
- for a resource Fit checks for this pod (its PreFilter state: ``ignoredResources`` and
  ``ignoredResourceGroups`` already applied), ``allocatable < request + (requested - freeable)``.
`freeable` may over-count (never under-count), which only prunes less. The arithmetic is the Filter's
int64 over the snapshot's matrices.
Imports: numpy, scheduler.framework, scheduler.plugins (noderesources, defaultpreemption.freeable).
"""

from __future__ import annotations

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import BoolArray, IntArray, Pod
from scheduler.framework.nominated import priority
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.defaultpreemption.freeable import VIEW_KEY, FreeableView
from scheduler.plugins.noderesources import PRE_FILTER_KEY, NodeResourcesFit, PreFilterState, fit_failures


def freeable_view(snapshot: Snapshot) -> FreeableView:
    """The snapshot's `FreeableView`, made and built on first use, kept current by the snapshot."""
    return snapshot.view(VIEW_KEY, FreeableView)


def fit_checks(fw: Framework, state: CycleState) -> tuple[tuple[str, int], ...] | None:
    """The resources NodeResourcesFit checks for the pod and its request of each, from its PreFilter
    state in `state`; None when Fit is not among the profile's filters or its PreFilter did not run."""
    if not any(isinstance(p, NodeResourcesFit) for p in fw.filters):
        return None
    s = state.get(PRE_FILTER_KEY)
    return s.checked if isinstance(s, PreFilterState) else None


def hopeless(fw: Framework, state: CycleState, pod: Pod, snapshot: Snapshot) -> BoolArray:
    """Per row: True where the victim search would return None whatever the victims (see the module
    docstring). `state` holds the profile's PreFilter data for `pod` (`pre_filter_state`)."""
    view = freeable_view(snapshot)
    free = view.freeable(priority(pod))
    lower = free[view.count_row]
    out: BoolArray = lower == 0
    if not any(isinstance(p, NodeResourcesFit) for p in fw.filters):
        return out
    alloc, requested, col = snapshot.allocatable, snapshot.requested, snapshot.col
    pods = col.get("pods")
    pods_alloc = alloc[pods] if pods is not None else np.zeros(snapshot.n, np.int64)
    checked = fit_checks(fw, state)

    def after(r: str) -> IntArray:  # the node's requests without its lower-priority pods
        j_free = view.col.get(r)
        row: IntArray = requested[col[r]]
        return row - free[j_free] if j_free is not None else row

    # Fit's rule on every node without its lower-priority pods (Fit's PreFilter did not run: the pod
    # count only)
    found = fit_failures(
        checked or (), snapshot.n, lambda r: alloc[col[r]] if r in col else None, after,
        snapshot.pod_count - lower, pods_alloc,
    )  # fmt: skip
    for _, failed in found:
        out |= failed
    return out


def walk(rows: IntArray, offset: int, pruned: BoolArray | None) -> list[int]:
    """The dry run's walk over `rows` from `offset`, wrapping round, with the pruned rows left out:
    the same nodes in the same order as the unpruned walk, less those whose search returns None."""
    order = np.concatenate((rows[offset:], rows[:offset]))
    if pruned is not None:
        order = order[~pruned[order]]
    return order.tolist()  # type: ignore[no-any-return]
