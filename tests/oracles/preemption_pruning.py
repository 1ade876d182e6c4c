"""Oracle for preemption pruning (docs/rules/scheduler-preemption.md#pruning), node by node over the
snapshot's NodeInfos: what evicting every pod below a priority frees (brute-force sums of the pods'
requests), and whether a node is hopeless by the three rules written out plainly with Python ints."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.framework.nominated import priority
from scheduler.framework.snapshot import NodeInfo
from tests.oracles.plugins import i64


def freeable(info: NodeInfo, p: int) -> tuple[dict[str, int], int]:
    """The summed requests and the number of `info`'s pods with priority below `p`."""
    sums: dict[str, int] = {}
    count = 0
    for pi in info.pods.values():
        if priority(pi.pod) < p:
            count += 1
            for r, v in pi.requests.items():
                sums[r] = sums.get(r, 0) + v
    return sums, count


def hopeless(info: NodeInfo, p: int, checked: Sequence[tuple[str, int]] | None) -> bool:
    """Whether the victim search on `info` must fail for a pod of priority `p`: no lower-priority pod;
    or, with Fit in the profile (`checked`: the resources Fit checks and the pod's request of each),
    too many pods or too little of a checked resource even without every lower-priority pod."""
    sums, count = freeable(info, p)
    if count == 0:
        return True
    if checked is None:
        return False
    if len(info.pods) - count + 1 > info.allocatable.get("pods", 0):
        return True
    for r, v in checked:
        after = i64(info.requested.get(r, 0) - sums.get(r, 0))
        if info.allocatable.get(r, 0) < i64(v + after):
            return True
    return False
