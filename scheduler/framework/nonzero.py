"""A pod's non-zero requests (Kubernetes' ``GetNonzeroRequests``), which scoring uses in place of its
requests: a container (or init container) without a cpu request counts 100m, without a memory request
200Mi (an explicit 0 stays 0), aggregated like ``apis.pod.pod_requests`` (init containers and sidecars
maxed in, overhead added), in snapshot units. The snapshot keeps every node's sum (``NodeInfo.nonzero``,
Kubernetes' ``NonZeroRequested``), maintained as pods come and go (docs/rules/scheduler.md#noderesourcesfit).
Imports: apis (pod), scheduler.framework.units.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Final, TypeGuard

from apis.pod import containers, init_containers, pod_requests, resources_key, spec
from scheduler.framework.units import to_values

DEFAULT_MILLI_CPU_REQUEST: Final = 100
DEFAULT_MEMORY_REQUEST: Final = 200 * 1024 * 1024
MEMO_LIMIT: Final = 4096
# By ``apis.pod.resources_key`` (every input of the pod's requests, so never stale).
_memo: dict[Hashable, tuple[int, int]] = {}


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


def nonzero_requests(pod: Mapping[str, Any], requests: Mapping[str, int] | None = None) -> tuple[int, int]:
    """The pod's non-zero (cpu milli, memory); ``requests`` (its ``pod_requests`` in snapshot units) is
    reused when every container names both resources. Otherwise memoised by ``apis.pod.resources_key``."""
    if requests is not None and _all_name_both(pod):
        return requests.get("cpu", 0), requests.get("memory", 0)
    key = resources_key(pod)
    if key is not None:
        hit = _memo.get(key)
        if hit is not None:
            return hit
    sp = pod.get("spec")
    sp = dict(sp) if isinstance(sp, Mapping) else {}
    sp["containers"] = [with_default_requests(c) for c in containers(pod)]
    sp["initContainers"] = [with_default_requests(c) for c in init_containers(pod)]
    values = to_values(pod_requests({**pod, "spec": sp}))
    nz = values.get("cpu", 0), values.get("memory", 0)
    if key is not None:
        if len(_memo) >= MEMO_LIMIT:
            _memo.clear()
        _memo[key] = nz
    return nz
