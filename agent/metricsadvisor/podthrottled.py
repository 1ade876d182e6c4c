"""PodThrottledCollector (docs/rules/koordlet.md#collectors, 1 s): pod and container CFS throttle ratio from
``cpu.stat`` deltas, Δnr_throttled / Δnr_periods (0 when no period elapsed). The first observation only
primes; state of pods and containers that disappeared is forgotten; an unreadable cgroup is skipped. Reads
(nr_periods, nr_throttled) of every cgroup in one loop and decodes them in one call
(``agent.system.cgbatch``); the read order is rebuilt only when the pod set changes; the round is one
``SampleBatch`` of per-cgroup ``SeriesRef``s.

Imports: standard library, agent.podmeta, agent.system.{cgbatch,cgroup}, agent.metriccache.cache,
agent.metricsadvisor.framework.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from agent.metriccache.cache import SampleBatch, SeriesRef
from agent.metricsadvisor.framework import BaseCollector, CollectContext
from agent.podmeta import PodMeta
from agent.system import cgroup as cg
from agent.system.cgbatch import BatchDecoder, read_files

__all__ = ["PodThrottledCollector", "throttle_ratio"]


def throttle_ratio(last: cg.CpuStat, cur: cg.CpuStat) -> float:
    """Δnr_throttled / Δnr_periods; 0 when no period elapsed (or the counters went backwards)."""
    periods = cur.nr_periods - last.nr_periods
    if periods <= 0:
        return 0.0
    return (cur.nr_throttled - last.nr_throttled) / periods


class _Throttle:
    __slots__ = ("cgroup_dir", "last", "path", "ref")

    def __init__(self, ctx: CollectContext, cgroup_dir: str, kind: str, labels: Mapping[str, str]) -> None:
        self.cgroup_dir = cgroup_dir
        self.ref = SeriesRef(kind, labels)
        self.path = str(
            cg.cgroup_file_path(ctx.paths.cgroup_root, ctx.cgroup_version, cg.CPU_STAT, cgroup_dir)
        )
        self.last: tuple[int, int] | None = None  # (nr_periods, nr_throttled)


VECTORISE = True
"""Rounds where every file was read and parsed are computed in numpy (tests turn it off to compare)."""
_EXACT = 2**52  # counters up to this: differences and their float64 quotient are exactly Python's


class _Round:
    """The cgroups of one pod set in read order, with the last (nr_periods, nr_throttled) as arrays for the
    numpy round (``arrays``: the arrays, not the ``_Throttle`` objects, hold the latest state)."""

    __slots__ = ("arrays", "has_last", "key", "last", "paths", "refs", "states")

    def __init__(self, key: tuple[PodMeta, ...], states: list[_Throttle]) -> None:
        self.key, self.states = key, states
        self.paths = [s.path for s in states]
        self.refs = [s.ref for s in states]
        self.arrays = False
        self.has_last = np.zeros(0, dtype=bool)
        self.last = np.zeros((0, 2), dtype=np.int64)

    def from_objects(self) -> None:
        self.has_last = np.array([s.last is not None for s in self.states], dtype=bool)
        self.last = np.array([s.last or (0, 0) for s in self.states], dtype=np.int64).reshape(-1, 2)
        self.arrays = True

    def to_objects(self) -> None:
        if self.arrays:
            for state, last, known in zip(
                self.states, self.last.tolist(), self.has_last.tolist(), strict=True
            ):
                state.last = (last[0], last[1]) if known else None
            self.arrays = False


class PodThrottledCollector(BaseCollector):
    def __init__(self, interval_seconds: float = 1.0) -> None:
        super().__init__("pod_throttled", interval_seconds)
        self._pods: dict[str, _Throttle] = {}
        self._containers: dict[str, _Throttle] = {}
        self._order: _Round | None = None  # the round's cgroups, rebuilt only when the pod set changes
        self._decode: tuple[cg.CgroupVersion, BatchDecoder] | None = None

    def _round(self, ctx: CollectContext) -> _Round:
        key = tuple(ctx.pods.pods())
        if self._order is not None and self._order.key == key:
            return self._order
        if self._order is not None:
            self._order.to_objects()
        old_pods, old_containers = self._pods, self._containers
        self._pods, self._containers = {}, {}
        states: list[_Throttle] = []
        for pod in key:
            state = old_pods.get(pod.uid)
            if state is None or state.cgroup_dir != pod.cgroup_dir:
                state = _Throttle(ctx, pod.cgroup_dir, "pod_cpu_throttled", {"pod_uid": pod.uid})
            self._pods[pod.uid] = state
            states.append(state)
            for container in pod.containers:
                cid = container.container_id
                cs = old_containers.get(cid)
                if cs is None or cs.cgroup_dir != container.cgroup_dir:
                    cs = _Throttle(
                        ctx, container.cgroup_dir, "container_cpu_throttled", {"container_id": cid}
                    )
                self._containers[cid] = cs
                states.append(cs)
        self._order = _Round(key, states)
        return self._order

    def collect(self, ctx: CollectContext) -> SampleBatch:
        if self._decode is None or self._decode[0] is not ctx.cgroup_version:
            self._decode = (ctx.cgroup_version, BatchDecoder("throttle", ctx.cgroup_version))
        order = self._round(ctx)
        ts = ctx.clock_ns() // 1_000_000
        stats = self._decode[1](read_files(order.paths), order.paths)  # one loop of reads, one decode
        batch = _vectorised(order, stats, ts) if VECTORISE else None
        if batch is None:  # a file missing or bad, or counters beyond 2**52: cgroup by cgroup
            order.to_objects()
            batch = _one_by_one(order, stats, ts)
        self.mark_started()
        return batch


def _vectorised(order: _Round, stats: list[tuple[int, int] | None], ts: int) -> SampleBatch | None:
    """The round in numpy when every file was read and parsed; None (nothing changed) otherwise."""
    if None in stats:
        return None
    try:
        cur = np.array(stats, dtype=np.int64).reshape(-1, 2)
    except OverflowError:
        return None
    if cur.shape[0] and int(np.abs(cur).max()) > _EXACT:
        return None
    if not order.arrays:
        order.from_objects()
    has, last = order.has_last, order.last
    periods = cur[:, 0] - last[:, 0]
    ratio = np.zeros(cur.shape[0], dtype=np.float64)
    np.divide(cur[:, 1] - last[:, 1], periods, out=ratio, where=periods > 0)  # as throttle_ratio
    order.last, order.has_last = cur, np.ones(cur.shape[0], dtype=bool)
    if has.all():
        refs = list(order.refs)
    else:
        refs = [order.refs[i] for i in np.flatnonzero(has).tolist()]
        ratio = ratio[has]
    return SampleBatch.from_arrays(refs, np.full(ratio.shape[0], ts, dtype=np.int64), ratio)


def _one_by_one(order: _Round, stats: list[tuple[int, int] | None], ts: int) -> SampleBatch:
    """The round cgroup by cgroup on the ``_Throttle`` objects (any round ``_vectorised`` declines)."""
    batch = SampleBatch()
    add_ref, add_value = batch.refs.append, batch.values.append
    for state, cur in zip(order.states, stats, strict=True):
        if cur is None:
            continue  # unreadable: skipped, its state kept
        last, state.last = state.last, cur
        if last is not None:
            periods = cur[0] - last[0]  # as throttle_ratio
            add_ref(state.ref)
            add_value((cur[1] - last[1]) / periods if periods > 0 else 0.0)
    batch.timestamps.extend([ts] * len(batch.refs))  # one timestamp for the whole round
    return batch
