"""QoS strategy registry, the counterpart of the collector registry (agent/metricsadvisor/registry.py):
one ``Registration`` per strategy — its name, the feature gates that enable it (any of them), whether it
runs when none of its gates is given, and the factory that builds its loop entry (the strategy and the
config it reads each tick). The gates and their defaults are listed in
docs/configuration.md#koordlet-feature-gates; each strategy's rules in docs/rules/koordlet.md
(``CPUSetAllocator``'s in docs/rules/koordlet-cpuset.md#reconcile, ``GPUDeviceCgroup``'s in
docs/rules/koordlet-gpu.md#container).

Imports: standard library, agent.system.cgroup (HostPaths), agent.qosmanager.{framework,runner} and the
strategy modules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.qosmanager import cpuevict, memoryevict
from agent.qosmanager.cgroupreconcile import BatchResourceStrategy, MemoryQoSStrategy
from agent.qosmanager.cpuburst import CPUBurstOptions, CPUBurstStrategy
from agent.qosmanager.cpusetalloc import CPUSetAllocatorConfig, CPUSetAllocatorStrategy
from agent.qosmanager.cpusuppress import CPUSuppressConfig, CPUSuppressStrategy
from agent.qosmanager.framework import Strategy
from agent.qosmanager.gpudevices import GATES as GPU_DEVICE_GATES
from agent.qosmanager.gpudevices import GPUDevicesConfigSource, GPUDevicesStrategy
from agent.qosmanager.resctrlqos import ResctrlConfig, ResctrlConfigSource, ResctrlReconcileStrategy
from agent.qosmanager.runner import StrategyEntry
from agent.qosmanager.systemconfig import SystemConfigInput, SystemConfigSource, SystemConfigStrategy
from agent.system.cgroup import HostPaths

__all__ = ["REGISTRY", "Registration", "StrategyDeps", "build_entries"]


@dataclass(frozen=True)
class StrategyDeps:
    """What the factories may use: ``paths`` locates resctrl and the kernel knobs (None: no resctrl and
    no knob files, so those two strategies decide nothing); ``pending_evictions`` lists the pods the
    evictor evicted within its cache TTL, which the evict strategies must not evict again;
    ``nrt_annotations`` gives the annotations of this node's NodeResourceTopology as last reported (None:
    not known, CPUSetAllocator then reads the Node's; docs/rules/koordlet-cpuset.md#reconcile)."""

    paths: HostPaths | None = None
    pending_evictions: Callable[[], frozenset[str]] = field(default=frozenset)
    nrt_annotations: Callable[[], Mapping[str, str] | None] = field(default=lambda: None)


StrategyFactory = Callable[[StrategyDeps], StrategyEntry]


@dataclass(frozen=True)
class Registration:
    name: str
    gates: tuple[str, ...]
    """The strategy runs when any of these gates is on."""
    default_enabled: bool
    """The value of a gate missing from the gate map given to ``build_entries``."""
    factory: StrategyFactory

    def enabled(self, gates: Mapping[str, bool]) -> bool:
        return any(gates.get(g, self.default_enabled) for g in self.gates)


def _resctrl(deps: StrategyDeps) -> StrategyEntry:
    if deps.paths is None:
        return StrategyEntry(ResctrlReconcileStrategy(), ResctrlConfig)
    source = ResctrlConfigSource(deps.paths.sys / "fs" / "resctrl", deps.paths.proc)
    return StrategyEntry(ResctrlReconcileStrategy(), source)


def _system_config(deps: StrategyDeps) -> StrategyEntry:
    if deps.paths is None:
        return StrategyEntry(SystemConfigStrategy(), lambda: SystemConfigInput(Path("/proc"), Path("/sys")))
    return StrategyEntry(SystemConfigStrategy(), SystemConfigSource(deps.paths.proc, deps.paths.sys))


def _plain(strategy: Callable[[], Strategy[Any, Any]], config: Callable[[], Any]) -> StrategyFactory:
    """A factory for a strategy whose config needs no dependency."""
    return lambda _deps: StrategyEntry(strategy(), config)


def _memory_evict(deps: StrategyDeps) -> StrategyEntry:
    pending = deps.pending_evictions
    return StrategyEntry(
        memoryevict.MemoryEvictStrategy(), lambda: memoryevict.MemoryEvictConfig(already_evicted=pending())
    )


def _cpu_evict(deps: StrategyDeps) -> StrategyEntry:
    pending = deps.pending_evictions
    return StrategyEntry(
        cpuevict.CPUEvictStrategy(), lambda: cpuevict.CPUEvictConfig(already_evicted=pending())
    )


def _cpuset_allocator(deps: StrategyDeps) -> StrategyEntry:
    nrt = deps.nrt_annotations
    return StrategyEntry(CPUSetAllocatorStrategy(), lambda: CPUSetAllocatorConfig(nrt_annotations=nrt()))


def _gpu_devices(deps: StrategyDeps) -> StrategyEntry:
    """The nvidia-uvm major is read from the host's ``/proc/devices`` each tick."""
    proc = deps.paths.proc if deps.paths is not None else Path("/proc")
    return StrategyEntry(GPUDevicesStrategy(), GPUDevicesConfigSource(proc))


REGISTRY: tuple[Registration, ...] = (
    Registration("CPUSuppress", ("BECPUSuppress",), False, _plain(CPUSuppressStrategy, CPUSuppressConfig)),
    Registration("CPUBurst", ("CPUBurst",), False, _plain(CPUBurstStrategy, CPUBurstOptions)),
    Registration("memoryEvict", memoryevict.GATES, False, _memory_evict),
    Registration("cpuEvict", cpuevict.GATES, False, _cpu_evict),
    Registration("ResctrlReconcile", ("RdtResctrl",), False, _resctrl),
    Registration("BatchResource", ("BatchResource",), True, _plain(BatchResourceStrategy, lambda: None)),
    Registration("CPUSetAllocator", ("CPUSetAllocator",), True, _cpuset_allocator),
    Registration("CgroupReconcile", ("CgroupReconcile",), False, _plain(MemoryQoSStrategy, lambda: None)),
    Registration("SystemConfig", ("SystemConfig",), False, _system_config),
    Registration("GPUDeviceCgroup", GPU_DEVICE_GATES, False, _gpu_devices),
)
"""Every strategy, in start order."""


def build_entries(gates: Mapping[str, bool], deps: StrategyDeps | None = None) -> list[StrategyEntry]:
    """The loop entries of the registered strategies whose gates ``gates`` enables, in registry order."""
    d = deps if deps is not None else StrategyDeps()
    return [r.factory(d) for r in REGISTRY if r.enabled(gates)]
