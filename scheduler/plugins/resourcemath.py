"""Resource arithmetic of Kubernetes' noderesources plugin, as pure functions: which resources the
Filter checks and in which reason order, the non-zero requests the Score uses (100m cpu / 200Mi memory
for containers without requests, memoised on the pod's resources), Go's truncating division and the
least-requested score; and ``RowWatch``, the per-snapshot record of which rows' generation moved,
shared by the plugins that keep row-aligned caches (noderesources, nodeunschedulable, tainttoleration).
Imports: numpy, apis (pod, quantity), scheduler.framework.
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable, Mapping
from typing import Any, Final, TypeGuard

import numpy as np

from apis.gonum import go_div
from apis.labelselector import is_qualified_name
from apis.pod import containers, init_containers, pod_requests, resources_key, spec
from scheduler.framework.interfaces import IntArray
from scheduler.framework.snapshot import Snapshot, to_values
from scheduler.framework.status import MAX_NODE_SCORE

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


def wrap64(x: int) -> int:
    """``x`` wrapped to int64 as numpy's int64 arithmetic wraps it."""
    return x if -(2**63) <= x < 2**63 else (x + 2**63) % 2**64 - 2**63


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


def least_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return go_div((capacity - requested) * MAX_NODE_SCORE, capacity)


# --- shared row-change watch -----------------------------------------------------------------------
WATCH_LOG: Final = 512  # polls remembered (at least); a poll that moves more rows than this resets


class RowWatch:
    """Which rows of one snapshot had their ``generation`` change, numbered by polls ("epochs"), shared
    by every plugin that keeps row-aligned caches: a poll costs one byte comparison of the generation
    array with its last copy (equal bytes are equal int64 values, so nothing is missed, and a
    generation that goes back counts as a change); only a poll that finds a difference compares
    element-wise. A new layout or row count, or a burst of changes, resets it (``base``)."""

    __slots__ = ("__weakref__", "base", "ends", "epoch", "first", "flat", "gen", "layout", "moved", "snap")

    def __init__(self, snapshot: Snapshot) -> None:
        self.snap = weakref.ref(snapshot)
        self.layout = snapshot.layout
        self.gen = snapshot.generation.tobytes()
        self.moved = np.zeros(snapshot.n, np.bool_)  # scratch
        self.epoch = 0
        self.base = 0  # a plugin synced before this epoch must re-read every row
        # The rows moved at epochs first, first + 1, ... (oldest first, repeats kept) and, per epoch,
        # the length of ``flat`` after it; epochs are consecutive since every poll that moves the
        # epoch either records its rows or resets.
        self.flat: list[int] = []
        self.ends: list[int] = []
        self.first = 1

    def poll(self, snapshot: Snapshot) -> None:
        cur = snapshot.generation.tobytes()
        if cur == self.gen and snapshot.layout == self.layout:
            return
        self.epoch += 1
        if snapshot.layout != self.layout or len(cur) != len(self.gen):
            rows = None
            self.moved = np.zeros(snapshot.n, np.bool_)
        else:
            moved = np.not_equal(snapshot.generation, np.frombuffer(self.gen, np.int64), out=self.moved)
            rows = moved.nonzero()[0].tolist()
        self.layout, self.gen = snapshot.layout, cur
        if rows is None or len(rows) > WATCH_LOG or len(self.flat) > 64 * WATCH_LOG:
            self.base, self.first = self.epoch, self.epoch + 1
            self.flat, self.ends = [], []
            return
        self.flat.extend(rows)
        self.ends.append(len(self.flat))
        if len(self.ends) > 2 * WATCH_LOG:  # forget the oldest WATCH_LOG epochs
            cut = self.ends[WATCH_LOG - 1]
            self.flat = self.flat[cut:]
            self.ends = [e - cut for e in self.ends[WATCH_LOG:]]
            self.first += WATCH_LOG

    def since(self, epoch: int) -> list[int] | None:
        """The rows moved after ``epoch`` (ascending), None when unknown (re-read every row)."""
        if epoch == self.epoch:
            return []
        if epoch < self.base or epoch > self.epoch or epoch < self.first - 1:
            return None
        start = self.ends[epoch - self.first] if epoch >= self.first else 0
        return sorted(set(self.flat[start:]))


_watches: weakref.WeakKeyDictionary[Snapshot, RowWatch] = weakref.WeakKeyDictionary()


def watch(snapshot: Snapshot, last: RowWatch | None = None) -> RowWatch:
    """The snapshot's RowWatch (``last`` when it is the snapshot's: skips the lookup), polled. One
    RowWatch per live snapshot, so a plugin that kept the RowWatch it synced with (not the snapshot)
    knows it sees the same snapshot when ``watch`` returns that object."""
    w = last if last is not None and last.snap() is snapshot else _watches.get(snapshot)
    if w is None:
        w = _watches[snapshot] = RowWatch(snapshot)
    else:
        w.poll(snapshot)
    return w
