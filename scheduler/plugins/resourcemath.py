"""Resource arithmetic of Kubernetes' noderesources plugin, as pure functions: which resources the
Filter checks and in which reason order, which are extended (the only ones ``ignoredResources`` and
``ignoredResourceGroups`` can skip), and Go's truncating int64 division over arrays
(docs/rules/scheduler.md#noderesourcesfit, docs/rules/scheduler-basic.md#noderesources-plugin-args). The
non-zero requests the Score uses are the snapshot's (scheduler.framework.nonzero).
Imports: numpy, apis.labelselector, scheduler.framework.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from apis.labelselector import is_qualified_name
from scheduler.framework.interfaces import IntArray

SCORE_WEIGHTS: Final = (("cpu", 1), ("memory", 1))
_BASE_ORDER: Final = ("cpu", "memory", "ephemeral-storage")


def is_checked_resource(name: str) -> bool:
    """cpu, memory, ephemeral-storage, or a scalar resource (``IsScalarResourceName``)."""
    if name in _BASE_ORDER or name.startswith(("hugepages-", "attachable-volumes-")):
        return True
    if "kubernetes.io/" in name:
        return True
    return "/" in name and not name.startswith("requests.") and is_qualified_name("requests." + name)


def is_scalar_resource(name: str) -> bool:
    """``IsScalarResourceName``: extended, hugepages, ``kubernetes.io/``-prefixed or attachable volumes."""
    return name not in _BASE_ORDER and is_checked_resource(name)


def is_extended_resource(name: str) -> bool:
    """``IsExtendedResourceName``: ``domain/name`` outside ``kubernetes.io/`` whose quota name
    ``requests.<name>`` is a qualified name."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return is_qualified_name("requests." + name)


def reason_order(name: str) -> tuple[int, str]:
    return (_BASE_ORDER.index(name), "") if name in _BASE_ORDER else (len(_BASE_ORDER), name)


def go_div_all(a: IntArray, b: IntArray | int) -> IntArray:
    """Go's int64 ``a / b`` element-wise: truncates toward zero, and ``MinInt64 / -1`` wraps to
    ``MinInt64`` as Go's does (the only quotient that overflows, so the warning is silenced only where
    a divisor is -1). A floor quotient below zero that is not exact is one less than the truncated one
    (``q * b`` cannot wrap to ``a`` unless equal: they differ by less than ``|b|``); quotients that are
    not negative need no correction."""
    if b == -1 if isinstance(b, int) else np.count_nonzero(b == -1):
        with np.errstate(over="ignore"):
            q: IntArray = np.floor_divide(a, b)
    else:
        q = np.floor_divide(a, b)
    negative = q < 0
    if np.count_nonzero(negative):  # (a count is the cheapest "any" numpy has)
        q += negative & (q * b != a)
    return q


# Memos keyed by ``apis.pod.resources_key`` (every input of the pod's requests, so never stale).
MEMO_LIMIT: Final = 4096


def allocation_score(most_allocated: bool, requested: int, capacity: int) -> int:
    """One resource's score as Koordinator's scorers compute it (NodeNUMAResource, DeviceShare; the
    Kubernetes 1.22+ forms): MostAllocated ``min(requested, capacity) * 100 / capacity``, LeastAllocated
    ``(capacity - requested) * 100 / capacity`` or 0 when over capacity; 0 for a zero capacity.
    (kube-scheduler 1.20's NodeResources scores, vectorised, are scheduler.plugins.noderesources_scoring.)"""
    if capacity == 0:
        return 0
    if most_allocated:
        return min(requested, capacity) * 100 // capacity
    if requested > capacity:
        return 0
    return (capacity - requested) * 100 // capacity
