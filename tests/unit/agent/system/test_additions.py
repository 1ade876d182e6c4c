"""Tests of cgroup driver detection, memory.numa_stat, the fast per-tick converters and reader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.system import cgroup as cg
from agent.system.cgroup import CgroupVersion, HostPaths
from agent.system.fastread import convert_fast, read_text_fast
from agent.system.podcgroup import CgroupDriver, KubeQOS, detect_cgroup_driver
from tests.fixtures.hosttree import HostTree

V1, V2 = CgroupVersion.V1, CgroupVersion.V2


def test_detect_driver(host: HostTree) -> None:
    assert detect_cgroup_driver(host.paths, host.version) is host.driver


def test_detect_driver_nothing(tmp_path: Path) -> None:
    paths = HostPaths(cgroup_root=tmp_path)
    with pytest.raises(ValueError, match=r"neither kubepods\.slice"):
        detect_cgroup_driver(paths, V2)
    (tmp_path / "kubepods").mkdir()  # v1 looks under cpu/, not at the root
    with pytest.raises(ValueError):
        detect_cgroup_driver(paths, V1)
    assert detect_cgroup_driver(paths, V2) is CgroupDriver.CGROUPFS


def test_numa_stat(host: HostTree) -> None:
    pod = host.add_pod("u1", KubeQOS.BURSTABLE)
    host.set_numa_stat(pod, {0: 10, 1: 3})
    assert cg.read_cgroup(host.paths.cgroup_root, host.version, cg.MEMORY_NUMA_STAT, pod) == {0: 10, 1: 3}


def test_numa_stat_v2_truncates_each_line() -> None:
    text = "anon N0=4097 N1=8191\nfile N0=4095 N1=4096\n"
    # each line is divided by 4096 separately: 1 + 0 and 1 + 1
    assert cg.parse_numa_stat(text, "x", V2) == {0: 1, 1: 2}
    with pytest.raises(ValueError, match="anon"):
        cg.parse_numa_stat("file N0=1\n", "x", V2)
    with pytest.raises(ValueError, match="total="):
        cg.parse_numa_stat("file=1 N0=1\n", "x", V1)


MEMSTAT_V1 = "".join(
    f"{p}{k} {i * 4096}\n"
    for p in ("", "total_")
    for i, k in enumerate(
        (
            "cache",
            "rss",
            "mapped_file",
            "inactive_anon",
            "active_anon",
            "inactive_file",
            "active_file",
            "unevictable",
        )
    )
)
MEMSTAT_V2 = "anon 7\nfile 8\nkernel 1\ninactive_anon 1\nactive_anon 2\n" + (
    "inactive_file 3\nactive_file 4\nunevictable 5\n"
)
CPUSTAT_V1 = "nr_periods 10\nnr_throttled 3\nthrottled_time 99\n"
CPUSTAT_V2 = "usage_usec 1500\nuser_usec 1\nsystem_usec 2\nnr_periods 10\nnr_throttled 3\nthrottled_usec 7\n"


@pytest.mark.parametrize(
    ("spec", "version", "text"),
    [
        (cg.MEMORY_STAT, V1, MEMSTAT_V1),
        (cg.MEMORY_STAT, V2, MEMSTAT_V2),
        (cg.CPU_STAT, V1, CPUSTAT_V1),
        (cg.CPU_STAT, V2, CPUSTAT_V2),
        (cg.CPU_USAGE, V2, CPUSTAT_V2),
        (cg.CPU_USAGE, V1, "12345\n"),
        (cg.CPUSET_CPUS, V1, "0-3\n"),
    ],
)
def test_convert_fast_equals_strict(spec: cg.CgroupFile[Any], version: CgroupVersion, text: str) -> None:
    assert convert_fast(spec, version, text, "f") == cg.convert_cgroup(spec, version, text, "f")


def test_convert_fast_falls_back_to_precise_errors() -> None:
    with pytest.raises(ValueError, match="missing key 'total_unevictable'"):
        convert_fast(cg.MEMORY_STAT, V1, MEMSTAT_V1.replace("total_unevictable", "x"), "memory.stat")
    with pytest.raises(ValueError, match="line 2: not an integer"):
        convert_fast(cg.CPU_STAT, V1, "nr_periods 1\nnr_throttled x\nthrottled_time 3\n", "cpu.stat")
    with pytest.raises(ValueError, match="negative"):
        convert_fast(cg.CPU_USAGE, V2, "usage_usec -5\n", "cpu.stat")
    with pytest.raises(ValueError, match="expected a single value"):
        convert_fast(cg.CPU_USAGE, V1, "12 13\n", "cpuacct.usage")
    with pytest.raises(ValueError, match="negative"):
        convert_fast(cg.CPU_USAGE, V1, "-3\n", "cpuacct.usage")


def test_kv_fast_path_keeps_line_errors() -> None:
    with pytest.raises(ValueError, match="line 1: expected 'key value'"):
        cg.convert_cgroup(cg.CPU_STAT, V1, "nr_periods 1 2\nnr_throttled 1\n", "cpu.stat")
    # blank lines take the slow path and are accepted
    assert cg.convert_cgroup(cg.CPU_STAT, V1, "\n" + CPUSTAT_V1 + "\n", "cpu.stat") == cg.CpuStat(10, 3, 99)


def test_read_text_fast(tmp_path: Path) -> None:
    small = tmp_path / "a"
    small.write_text("hello\n")
    assert read_text_fast(str(small)) == "hello\n"
    big = tmp_path / "b"
    big.write_text("x" * 200_000)
    assert read_text_fast(str(big)) == "x" * 200_000
    with pytest.raises(OSError):
        read_text_fast(str(tmp_path / "missing"))
