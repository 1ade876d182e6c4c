"""Resource arithmetic of Kubernetes' noderesources plugin, as pure functions: which resources the
Filter checks and in which reason order, the non-zero requests the Score uses (100m cpu / 200Mi memory
for containers without requests, memoised on the pod's resources) and Go's truncating int64 division
over arrays (docs/rules/scheduler.md#noderesourcesfit).
Imports: numpy, apis (labelselector, pod), scheduler.framework.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Final, TypeGuard

import numpy as np

from apis.labelselector import is_qualified_name
from apis.pod import containers, init_containers, pod_requests, resources_key, spec
from scheduler.framework.interfaces import IntArray
from scheduler.framework.snapshot import to_values

DEFAULT_MILLI_CPU_REQUEST: Final = 100
DEFAULT_MEMORY_REQUEST: Final = 200 * 1024 * 1024
SCORE_WEIGHTS: Final = (("cpu", 1), ("memory", 1))
_BASE_ORDER: Final = ("cpu", "memory", "ephemeral-storage")


def is_checked_resource(name: str) -> bool:
    """cpu, memory, ephemeral-storage, or a scalar resource (``IsScalarResourceName``)."""
    if name in _BASE_ORDER or name.startswith(("hugepages-", "attachable-volumes-")):
        return True
    if "kubernetes.io/" in name:
        return True
    return "/" in name and not name.startswith("requests.") and is_qualified_name("requests." + name)


def reason_order(name: str) -> tuple[int, str]:
    return (_BASE_ORDER.index(name), "") if name in _BASE_ORDER else (len(_BASE_ORDER), name)


def go_div_all(a: IntArray, b: IntArray | int) -> IntArray:
    """Go's int64 ``a / b`` element-wise: truncates toward zero, and ``MinInt64 / -1`` wraps to
    ``MinInt64`` as Go's does. A floor quotient below zero that is not exact is one less than the
    truncated one (``q * b`` cannot wrap to ``a`` unless equal: they differ by less than ``|b|``);
    quotients that are not negative need no correction."""
    with np.errstate(over="ignore"):
        q: IntArray = np.floor_divide(a, b)
    negative = q < 0
    if negative.any():
        q += negative & (q * b != a)
    return q


def with_default_requests(c: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a container whose requests name cpu and memory (the non-zero defaults when absent)."""
    res = c.get("resources")
    res = dict(res) if isinstance(res, Mapping) else {}
    req = res.get("requests")
    req = dict(req) if isinstance(req, Mapping) else {}
    req.setdefault("cpu", f"{DEFAULT_MILLI_CPU_REQUEST}m")
    req.setdefault("memory", str(DEFAULT_MEMORY_REQUEST))
    res["requests"] = req
    return {**c, "resources": res}


def _is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    return type(value) is dict or isinstance(value, Mapping)  # the JSON case first: ABC checks cost


def has_both_requests(c: Mapping[str, Any]) -> bool:
    res = c.get("resources")
    req = res.get("requests") if _is_mapping(res) else None
    return _is_mapping(req) and "cpu" in req and "memory" in req


def _all_name_both(pod: Mapping[str, Any]) -> bool:
    """``has_both_requests`` for every entry of ``containers(pod) + init_containers(pod)``."""
    sp = spec(pod)
    for field in ("containers", "initContainers"):
        cs = sp.get(field)
        if type(cs) is not list and not isinstance(cs, list | tuple):
            continue
        for c in cs:
            if _is_mapping(c) and not has_both_requests(c):
                return False
    return True


# Memos keyed by ``apis.pod.resources_key`` (every input of the pod's requests, so never stale).
MEMO_LIMIT: Final = 4096
_nonzero_memo: dict[Hashable, tuple[int, int]] = {}


def nonzero_requests(pod: Mapping[str, Any], requests: Mapping[str, int] | None = None) -> tuple[int, int]:
    """The pod's non-zero (cpu milli, memory) for scoring; ``requests`` (its ``pod_requests`` in
    snapshot units) is reused when every container names both resources. Otherwise memoised by
    ``apis.pod.resources_key`` (every input the computation reads)."""
    if requests is not None and _all_name_both(pod):
        return requests.get("cpu", 0), requests.get("memory", 0)
    key = resources_key(pod)
    if key is not None:
        hit = _nonzero_memo.get(key)
        if hit is not None:
            return hit
    spec = pod.get("spec")
    spec = dict(spec) if isinstance(spec, Mapping) else {}
    spec["containers"] = [with_default_requests(c) for c in containers(pod)]
    spec["initContainers"] = [with_default_requests(c) for c in init_containers(pod)]
    values = to_values(pod_requests({**pod, "spec": spec}))
    nz = values.get("cpu", 0), values.get("memory", 0)
    if key is not None:
        if len(_nonzero_memo) >= MEMO_LIMIT:
            _nonzero_memo.clear()
        _nonzero_memo[key] = nz
    return nz
