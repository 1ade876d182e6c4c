"""PodThrottledCollector (SPEC §6.3, 1 s): pod and container CFS throttle ratio from ``cpu.stat`` deltas,
Δnr_throttled / Δnr_periods (0 when no period elapsed). The first observation only primes; state of pods
and containers that disappeared is forgotten; an unreadable cgroup is skipped.

Imports: standard library, agent.system.cgroup, agent.metriccache.cache, agent.metricsadvisor.framework.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent.metriccache.cache import Sample
from agent.metricsadvisor.framework import BaseCollector, CollectContext, ms
from agent.system import cgroup as cg
from agent.system.cgroup import CgroupVersion
from agent.system.fastread import convert_fast, read_text_fast

__all__ = ["PodThrottledCollector", "throttle_ratio"]


def throttle_ratio(last: cg.CpuStat, cur: cg.CpuStat) -> float:
    """Δnr_throttled / Δnr_periods; 0 when no period elapsed (or the counters went backwards)."""
    periods = cur.nr_periods - last.nr_periods
    if periods <= 0:
        return 0.0
    return (cur.nr_throttled - last.nr_throttled) / periods


class _Throttle:
    __slots__ = ("cgroup_dir", "labels", "last", "path")

    def __init__(self, ctx: CollectContext, cgroup_dir: str, labels: Mapping[str, str]) -> None:
        self.cgroup_dir = cgroup_dir
        self.labels = labels
        self.path = str(
            cg.cgroup_file_path(ctx.paths.cgroup_root, ctx.cgroup_version, cg.CPU_STAT, cgroup_dir)
        )
        self.last: cg.CpuStat | None = None

    def read(self, version: CgroupVersion) -> float | None:
        cur = convert_fast(cg.CPU_STAT, version, read_text_fast(self.path), self.path)
        last, self.last = self.last, cur
        return None if last is None else throttle_ratio(last, cur)


class PodThrottledCollector(BaseCollector):
    def __init__(self, interval_seconds: float = 1.0) -> None:
        super().__init__("pod_throttled", interval_seconds)
        self._states: dict[str, _Throttle] = {}

    def _state(self, ctx: CollectContext, key: str, cgroup_dir: str, label: str, value: str) -> _Throttle:
        state = self._states.get(key)
        if state is None or state.cgroup_dir != cgroup_dir:
            state = self._states[key] = _Throttle(ctx, cgroup_dir, {label: value})
        return state

    def collect(self, ctx: CollectContext) -> list[Sample]:
        version = ctx.cgroup_version
        out: list[Sample] = []
        seen: set[str] = set()
        ts = ms(ctx.clock_ns())
        for pod in ctx.pods.pods():
            key = "pod/" + pod.uid
            seen.add(key)
            state = self._state(ctx, key, pod.cgroup_dir, "pod_uid", pod.uid)
            try:
                ratio = state.read(version)
            except (OSError, ValueError):
                ratio = None
            if ratio is not None:
                out.append(Sample("pod_cpu_throttled", state.labels, ts, ratio))
            for container in pod.containers:
                ckey = "container/" + container.container_id
                seen.add(ckey)
                cstate = self._state(ctx, ckey, container.cgroup_dir, "container_id", container.container_id)
                try:
                    cratio = cstate.read(version)
                except (OSError, ValueError):
                    continue
                if cratio is not None:
                    out.append(Sample("container_cpu_throttled", cstate.labels, ts, cratio))
        if len(self._states) != len(seen):
            self._states = {k: v for k, v in self._states.items() if k in seen}
        self.mark_started()
        return out
