"""NodeInfoCollector (docs/rules/koordlet.md#collectors, 60 s): CPU topology (cpu/core/socket/NUMA ids) → KV
``node_cpu_info`` as a ``NodeTopology``, and per-NUMA meminfo → KV ``node_numa_info`` as
``{numa id: meminfo bytes}``. No samples.

Imports: standard library, agent.system.nodeinfo, agent.metriccache.{cache,kv},
agent.metricsadvisor.framework.
"""

from __future__ import annotations

from agent.metriccache.cache import Sample
from agent.metriccache.kv import NODE_CPU_INFO, NODE_NUMA_INFO
from agent.metricsadvisor.framework import BaseCollector, CollectContext
from agent.system.nodeinfo import read_node_meminfo, read_topology

__all__ = ["NodeInfoCollector"]


class NodeInfoCollector(BaseCollector):
    def __init__(self, interval_seconds: float = 60.0) -> None:
        super().__init__("node_info", interval_seconds)

    def collect(self, ctx: CollectContext) -> list[Sample]:
        topo = read_topology(ctx.paths)
        numa = {node: read_node_meminfo(ctx.paths, node) for node in topo.numa_nodes}
        ctx.kv.set(NODE_CPU_INFO, topo)
        ctx.kv.set(NODE_NUMA_INFO, numa)
        self.mark_started()
        return []
