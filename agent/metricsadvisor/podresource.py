"""PodResourceCollector (SPEC §6.3, 1 s): pod and container CPU (``cpuacct.usage`` / v2 ``cpu.stat``
``usage_usec``) and anon-only memory (``memory.stat``) for the pods PodSource gives, with the pods' NUMA
memory (``memory.numa_stat``) once the NUMA topology is known. First observation of a pod/container is
skipped (state kept 20 × interval); a skipped or unreadable pod contributes nothing to the published totals.
State of pods that disappeared is forgotten. Paths and the series refs (``SeriesRef``) are made once per
cgroup, not per tick; files go through the bytes fast readers of ``agent.system.fastread`` and the round is
one ``SampleBatch``.

Imports: standard library, agent.system.{cgroup,fastread}, agent.metriccache.{cache,kv},
agent.metricsadvisor.framework.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

from agent.metriccache.cache import SampleBatch, SeriesRef
from agent.metriccache.kv import NODE_CPU_INFO
from agent.metricsadvisor.framework import PODS, BaseCollector, CollectContext, Totals, udelta
from agent.system import cgroup as cg
from agent.system.cgroup import CgroupVersion
from agent.system.fastread import anon_reader, reader

__all__ = ["CgroupUsage", "PodResourceCollector", "usage_cores"]

_POD_KINDS = ("pod_cpu_usage", "pod_memory_usage")
_CONTAINER_KINDS = ("container_cpu_usage", "container_memory_usage")
_U64 = 1 << 64


def usage_cores(delta_ns: int, delta_wall_ns: int) -> float:
    """``float64(Δns) / float64(Δwall_ns)`` (SPEC §6.3 pod/container CPU)."""
    return float(delta_ns) / float(delta_wall_ns)


@functools.cache
def _readers(
    version: CgroupVersion,
) -> tuple[Callable[[str], int], Callable[[str], int], Callable[[str], dict[int, int]]]:
    """The fast readers of CPU usage (ns), anon memory (``memory.stat``) and ``memory.numa_stat``."""
    return reader(cg.CPU_USAGE, version), anon_reader(version), reader(cg.MEMORY_NUMA_STAT, version)


class CgroupUsage:
    """Per-cgroup read state: precomputed file paths, labels, series refs and the last CPU counter."""

    __slots__ = (
        "cgroup_dir",
        "cpu_path",
        "cpu_ref",
        "labels",
        "last_ns",
        "last_wall",
        "mem_path",
        "mem_ref",
        "numa_path",
        "read_mem",
        "read_usage",
    )

    def __init__(
        self,
        ctx: CollectContext,
        cgroup_dir: str,
        labels: Mapping[str, str],
        kinds: tuple[str, str] = _POD_KINDS,
    ) -> None:
        root, version = ctx.paths.cgroup_root, ctx.cgroup_version
        self.cgroup_dir = cgroup_dir
        self.labels = labels
        self.cpu_path = str(cg.cgroup_file_path(root, version, cg.CPU_USAGE, cgroup_dir))
        self.mem_path = str(cg.cgroup_file_path(root, version, cg.MEMORY_STAT, cgroup_dir))
        self.numa_path = str(cg.cgroup_file_path(root, version, cg.MEMORY_NUMA_STAT, cgroup_dir))
        self.read_usage, self.read_mem, _ = _readers(version)
        self.cpu_ref = SeriesRef(kinds[0], labels)
        self.mem_ref = SeriesRef(kinds[1], labels)
        self.last_ns = -1
        self.last_wall = 0

    def read(self, version: CgroupVersion, wall: int, max_age_ns: int) -> tuple[float, int] | None:
        """Read CPU then memory; returns (cores, anon bytes), or None on the first observation.

        ``OSError``/``ValueError`` on a read or parse failure (CPU state is updated before memory is read).
        ``version`` is the one the state was made for (kept for callers).
        """
        cur = self.read_usage(self.cpu_path)
        last_ns, last_wall = self.last_ns, self.last_wall
        self.last_ns, self.last_wall = cur, wall
        anon = self.read_mem(self.mem_path)
        if last_ns < 0 or last_wall >= wall or wall - last_wall > max_age_ns:
            return None
        return usage_cores(udelta(cur, last_ns), wall - last_wall), anon


class PodResourceCollector(BaseCollector):
    def __init__(self, interval_seconds: float = 1.0) -> None:
        super().__init__("pod_resource", interval_seconds)
        self._pods: dict[str, CgroupUsage] = {}
        self._containers: dict[str, CgroupUsage] = {}

    def collect(self, ctx: CollectContext) -> SampleBatch:
        version = ctx.cgroup_version
        max_age = int(20 * self.interval_seconds * 1e9)
        read_numa = _readers(version)[2] if ctx.kv.get(NODE_CPU_INFO) is not None else None
        batch = SampleBatch()
        add_ref, add_ts, add_value = batch.refs.append, batch.timestamps.append, batch.values.append
        total_cpu = 0.0
        total_mem = 0
        numa_pages: dict[int, int] = {}
        pods, containers = self._pods, self._containers
        seen_pods: set[str] = set()
        seen_containers: set[str] = set()
        clock = ctx.clock_ns
        read_usage, read_mem, _ = _readers(version)
        for pod in ctx.pods.pods():
            uid = pod.uid
            seen_pods.add(uid)
            state = pods.get(uid)
            if state is None or state.cgroup_dir != pod.cgroup_dir:
                state = pods[uid] = CgroupUsage(ctx, pod.cgroup_dir, {"pod_uid": uid})
            wall = clock()
            try:  # CgroupUsage.read, inlined (as for containers below)
                cur = read_usage(state.cpu_path)
                last_ns, last_wall = state.last_ns, state.last_wall
                state.last_ns, state.last_wall = cur, wall
                mem = read_mem(state.mem_path)
                fresh = last_ns >= 0 and last_wall < wall and wall - last_wall <= max_age
            except (OSError, ValueError):
                fresh = False
            if fresh:
                cpu = float((cur - last_ns) % _U64) / float(wall - last_wall)  # usage_cores(udelta(…))
                ts = wall // 1_000_000
                add_ref(state.cpu_ref)
                add_ref(state.mem_ref)
                add_ts(ts)
                add_ts(ts)
                add_value(cpu)
                add_value(float(mem))
                total_cpu += cpu
                total_mem += mem
                if read_numa is not None:
                    try:
                        pages = read_numa(state.numa_path)
                    except (OSError, ValueError):
                        pages = {}
                    for node, n in pages.items():
                        numa_pages[node] = numa_pages.get(node, 0) + n
            for container in pod.containers:
                cid = container.container_id
                seen_containers.add(cid)
                cs = containers.get(cid)
                if cs is None or cs.cgroup_dir != container.cgroup_dir:
                    cs = containers[cid] = CgroupUsage(
                        ctx, container.cgroup_dir, {"container_id": cid}, _CONTAINER_KINDS
                    )
                # CgroupUsage.read, inlined: this loop runs for every container every second.
                wall = clock()
                try:
                    cur = read_usage(cs.cpu_path)
                    last_ns, last_wall = cs.last_ns, cs.last_wall
                    cs.last_ns, cs.last_wall = cur, wall
                    anon = read_mem(cs.mem_path)
                except (OSError, ValueError):
                    continue
                if last_ns < 0 or last_wall >= wall or wall - last_wall > max_age:
                    continue
                ts = wall // 1_000_000
                add_ref(cs.cpu_ref)
                add_ref(cs.mem_ref)
                add_ts(ts)
                add_ts(ts)
                add_value(float((cur - last_ns) % _U64) / float(wall - last_wall))  # usage_cores(udelta(…))
                add_value(float(anon))
        if len(pods) != len(seen_pods):
            self._pods = {k: v for k, v in pods.items() if k in seen_pods}
        if len(containers) != len(seen_containers):
            self._containers = {k: v for k, v in containers.items() if k in seen_containers}
        numa_bytes = {node: float(n * ctx.page_size) for node, n in numa_pages.items()}
        ctx.shared.publish(PODS, Totals(total_cpu, float(total_mem), ctx.clock_ns(), {}, numa_bytes))
        self.mark_started()
        return batch
