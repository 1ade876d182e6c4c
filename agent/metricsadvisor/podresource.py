"""PodResourceCollector (SPEC §6.3, 1 s): pod and container CPU (``cpuacct.usage`` / v2 ``cpu.stat``
``usage_usec``) and anon-only memory (``memory.stat``) for the pods PodSource gives, with the pods' NUMA
memory (``memory.numa_stat``) once the NUMA topology is known. First observation of a pod/container is
skipped (state kept 20 × interval); a skipped or unreadable pod contributes nothing to the published totals.
State of pods that disappeared is forgotten. Paths are computed once per cgroup dir, not per tick.

Imports: standard library, agent.system.cgroup, agent.metriccache.{cache,kv}, agent.podmeta,
agent.metricsadvisor.framework.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent.metriccache.cache import Sample
from agent.metriccache.kv import NODE_CPU_INFO
from agent.metricsadvisor.framework import PODS, BaseCollector, CollectContext, Totals, ms, udelta
from agent.system import cgroup as cg
from agent.system.cgroup import CgroupVersion
from agent.system.fastread import convert_fast, read_text_fast

__all__ = ["CgroupUsage", "PodResourceCollector", "usage_cores"]


def usage_cores(delta_ns: int, delta_wall_ns: int) -> float:
    """``float64(Δns) / float64(Δwall_ns)`` (SPEC §6.3 pod/container CPU)."""
    return float(delta_ns) / float(delta_wall_ns)


class CgroupUsage:
    """Per-cgroup read state: precomputed file paths, labels and the last CPU counter."""

    __slots__ = ("cgroup_dir", "cpu_path", "labels", "last_ns", "last_wall", "mem_path", "numa_path")

    def __init__(self, ctx: CollectContext, cgroup_dir: str, labels: Mapping[str, str]) -> None:
        root, version = ctx.paths.cgroup_root, ctx.cgroup_version
        self.cgroup_dir = cgroup_dir
        self.labels = labels
        self.cpu_path = str(cg.cgroup_file_path(root, version, cg.CPU_USAGE, cgroup_dir))
        self.mem_path = str(cg.cgroup_file_path(root, version, cg.MEMORY_STAT, cgroup_dir))
        self.numa_path = str(cg.cgroup_file_path(root, version, cg.MEMORY_NUMA_STAT, cgroup_dir))
        self.last_ns = -1
        self.last_wall = 0

    def read(self, version: CgroupVersion, wall: int, max_age_ns: int) -> tuple[float, int] | None:
        """Read CPU then memory; returns (cores, anon bytes), or None on the first observation.

        ``OSError``/``ValueError`` on a read or parse failure (CPU state is updated before memory is read).
        """
        cur = convert_fast(cg.CPU_USAGE, version, read_text_fast(self.cpu_path), self.cpu_path)
        last_ns, last_wall = self.last_ns, self.last_wall
        self.last_ns, self.last_wall = cur, wall
        fresh = last_ns >= 0 and last_wall < wall and wall - last_wall <= max_age_ns
        mem = convert_fast(cg.MEMORY_STAT, version, read_text_fast(self.mem_path), self.mem_path)
        if not fresh:
            return None
        return usage_cores(udelta(cur, last_ns), wall - last_wall), mem.usage_anon


class PodResourceCollector(BaseCollector):
    def __init__(self, interval_seconds: float = 1.0) -> None:
        super().__init__("pod_resource", interval_seconds)
        self._pods: dict[str, CgroupUsage] = {}
        self._containers: dict[str, CgroupUsage] = {}

    def _state(
        self, table: dict[str, CgroupUsage], key: str, ctx: CollectContext, cgroup_dir: str, label: str
    ) -> CgroupUsage:
        state = table.get(key)
        if state is None or state.cgroup_dir != cgroup_dir:
            state = table[key] = CgroupUsage(ctx, cgroup_dir, {label: key})
        return state

    def collect(self, ctx: CollectContext) -> list[Sample]:
        version = ctx.cgroup_version
        max_age = int(20 * self.interval_seconds * 1e9)
        with_numa = ctx.kv.get(NODE_CPU_INFO) is not None
        out: list[Sample] = []
        total_cpu = 0.0
        total_mem = 0
        numa_pages: dict[int, int] = {}
        seen_pods: set[str] = set()
        seen_containers: set[str] = set()
        clock = ctx.clock_ns
        for pod in ctx.pods.pods():
            seen_pods.add(pod.uid)
            state = self._state(self._pods, pod.uid, ctx, pod.cgroup_dir, "pod_uid")
            wall = clock()
            try:
                got = state.read(version, wall, max_age)
            except (OSError, ValueError):
                got = None
            if got is not None:
                cpu, mem = got
                ts = ms(wall)
                out.append(Sample("pod_cpu_usage", state.labels, ts, cpu))
                out.append(Sample("pod_memory_usage", state.labels, ts, float(mem)))
                total_cpu += cpu
                total_mem += mem
                if with_numa:
                    try:
                        text = read_text_fast(state.numa_path)
                        pages = cg.convert_cgroup(cg.MEMORY_NUMA_STAT, version, text, state.numa_path)
                    except (OSError, ValueError):
                        pages = {}
                    for node, n in pages.items():
                        numa_pages[node] = numa_pages.get(node, 0) + n
            for container in pod.containers:
                cid = container.container_id
                seen_containers.add(cid)
                cstate = self._state(self._containers, cid, ctx, container.cgroup_dir, "container_id")
                wall = clock()
                try:
                    cgot = cstate.read(version, wall, max_age)
                except (OSError, ValueError):
                    continue
                if cgot is not None:
                    ts = ms(wall)
                    out.append(Sample("container_cpu_usage", cstate.labels, ts, cgot[0]))
                    out.append(Sample("container_memory_usage", cstate.labels, ts, float(cgot[1])))
        if len(self._pods) != len(seen_pods):
            self._pods = {k: v for k, v in self._pods.items() if k in seen_pods}
        if len(self._containers) != len(seen_containers):
            self._containers = {k: v for k, v in self._containers.items() if k in seen_containers}
        numa_bytes = {node: float(n * ctx.page_size) for node, n in numa_pages.items()}
        ctx.shared.publish(PODS, Totals(total_cpu, float(total_mem), ctx.clock_ns(), {}, numa_bytes))
        self.mark_started()
        return out
