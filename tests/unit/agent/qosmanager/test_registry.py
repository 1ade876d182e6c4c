"""The QoS strategy registry: one registration per strategy (name, gates, default, factory), the gates
that enable each, the koordlet's default gate set, and what the factories wire (the evictor's pending
pods read each tick, resctrl and kernel knobs located under the host paths)."""

from __future__ import annotations

from pathlib import Path

from agent.options import FEATURE_GATES
from agent.qosmanager.cpuevict import CPUEvictConfig
from agent.qosmanager.gpudevices import GPUDevicesConfig, GPUDevicesConfigSource
from agent.qosmanager.memoryevict import MemoryEvictConfig
from agent.qosmanager.registry import REGISTRY, StrategyDeps, build_entries
from agent.qosmanager.resctrlqos import ResctrlConfig, ResctrlConfigSource
from agent.qosmanager.systemconfig import SystemConfigInput, SystemConfigSource
from agent.system.cgroup import HostPaths


def _names(gates: dict[str, bool], deps: StrategyDeps | None = None) -> list[str]:
    return [e.strategy.name for e in build_entries(gates, deps)]


def test_every_registration() -> None:
    table = [(r.name, r.gates, r.default_enabled) for r in REGISTRY]
    assert table == [
        ("CPUSuppress", ("BECPUSuppress",), False),
        ("CPUBurst", ("CPUBurst",), False),
        ("memoryEvict", ("BEMemoryEvict", "MemoryAllocatableEvict", "MemoryEvict"), False),
        ("cpuEvict", ("BECPUEvict", "CPUAllocatableEvict", "CPUEvict"), False),
        ("ResctrlReconcile", ("RdtResctrl",), False),
        ("BatchResource", ("BatchResource",), True),
        ("CPUSetAllocator", ("CPUSetAllocator",), True),
        ("CgroupReconcile", ("CgroupReconcile",), False),
        ("SystemConfig", ("SystemConfig",), False),
        ("GPUDeviceCgroup", ("GPUEnvInject",), False),
    ]
    everything = {g: True for r in REGISTRY for g in r.gates}
    # the factory builds the strategy the registration names; every gate is a koordlet gate
    assert _names(everything) == [r.name for r in REGISTRY]
    assert set(everything) <= set(FEATURE_GATES)


def test_the_koordlet_default_gates() -> None:
    assert _names(dict(FEATURE_GATES)) == [
        "CPUSuppress", "CPUBurst", "ResctrlReconcile", "BatchResource", "CPUSetAllocator",
    ]  # fmt: skip


def test_any_gate_enables_an_evictor_and_a_missing_gate_takes_the_default() -> None:
    assert _names({"CPUEvict": True}) == ["cpuEvict", "BatchResource", "CPUSetAllocator"]
    assert _names({"MemoryAllocatableEvict": True, "BatchResource": False, "CPUSetAllocator": False}) == [
        "memoryEvict"
    ]
    assert _names({}) == ["BatchResource", "CPUSetAllocator"]


def test_evict_configs_read_the_pending_pods_each_tick() -> None:
    pending = [frozenset({"a"})]
    deps = StrategyDeps(pending_evictions=lambda: pending[0])
    mem, cpu = build_entries(
        {"BEMemoryEvict": True, "BECPUEvict": True, "BatchResource": False, "CPUSetAllocator": False}, deps
    )
    assert mem.config() == MemoryEvictConfig(already_evicted=frozenset({"a"}))
    pending[0] = frozenset({"b"})
    assert cpu.config() == CPUEvictConfig(already_evicted=frozenset({"b"}))
    assert mem.config().already_evicted == frozenset({"b"})


def test_host_sources_follow_the_paths(tmp_path: Path) -> None:
    gates = {"RdtResctrl": True, "SystemConfig": True, "BatchResource": False, "CPUSetAllocator": False}
    paths = HostPaths(cgroup_root=tmp_path / "cg", proc=tmp_path / "proc", sys=tmp_path / "sys")
    resctrl, system = build_entries(gates, StrategyDeps(paths))
    assert isinstance(resctrl.config, ResctrlConfigSource)
    assert (resctrl.config.root, resctrl.config.proc) == (paths.sys / "fs" / "resctrl", paths.proc)
    assert isinstance(system.config, SystemConfigSource)
    assert (system.config.proc, system.config.sys) == (paths.proc, paths.sys)
    # without paths: no resctrl and no knob files, whatever the host has
    resctrl, system = build_entries(gates)
    assert resctrl.config() == ResctrlConfig(None)
    assert system.config() == SystemConfigInput(Path("/proc"), Path("/sys"))


def test_gpu_device_cgroup_reads_the_hosts_proc_devices(tmp_path: Path) -> None:
    gates = {"GPUEnvInject": True, "BatchResource": False, "CPUSetAllocator": False}
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "devices").write_text("Character devices:\n195 nvidia\n508 nvidia-uvm\n")
    paths = HostPaths(cgroup_root=tmp_path / "cg", proc=tmp_path / "proc", sys=tmp_path / "sys")
    [entry] = build_entries(gates, StrategyDeps(paths))
    assert entry.strategy.name == "GPUDeviceCgroup"
    assert isinstance(entry.config, GPUDevicesConfigSource) and entry.config.proc == paths.proc
    assert entry.config() == GPUDevicesConfig(uvm_major=508)
    [entry] = build_entries(gates)  # without paths: the agent's own /proc
    assert isinstance(entry.config, GPUDevicesConfigSource) and entry.config.proc == Path("/proc")
