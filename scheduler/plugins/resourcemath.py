"""Resource arithmetic of Kubernetes' noderesources plugin, as pure functions: which resources the
Filter checks and in which reason order, the non-zero requests the Score uses (100m cpu / 200Mi memory
for containers without requests, memoised on the pod's resources), Go's truncating division and the
least-requested score. Used by scheduler.plugins.noderesources.
Imports: numpy, apis (pod, quantity), scheduler.framework.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from typing import Any, Final

import numpy as np

from apis.pod import containers, init_containers, pod_requests, resources_key
from scheduler.framework.interfaces import IntArray
from scheduler.framework.snapshot import to_values
from scheduler.framework.status import MAX_NODE_SCORE

DEFAULT_MILLI_CPU_REQUEST: Final = 100
DEFAULT_MEMORY_REQUEST: Final = 200 * 1024 * 1024
SCORE_WEIGHTS: Final = (("cpu", 1), ("memory", 1))
_BASE_ORDER: Final = ("cpu", "memory", "ephemeral-storage")

_NAME_RE: Final = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS1123_SUBDOMAIN_RE: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _qualified_name(s: str) -> bool:
    prefix, sep, name = s.rpartition("/")
    if sep and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN_RE.fullmatch(prefix)):
        return False
    return 0 < len(name) <= 63 and _NAME_RE.fullmatch(name) is not None


def is_checked_resource(name: str) -> bool:
    """cpu, memory, ephemeral-storage, or a scalar resource (``IsScalarResourceName``)."""
    if name in _BASE_ORDER or name.startswith(("hugepages-", "attachable-volumes-")):
        return True
    if "kubernetes.io/" in name:
        return True
    return "/" in name and not name.startswith("requests.") and _qualified_name("requests." + name)


def reason_order(name: str) -> tuple[int, str]:
    return (_BASE_ORDER.index(name), "") if name in _BASE_ORDER else (len(_BASE_ORDER), name)


def wrap64(x: int) -> int:
    """``x`` wrapped to int64 as numpy's int64 arithmetic wraps it."""
    return x if -(2**63) <= x < 2**63 else (x + 2**63) % 2**64 - 2**63


def go_div(a: int, b: int) -> int:
    """Go's integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def go_div_all(a: IntArray, b: IntArray) -> IntArray:
    q = np.abs(a) // np.abs(b)
    return np.where((a >= 0) == (b >= 0), q, -q)


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


def has_both_requests(c: Mapping[str, Any]) -> bool:
    res = c.get("resources")
    req = res.get("requests") if isinstance(res, Mapping) else None
    return isinstance(req, Mapping) and "cpu" in req and "memory" in req


# Memos keyed by ``apis.pod.resources_key`` (every input of the pod's requests, so never stale).
MEMO_LIMIT: Final = 4096
_nonzero_memo: dict[Hashable, tuple[int, int]] = {}


def nonzero_requests(pod: Mapping[str, Any], requests: Mapping[str, int] | None = None) -> tuple[int, int]:
    """The pod's non-zero (cpu milli, memory) for scoring; ``requests`` (its ``pod_requests`` in
    snapshot units) is reused when every container names both resources. Otherwise memoised by
    ``apis.pod.resources_key`` (every input the computation reads)."""
    if requests is not None and all(has_both_requests(c) for c in containers(pod) + init_containers(pod)):
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


def least_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return go_div((capacity - requested) * MAX_NODE_SCORE, capacity)
