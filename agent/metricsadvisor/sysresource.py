"""SystemResourceCollector (docs/rules/koordlet.md#collectors, 1 s): system usage = max(node − Σ pods − host
apps, 0) for CPU and memory from the totals the node, pod and host-application collectors published; per NUMA
node memory max(NUMA usage − Σ pods' NUMA memory, 0) and CPU = system CPU × NUMA CPU / Σ NUMA CPU (0 if the
sum is 0). Skips a tick while node or pod totals were never published, while the host-app total was never
published (no NodeSLO), or when any of them is older than the stale guard (10 s).

Imports: standard library, agent.metriccache.cache, agent.metricsadvisor.framework.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent.metriccache.cache import Sample
from agent.metricsadvisor.framework import (
    HOST_APPS,
    NODE,
    PODS,
    BaseCollector,
    CollectContext,
    Totals,
    ms,
    numa_labels,
)

__all__ = ["SystemResourceCollector", "SystemUsage", "system_usage"]

_NO_LABELS: Mapping[str, str] = {}


class SystemUsage:
    __slots__ = ("cpu", "memory", "numa_cpu", "numa_memory")

    def __init__(
        self, cpu: float, memory: float, numa_cpu: dict[int, float], numa_memory: dict[int, float]
    ) -> None:
        self.cpu = cpu
        self.memory = memory
        self.numa_cpu = numa_cpu
        self.numa_memory = numa_memory


def system_usage(
    node: Totals | None, pods: Totals | None, host_apps: Totals | None, now_ns: int, outdated_ns: int
) -> SystemUsage | None:
    """Pure: the system usage, or None when an input is missing or stale (older than ``outdated_ns``)."""
    if node is None or pods is None or host_apps is None:
        return None
    for totals in (node, pods, host_apps):
        if now_ns - totals.timestamp_ns > outdated_ns:
            return None
    cpu = max(node.cpu_cores - pods.cpu_cores - host_apps.cpu_cores, 0.0)
    memory = max(node.memory_bytes - pods.memory_bytes - host_apps.memory_bytes, 0.0)
    numa_memory = {
        n: max(used - pods.numa_memory_bytes.get(n, 0.0), 0.0) for n, used in node.numa_memory_bytes.items()
    }
    total_numa_cpu = sum(node.numa_cpu_cores.values())
    numa_cpu = {
        n: (cpu * used / total_numa_cpu if total_numa_cpu != 0 else 0.0)
        for n, used in node.numa_cpu_cores.items()
    }
    return SystemUsage(cpu, memory, numa_cpu, numa_memory)


class SystemResourceCollector(BaseCollector):
    def __init__(self, interval_seconds: float = 1.0, outdated_seconds: float = 10.0) -> None:
        super().__init__("system_resource", interval_seconds)
        self._outdated_ns = int(outdated_seconds * 1e9)

    def collect(self, ctx: CollectContext) -> list[Sample]:
        now = ctx.clock_ns()
        shared = ctx.shared
        usage = system_usage(
            shared.latest(NODE), shared.latest(PODS), shared.latest(HOST_APPS), now, self._outdated_ns
        )
        if usage is None:
            return []
        ts = ms(now)
        out = [
            Sample("sys_cpu_usage", _NO_LABELS, ts, usage.cpu),
            Sample("sys_memory_usage", _NO_LABELS, ts, usage.memory),
        ]
        for node, value in usage.numa_cpu.items():
            out.append(Sample("sys_numa_cpu_usage", numa_labels(node), ts, value))
        for node, value in usage.numa_memory.items():
            out.append(Sample("sys_numa_memory_usage", numa_labels(node), ts, value))
        self.mark_started()
        return out
