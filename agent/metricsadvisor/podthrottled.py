"""PodThrottledCollector (SPEC §6.3, 1 s): pod and container CFS throttle ratio from ``cpu.stat`` deltas,
Δnr_throttled / Δnr_periods (0 when no period elapsed). The first observation only primes; state of pods
and containers that disappeared is forgotten; an unreadable cgroup is skipped. Reads (nr_periods,
nr_throttled) with the bytes fast reader; the round is one ``SampleBatch`` of per-cgroup ``SeriesRef``s.

Imports: standard library, agent.system.{cgroup,fastread}, agent.metriccache.cache,
agent.metricsadvisor.framework.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from agent.metriccache.cache import SampleBatch, SeriesRef
from agent.metricsadvisor.framework import BaseCollector, CollectContext
from agent.system import cgroup as cg
from agent.system.fastread import throttle_reader

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
        self._reader: tuple[cg.CgroupVersion, Callable[[str], tuple[int, int]]] | None = None

    def collect(self, ctx: CollectContext) -> SampleBatch:
        if self._reader is None or self._reader[0] is not ctx.cgroup_version:
            self._reader = (ctx.cgroup_version, throttle_reader(ctx.cgroup_version))
        read_stat = self._reader[1]
        batch = SampleBatch()
        add_ref, add_value = batch.refs.append, batch.values.append
        pods, containers = self._pods, self._containers
        seen_pods: set[str] = set()
        seen_containers: set[str] = set()
        ts = ctx.clock_ns() // 1_000_000
        for pod in ctx.pods.pods():
            uid = pod.uid
            seen_pods.add(uid)
            state = pods.get(uid)
            if state is None or state.cgroup_dir != pod.cgroup_dir:
                state = pods[uid] = _Throttle(ctx, pod.cgroup_dir, "pod_cpu_throttled", {"pod_uid": uid})
            try:
                ratio = state.read(read_stat)
            except (OSError, ValueError):
                ratio = None
            if ratio is not None:
                add_ref(state.ref)
                add_value(ratio)
            for container in pod.containers:
                cid = container.container_id
                seen_containers.add(cid)
                cs = containers.get(cid)
                if cs is None or cs.cgroup_dir != container.cgroup_dir:
                    cs = containers[cid] = _Throttle(
                        ctx, container.cgroup_dir, "container_cpu_throttled", {"container_id": cid}
                    )
                try:  # _Throttle.read, inlined: this loop runs for every container every second
                    cur = read_stat(cs.path)
                except (OSError, ValueError):
                    continue
                last, cs.last = cs.last, cur
                if last is not None:
                    periods = cur[0] - last[0]
                    add_ref(cs.ref)
                    add_value((cur[1] - last[1]) / periods if periods > 0 else 0.0)
        if len(pods) != len(seen_pods):
            self._pods = {k: v for k, v in pods.items() if k in seen_pods}
        if len(containers) != len(seen_containers):
            self._containers = {k: v for k, v in containers.items() if k in seen_containers}
        batch.timestamps.extend([ts] * len(batch.refs))  # one timestamp for the whole round
        self.mark_started()
        return batch
