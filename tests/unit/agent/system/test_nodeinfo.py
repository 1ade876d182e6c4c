"""Tests of node CPU/NUMA topology and per-NUMA meminfo readers on the fake tree."""

from __future__ import annotations

import pytest

from agent.system import nodeinfo
from agent.system.nodeinfo import CpuInfo
from tests.fixtures.hosttree import HostTree

NODE_MEMINFO = (
    "Node 1 MemTotal:       1000 kB\nNode 1 MemFree:         100 kB\nNode 1 Active(file):     50 kB\n"
    "Node 1 Inactive(file):   25 kB\nNode 1 SReclaimable:     25 kB\nNode 1 HugePages_Total:     0\n"
)


def test_topology(host: HostTree) -> None:
    host.write_topology({0: [0, 1], 1: [2, 3]}, cores_per_socket=2)
    topo = nodeinfo.read_topology(host.paths)
    assert topo.numa_nodes == (0, 1)
    assert topo.cpus == (CpuInfo(0, 0, 0, 0), CpuInfo(1, 1, 0, 0), CpuInfo(2, 0, 1, 1), CpuInfo(3, 1, 1, 1))
    assert topo.cpu_to_numa() == {0: 0, 1: 0, 2: 1, 3: 1}


def test_topology_without_numa_dir(host: HostTree) -> None:
    cpu = host.paths.sys / "devices/system/cpu/cpu0"
    cpu.mkdir(parents=True)
    topo = nodeinfo.read_topology(host.paths)
    assert topo.numa_nodes == ()
    assert topo.cpus == (CpuInfo(0, -1, -1, -1),)
    assert topo.cpu_to_numa() == {}


def test_parse_node_meminfo() -> None:
    info = nodeinfo.parse_node_meminfo(NODE_MEMINFO, "node1/meminfo")
    assert info["MemTotal"] == 1000 * 1024
    assert info["HugePages_Total"] == 0
    # 1000 − (100 + 50 + 25 + 25) = 800 kB
    assert nodeinfo.numa_memory_usage_bytes(info) == 800 * 1024


def test_numa_usage_clamped_and_missing() -> None:
    assert (
        nodeinfo.numa_memory_usage_bytes(
            {"MemTotal": 10, "MemFree": 20, "Active(file)": 0, "Inactive(file)": 0, "SReclaimable": 0}
        )
        == 0
    )
    with pytest.raises(ValueError, match="SReclaimable"):
        nodeinfo.numa_memory_usage_bytes(
            {"MemTotal": 1, "MemFree": 0, "Active(file)": 0, "Inactive(file)": 0}
        )


def test_read_node_meminfo(host: HostTree) -> None:
    host.write_node_meminfo(1, {"MemTotal": 4, "MemFree": 1})
    assert nodeinfo.read_node_meminfo(host.paths, 1) == {"MemTotal": 4096, "MemFree": 1024}
    with pytest.raises(OSError):
        nodeinfo.read_node_meminfo(host.paths, 7)
