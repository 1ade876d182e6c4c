"""Collector registry: name → factory(AdvisorConfig) → Collector, in tick order (node info first so the NUMA
map exists before node usage; the system collector after node, pod and host-app collectors).

Imports: agent.metricsadvisor.* collector modules and framework.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from agent.metriccache.kv import NODE_CPU_INFO
from agent.metricsadvisor.beresource import BEResourceCollector
from agent.metricsadvisor.framework import AdvisorConfig, CollectContext, Collector
from agent.metricsadvisor.hostapplication import HostApplicationCollector
from agent.metricsadvisor.network import NetworkCollector
from agent.metricsadvisor.nodeinfo import NodeInfoCollector
from agent.metricsadvisor.noderesource import NodeResourceCollector
from agent.metricsadvisor.podresource import PodResourceCollector
from agent.metricsadvisor.podthrottled import PodThrottledCollector
from agent.metricsadvisor.psi import PSICollector
from agent.metricsadvisor.resctrl import ResctrlCollector
from agent.metricsadvisor.sysresource import SystemResourceCollector
from agent.system.nodeinfo import NodeTopology

__all__ = [
    "DEFAULT_COLLECTORS",
    "GATES",
    "CollectorFactory",
    "build_collectors",
    "default_collectors",
    "default_registry",
    "numa_ids",
    "register",
]

CollectorFactory = Callable[[AdvisorConfig], Collector]

_REGISTRY: dict[str, CollectorFactory] = {
    "node_info": lambda c: NodeInfoCollector(c.node_info_interval_seconds),
    "node_resource": lambda c: NodeResourceCollector(c.collect_interval_seconds),
    "pod_resource": lambda c: PodResourceCollector(c.collect_interval_seconds),
    "pod_throttled": lambda c: PodThrottledCollector(c.collect_interval_seconds),
    "be_resource": lambda c: BEResourceCollector(c.collect_interval_seconds),
    "host_application": lambda c: HostApplicationCollector(c.collect_interval_seconds),
    "system_resource": lambda c: SystemResourceCollector(c.collect_interval_seconds, c.sys_outdated_seconds),
    "psi": lambda c: PSICollector(c.psi_interval_seconds),
    "resctrl": lambda c: ResctrlCollector(c.resctrl_interval_seconds),
    "network": lambda c: NetworkCollector(c.network_interval_seconds),
}

DEFAULT_COLLECTORS: tuple[str, ...] = tuple(_REGISTRY)
"""Every built-in collector, in tick order (psi and resctrl disable themselves without host support)."""


def default_registry() -> Mapping[str, CollectorFactory]:
    """A read-only view of the registered factories (built-ins plus ``register``-ed ones)."""
    return dict(_REGISTRY)


def register(name: str, factory: CollectorFactory) -> None:
    """Add a collector factory (appended to the tick order); ``ValueError`` if the name is taken."""
    if name in _REGISTRY:
        raise ValueError(f"collector {name!r} already registered")
    _REGISTRY[name] = factory


def build_collectors(
    config: AdvisorConfig | None = None, names: Iterable[str] | None = None
) -> list[Collector]:
    """Instantiate ``names`` (default: ``DEFAULT_COLLECTORS``) in registry order; ``KeyError`` on unknown."""
    cfg = config or AdvisorConfig()
    wanted = list(DEFAULT_COLLECTORS if names is None else names)
    unknown = [n for n in wanted if n not in _REGISTRY]
    if unknown:
        raise KeyError(f"unknown collectors {unknown}")
    return [factory(cfg) for name, factory in _REGISTRY.items() if name in wanted]


GATES: Mapping[str, str] = {
    "psi": "PSICollector",
    "resctrl": "ResctrlCollector",
    "network": "NetworkCollector",
}
"""Collector → the feature gate that must be on for it (collectors not listed are always built)."""


def default_collectors(
    config: AdvisorConfig | None = None, gates: Mapping[str, bool] | None = None
) -> list[Collector]:
    """The built-in collectors, minus those whose gate (``GATES``) is off; ``gates=None`` builds them all."""
    names = [n for n in DEFAULT_COLLECTORS if gates is None or n not in GATES or gates.get(GATES[n], False)]
    return build_collectors(config, names)


def numa_ids(ctx: CollectContext) -> Sequence[int]:
    """NUMA node ids known from the NodeInfoCollector (empty before its first round)."""
    topo = ctx.kv.get(NODE_CPU_INFO)
    return topo.numa_nodes if isinstance(topo, NodeTopology) else ()
