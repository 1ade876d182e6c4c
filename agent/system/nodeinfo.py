"""Node CPU/NUMA topology and per-NUMA meminfo from ``<paths.sys>/devices/system/{cpu,node}`` (the
node_info collector and per-NUMA memory, docs/rules/koordlet.md#collectors).

CPU ids come from ``cpu/cpu<N>`` dirs, core and socket ids from
``cpu<N>/topology/{core_id,physical_package_id}``, NUMA ids from ``node/node<M>/cpulist``.
Pure parsers plus thin readers. Imports: standard library and ``agent.system.{cgroup,procfs}``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from agent.system.cgroup import HostPaths, parse_cpuset_list
from agent.system.procfs import parse_meminfo

__all__ = [
    "CpuInfo",
    "NodeTopology",
    "node_meminfo_path",
    "numa_memory_usage_bytes",
    "parse_node_meminfo",
    "read_node_meminfo",
    "read_topology",
]

_CPU_DIR = re.compile(r"^cpu(\d+)$")
_NODE_DIR = re.compile(r"^node(\d+)$")
_NODE_PREFIX = re.compile(r"^Node\s+(\d+)\s+")


@dataclass(frozen=True, slots=True)
class CpuInfo:
    """One logical CPU: ids of its core, socket and NUMA node (−1 when unknown)."""

    cpu: int
    core: int
    socket: int
    numa_node: int


@dataclass(frozen=True, slots=True)
class NodeTopology:
    cpus: tuple[CpuInfo, ...]
    numa_nodes: tuple[int, ...]

    def cpu_to_numa(self) -> dict[int, int]:
        """CPU id → NUMA node id for CPUs with a known node."""
        return {c.cpu: c.numa_node for c in self.cpus if c.numa_node >= 0}


def _sys_root(paths: HostPaths) -> Path:
    return paths.sys / "devices" / "system"


def _read_int(path: Path, default: int) -> int:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return default


def read_topology(paths: HostPaths) -> NodeTopology:
    """Read CPU and NUMA topology; ``OSError`` when the cpu dir is unreadable (missing node dir → no NUMA)."""
    root = _sys_root(paths)
    numa_of: dict[int, int] = {}
    numa_nodes: list[int] = []
    node_dir = root / "node"
    if node_dir.is_dir():
        for entry in os.listdir(node_dir):
            m = _NODE_DIR.match(entry)
            if m is None:
                continue
            node = int(m.group(1))
            numa_nodes.append(node)
            path = node_dir / entry / "cpulist"
            for cpu in parse_cpuset_list(path.read_text(), str(path)):
                numa_of[cpu] = node
    cpus: list[CpuInfo] = []
    for entry in os.listdir(root / "cpu"):
        m = _CPU_DIR.match(entry)
        if m is None:
            continue
        cpu = int(m.group(1))
        topo = root / "cpu" / entry / "topology"
        core = _read_int(topo / "core_id", -1)
        socket = _read_int(topo / "physical_package_id", -1)
        cpus.append(CpuInfo(cpu, core, socket, numa_of.get(cpu, -1)))
    cpus.sort(key=lambda c: c.cpu)
    return NodeTopology(tuple(cpus), tuple(sorted(numa_nodes)))


def parse_node_meminfo(text: str, name: str) -> dict[str, int]:
    """Parse ``node<N>/meminfo`` (``Node 0 MemTotal:  123 kB`` lines) into bytes, like /proc/meminfo."""
    stripped = "\n".join(_NODE_PREFIX.sub("", line, count=1) for line in text.splitlines())
    return parse_meminfo(stripped, name)


def numa_memory_usage_bytes(info: dict[str, int], name: str = "node meminfo") -> int:
    """MemTotal − (MemFree + Active(file) + Inactive(file) + SReclaimable), 0 if negative
    (docs/rules/koordlet.md#collectors)."""
    keys = ("MemTotal", "MemFree", "Active(file)", "Inactive(file)", "SReclaimable")
    missing = [k for k in keys if k not in info]
    if missing:
        raise ValueError(f"{name}: missing {', '.join(missing)}")
    used = info["MemTotal"] - (
        info["MemFree"] + info["Active(file)"] + info["Inactive(file)"] + info["SReclaimable"]
    )
    return max(used, 0)


def node_meminfo_path(paths: HostPaths, node: int) -> Path:
    return _sys_root(paths) / "node" / f"node{node}" / "meminfo"


def read_node_meminfo(paths: HostPaths, node: int) -> dict[str, int]:
    path = node_meminfo_path(paths, node)
    return parse_node_meminfo(path.read_text(), str(path))
