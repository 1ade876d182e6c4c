"""PreFilterExtensions' one mechanism for plugins whose PreFilter state counts pods: `add_pod` and
`remove_pod` find that state in the (cloned) cycle state and let it count the pod in or out on the node
(docs/rules/scheduler-preemption.md#filters-on-one-node). Without the state the call is an ERROR status
naming the key, in the plugin's own wording.
Imports: standard library, scheduler.framework.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Pod
from scheduler.framework.snapshot import NodeInfo
from scheduler.framework.status import Status


class CountsPods(Protocol):
    def update_with_pod(self, pod: Pod, node: Any, delta: int) -> None: ...


S = TypeVar("S", bound=CountsPods)


def update_with_pod(
    state: CycleState,
    key: str,
    kind: type[S],
    plugin: str,
    missing: str,
    pod: Pod,
    info: NodeInfo,
    delta: int,
) -> Status:
    """`delta` (+1 added, -1 removed) of `pod` on `info`'s node in the state of type `kind` under `key`;
    `missing` is the plugin's message when there is none."""
    found = state.get(key)
    if not isinstance(found, kind):
        return Status.error(missing, plugin=plugin)
    found.update_with_pod(pod, info.node, delta)
    return Status.success()
