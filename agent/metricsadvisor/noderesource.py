"""NodeResourceCollector (docs/rules/koordlet.md#collectors, 1 s): node CPU from the ``cpu`` line of
/proc/stat (busy ticks, first sample only primes, nothing stored on that tick), node memory
``MemTotal − MemAvailable``, and per-NUMA CPU (``cpuN`` lines grouped by the NodeInfoCollector's CPU→NUMA map)
and memory (``node<N>/meminfo``) once the topology is in the KV store. Publishes node totals for the system
collector.

Imports: standard library, agent.system.{nodeinfo,readers}, agent.metriccache.{cache,kv},
agent.metricsadvisor.framework.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from agent.metriccache.cache import SampleBatch, SeriesRef
from agent.metriccache.kv import NODE_CPU_INFO
from agent.metricsadvisor.framework import (
    NODE,
    BaseCollector,
    CollectContext,
    Totals,
    ms,
    numa_labels,
    udelta,
)
from agent.system.nodeinfo import NodeTopology, node_meminfo_path
from agent.system.readers import node_meminfo_usage, proc_meminfo_usage, read_proc_stat_busy

__all__ = ["NodeResourceCollector", "cpu_usage_cores", "numa_cpu_usage"]

_NO_LABELS: Mapping[str, str] = {}


def cpu_usage_cores(delta_ticks: int, delta_wall_ns: int, jiffy_ns: int) -> float:
    """``float64(Δticks) / (float64(Δwall_ns) / jiffy_ns)`` (node CPU, docs/rules/koordlet.md#collectors)."""
    return float(delta_ticks) / (float(delta_wall_ns) / float(jiffy_ns))


def numa_cpu_usage(
    last: Mapping[int, int],
    cur: Mapping[int, int],
    cpu_to_numa: Mapping[int, int],
    numa_nodes: Iterable[int],
    delta_wall_ns: int,
    jiffy_ns: int,
) -> dict[int, float]:
    """Per-NUMA cores from per-CPU busy ticks; CPUs of unknown NUMA, new CPUs or decreasing counters skip."""
    ticks = dict.fromkeys(numa_nodes, 0)
    for cpu, busy in cur.items():
        node = cpu_to_numa.get(cpu)
        prev = last.get(cpu)
        if node is None or node not in ticks or prev is None or busy < prev:
            continue
        ticks[node] += busy - prev
    return {node: cpu_usage_cores(t, delta_wall_ns, jiffy_ns) for node, t in ticks.items()}


class NodeResourceCollector(BaseCollector):
    def __init__(self, interval_seconds: float = 1.0) -> None:
        super().__init__("node_resource", interval_seconds)
        self._last_busy: int | None = None
        self._last_wall = 0
        self._last_per_cpu: dict[int, int] = {}
        # Made once (per host paths / topology object), not every second.
        self._paths: tuple[object, str, str] | None = None
        self._numa: tuple[object, object, dict[int, int], dict[int, str]] | None = None
        self._refs: dict[tuple[str, int], SeriesRef] = {}

    def _ref(self, kind: str, node: int = -1) -> SeriesRef:
        ref = self._refs.get((kind, node))
        if ref is None:
            ref = self._refs[(kind, node)] = SeriesRef(kind, _NO_LABELS if node < 0 else numa_labels(node))
        return ref

    def collect(self, ctx: CollectContext) -> SampleBatch:
        if self._paths is None or self._paths[0] is not ctx.paths:
            self._paths = (ctx.paths, str(ctx.paths.proc / "stat"), str(ctx.paths.proc / "meminfo"))
        stat_path, mem_path = self._paths[1], self._paths[2]
        wall = ctx.clock_ns()
        busy, per_cpu = read_proc_stat_busy(stat_path)
        memory = proc_meminfo_usage(mem_path)
        last_busy, last_wall, last_per_cpu = self._last_busy, self._last_wall, self._last_per_cpu
        self._last_busy, self._last_wall, self._last_per_cpu = busy, wall, per_cpu
        out = SampleBatch()
        if last_busy is None or wall <= last_wall:
            self.mark_started()
            return out  # the first sample only primes the state (nothing stored, not even memory)
        delta_wall = wall - last_wall
        cpu = cpu_usage_cores(udelta(busy, last_busy), delta_wall, ctx.jiffy_ns)
        ts = ms(wall)
        out.add(self._ref("node_cpu_usage"), ts, cpu)
        out.add(self._ref("node_memory_usage"), ts, float(memory))
        numa_cpu: dict[int, float] = {}
        numa_mem: dict[int, float] = {}
        topo = ctx.kv.get(NODE_CPU_INFO)
        if isinstance(topo, NodeTopology) and topo.numa_nodes:
            if self._numa is None or self._numa[0] is not topo or self._numa[1] is not ctx.paths:
                paths = {node: str(node_meminfo_path(ctx.paths, node)) for node in topo.numa_nodes}
                self._numa = (topo, ctx.paths, topo.cpu_to_numa(), paths)
            numa_cpu = numa_cpu_usage(
                last_per_cpu, per_cpu, self._numa[2], topo.numa_nodes, delta_wall, ctx.jiffy_ns
            )
            for node in topo.numa_nodes:
                numa_mem[node] = float(node_meminfo_usage(self._numa[3][node]))
            for node, value in numa_cpu.items():
                out.add(self._ref("node_numa_cpu_usage", node), ts, value)
            for node, value in numa_mem.items():
                out.add(self._ref("node_numa_memory_usage", node), ts, value)
        ctx.shared.publish(NODE, Totals(cpu, float(memory), wall, numa_cpu, numa_mem))
        self.mark_started()
        return out
