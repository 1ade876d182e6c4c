"""NodeResourceCollector (SPEC §6.3, 1 s): node CPU from the ``cpu`` line of /proc/stat (busy ticks,
first sample only primes, nothing stored on that tick), node memory ``MemTotal − MemAvailable``, and
per-NUMA CPU (``cpuN`` lines grouped by the NodeInfoCollector's CPU→NUMA map) and memory
(``node<N>/meminfo``) once the topology is in the KV store. Publishes node totals for the system collector.

Imports: standard library, agent.system.{fastproc,nodeinfo}, agent.metriccache.{cache,kv},
agent.metricsadvisor.framework.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from agent.metriccache.cache import Sample
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
from agent.system.fastproc import node_meminfo_usage, proc_meminfo_usage, read_proc_stat_busy
from agent.system.nodeinfo import NodeTopology, node_meminfo_path

__all__ = ["NodeResourceCollector", "cpu_usage_cores", "numa_cpu_usage"]

_NO_LABELS: Mapping[str, str] = {}


def cpu_usage_cores(delta_ticks: int, delta_wall_ns: int, jiffy_ns: int) -> float:
    """``float64(Δticks) / (float64(Δwall_ns) / jiffy_ns)`` (SPEC §6.3 node CPU)."""
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

    def collect(self, ctx: CollectContext) -> list[Sample]:
        stat_path = str(ctx.paths.proc / "stat")
        mem_path = str(ctx.paths.proc / "meminfo")
        wall = ctx.clock_ns()
        busy, per_cpu = read_proc_stat_busy(stat_path)
        memory = proc_meminfo_usage(mem_path)
        last_busy, last_wall, last_per_cpu = self._last_busy, self._last_wall, self._last_per_cpu
        self._last_busy, self._last_wall, self._last_per_cpu = busy, wall, per_cpu
        if last_busy is None or wall <= last_wall:
            self.mark_started()
            return []  # the first sample only primes the state (nothing stored, not even memory)
        delta_wall = wall - last_wall
        cpu = cpu_usage_cores(udelta(busy, last_busy), delta_wall, ctx.jiffy_ns)
        ts = ms(wall)
        out = [
            Sample("node_cpu_usage", _NO_LABELS, ts, cpu),
            Sample("node_memory_usage", _NO_LABELS, ts, float(memory)),
        ]
        numa_cpu: dict[int, float] = {}
        numa_mem: dict[int, float] = {}
        topo = ctx.kv.get(NODE_CPU_INFO)
        if isinstance(topo, NodeTopology) and topo.numa_nodes:
            numa_cpu = numa_cpu_usage(
                last_per_cpu, per_cpu, topo.cpu_to_numa(), topo.numa_nodes, delta_wall, ctx.jiffy_ns
            )
            for node in topo.numa_nodes:
                numa_mem[node] = float(node_meminfo_usage(str(node_meminfo_path(ctx.paths, node)), node))
            for node, value in numa_cpu.items():
                out.append(Sample("node_numa_cpu_usage", numa_labels(node), ts, value))
            for node, value in numa_mem.items():
                out.append(Sample("node_numa_memory_usage", numa_labels(node), ts, value))
        ctx.shared.publish(NODE, Totals(cpu, float(memory), wall, numa_cpu, numa_mem))
        self.mark_started()
        return out
