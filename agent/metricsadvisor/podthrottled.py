"""PodThrottledCollector (SPEC §6.3, 1 s): pod and container CFS throttle ratio from ``cpu.stat`` deltas,
Δnr_throttled / Δnr_periods (0 when no period elapsed). The first observation only primes; state of pods
and containers that disappeared is forgotten; an unreadable cgroup is skipped. Reads (nr_periods,
nr_throttled) of every cgroup in one loop and decodes them in one call (``agent.system.cgbatch``); the read
order is rebuilt only when the pod set changes; the round is one ``SampleBatch`` of per-cgroup ``SeriesRef``s.

Imports: standard library, agent.podmeta, agent.system.{cgbatch,cgroup}, agent.metriccache.cache,
agent.metricsadvisor.framework.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

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

    def read(self, read_stat: Callable[[str], tuple[int, int]]) -> float | None:
        """The ratio since the last read (None on the first); ``OSError``/``ValueError`` on a bad file."""
        cur = read_stat(self.path)
        last, self.last = self.last, cur
        if last is None:
            return None
        periods = cur[0] - last[0]  # as throttle_ratio
        return (cur[1] - last[1]) / periods if periods > 0 else 0.0


class PodThrottledCollector(BaseCollector):
    def __init__(self, interval_seconds: float = 1.0) -> None:
        super().__init__("pod_throttled", interval_seconds)
        self._pods: dict[str, _Throttle] = {}
        self._containers: dict[str, _Throttle] = {}
        # The round's cgroups in read order, rebuilt only when the pod set changes: (pod set, states, paths).
        self._order: tuple[tuple[PodMeta, ...], list[_Throttle], list[str]] | None = None
        self._decode: tuple[cg.CgroupVersion, BatchDecoder] | None = None

    def _round(self, ctx: CollectContext) -> tuple[list[_Throttle], list[str]]:
        key = tuple(ctx.pods.pods())
        if self._order is not None and self._order[0] == key:
            return self._order[1], self._order[2]
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
        self._order = (key, states, [s.path for s in states])
        return states, self._order[2]

    def collect(self, ctx: CollectContext) -> SampleBatch:
        if self._decode is None or self._decode[0] is not ctx.cgroup_version:
            self._decode = (ctx.cgroup_version, BatchDecoder("throttle", ctx.cgroup_version))
        states, paths = self._round(ctx)
        ts = ctx.clock_ns() // 1_000_000
        stats = self._decode[1](read_files(paths), paths)  # one loop of reads, one decode (cgbatch)
        batch = SampleBatch()
        add_ref, add_value = batch.refs.append, batch.values.append
        for state, cur in zip(states, stats, strict=True):
            if cur is None:
                continue  # unreadable: skipped, its state kept
            last, state.last = state.last, cur
            if last is not None:
                periods = cur[0] - last[0]  # as throttle_ratio
                add_ref(state.ref)
                add_value((cur[1] - last[1]) / periods if periods > 0 else 0.0)
        batch.timestamps.extend([ts] * len(batch.refs))  # one timestamp for the whole round
        self.mark_started()
        return batch
