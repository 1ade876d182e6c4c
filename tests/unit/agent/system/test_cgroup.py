"""Tests of HostPaths, cgroup version detection, the cgroup file table and its typed readers."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import pytest

from agent.system import cgroup as cg
from agent.system.cgroup import CgroupUnsupportedError, CgroupVersion, CpuStat, HostPaths
from agent.system.podcgroup import KubeQOS
from agent.system.procfs import PressureStats
from tests.fixtures.hosttree import HostTree

V1, V2 = CgroupVersion.V1, CgroupVersion.V2
T = TypeVar("T")
UID = "0b5a3c2e-1111-2222-3333-444455556666"


def _read(host: HostTree, spec: cg.CgroupFile[T], cgroup_dir: str) -> T:
    return cg.read_cgroup(host.paths.cgroup_root, host.version, spec, cgroup_dir)


def test_host_paths_defaults_fit_daemonset() -> None:
    paths = HostPaths()
    assert paths.cgroup_root == Path("/host-cgroup")
    assert paths.proc == Path("/proc")
    assert paths.sys == Path("/host-sys")
    assert HostPaths(proc=Path("/p")).proc == Path("/p")


def test_detect_version(host: HostTree) -> None:
    assert cg.detect_cgroup_version(host.paths.cgroup_root) is host.version


def test_detect_hybrid_is_v1(tmp_path: Path) -> None:
    (tmp_path / "cpuacct").mkdir()
    (tmp_path / "unified").mkdir()
    (tmp_path / "unified" / "cgroup.controllers").write_text("")
    assert cg.detect_cgroup_version(tmp_path) is V1


def test_detect_nothing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no cgroup"):
        cg.detect_cgroup_version(tmp_path)


def test_file_table_is_complete() -> None:
    names = [f.name for f in cg.CGROUP_FILES]
    assert len(names) == len(set(names)) == 13
    for f in cg.CGROUP_FILES:
        assert f.v1_file and f.v1_subsystem and f.v1_convert and f.v2_file and f.v2_convert


def test_paths_per_version(tmp_path: Path) -> None:
    assert cg.cgroup_file_path(tmp_path, V1, cg.CPU_USAGE, "kubepods/pod1/") == (
        tmp_path / "cpuacct/kubepods/pod1/cpuacct.usage"
    )
    assert (
        cg.cgroup_file_path(tmp_path, V2, cg.CPU_USAGE, "/kubepods/pod1/")
        == tmp_path / "kubepods/pod1/cpu.stat"
    )
    assert cg.cgroup_file_path(tmp_path, V2, cg.MEMORY_USAGE, "") == tmp_path / "memory.current"
    assert cg.cgroup_file_path(tmp_path, V1, cg.CPUSET_CPUS, "") == tmp_path / "cpuset/cpuset.cpus"


def test_unsupported_file(tmp_path: Path) -> None:
    v1_only = cg.CgroupFile[int]("x", "cpu", "cpu.x", None, None, None)
    with pytest.raises(CgroupUnsupportedError, match="v2"):
        cg.cgroup_file_path(tmp_path, V2, v1_only, "")
    with pytest.raises(CgroupUnsupportedError, match="v1"):
        cg.cgroup_file_path(tmp_path, V1, cg.CgroupFile[int]("y", None, None, None, "y", None), "")
    with pytest.raises(CgroupUnsupportedError, match="v1"):
        cg.convert_cgroup(v1_only, V1, "1", "cpu.x")


def test_cpu_usage_and_stat(host: HostTree) -> None:
    pod = host.add_pod(UID, KubeQOS.BURSTABLE)
    host.set_cpu_usage(pod, 5_000_000_000)
    host.set_cpu_stat(pod, nr_periods=100, nr_throttled=7, throttled_ns=3_000_000)
    assert _read(host, cg.CPU_USAGE, pod) == 5_000_000_000
    assert _read(host, cg.CPU_STAT, pod) == CpuStat(100, 7, 3_000_000)
    # v2 writes cpu.stat once for both: the usage survives the throttle update.
    assert _read(host, cg.CPU_USAGE, pod) == 5_000_000_000


@pytest.mark.parametrize(("quota", "period"), [(-1, 100000), (250000, 100000), (50000, 50000)])
def test_cpu_quota_period(host: HostTree, quota: int, period: int) -> None:
    host.set_cpu_limit("kubepods/", quota, period)
    assert _read(host, cg.CPU_QUOTA, "kubepods/") == quota
    assert _read(host, cg.CPU_PERIOD, "kubepods/") == period


def test_cpu_shares_v1_and_weight_v2(host: HostTree) -> None:
    if host.version is V1:
        host.set_cpu_shares("kubepods/", 1024)
        assert _read(host, cg.CPU_SHARES, "kubepods/") == 1024
    else:
        for weight, shares in [(1, 2), (10000, 262144), (100, 2597)]:
            host.set_cpu_shares("kubepods/", weight)
            assert _read(host, cg.CPU_SHARES, "kubepods/") == shares
        host.set_cpu_shares("kubepods/", 0)
        with pytest.raises(ValueError, match="out of"):
            _read(host, cg.CPU_SHARES, "kubepods/")


def test_cpuset(host: HostTree) -> None:
    pod = host.add_pod(UID, KubeQOS.BESTEFFORT)
    host.set_cpuset(pod, "0-3,8,10-11")
    assert _read(host, cg.CPUSET_CPUS, pod) == [0, 1, 2, 3, 8, 10, 11]


@pytest.mark.parametrize(
    ("text", "cpus"), [("", []), ("5", [5]), ("3,1-2,2", [1, 2, 3]), (" 0-1 , 4 \n", [0, 1, 4])]
)
def test_parse_cpuset_list(text: str, cpus: list[int]) -> None:
    assert cg.parse_cpuset_list(text) == cpus


@pytest.mark.parametrize("text", ["a", "1-", "3-1", "-1", "1,,2", "1-2-3"])
def test_parse_cpuset_list_errors(text: str) -> None:
    with pytest.raises(ValueError, match=r"cpuset\.cpus: bad cpuset"):
        cg.parse_cpuset_list(text)


def test_memory_stat_anon_usage(host: HostTree) -> None:
    pod = host.add_pod(UID, KubeQOS.GUARANTEED)
    host.set_memory_stat(
        pod, inactive_anon=100, active_anon=200, unevictable=5, inactive_file=1000, active_file=7
    )
    stat = _read(host, cg.MEMORY_STAT, pod)
    assert stat.usage_anon == 305
    assert (stat.cache, stat.rss, stat.inactive_file, stat.active_file) == (1007, 300, 1000, 7)


def test_memory_stat_v1_uses_total_keys(tmp_path: Path) -> None:
    host = HostTree(tmp_path, V1)
    text = "".join(f"{k} 1\n" for k in ("cache", "rss", "inactive_file", "active_file", "unevictable"))
    text += "inactive_anon 1\nactive_anon 1\n"
    text += "".join(
        f"total_{k} {v}\n"
        for k, v in [
            ("cache", 0),
            ("rss", 0),
            ("inactive_file", 0),
            ("active_file", 0),
            ("inactive_anon", 40),
            ("active_anon", 2),
            ("unevictable", 0),
        ]
    )
    host.write(cg.MEMORY_STAT, "kubepods/", text)
    assert _read(host, cg.MEMORY_STAT, "kubepods/").usage_anon == 42


@pytest.mark.parametrize(
    "key", ["cache", "rss", "inactive_file", "active_file", "inactive_anon", "active_anon", "unevictable"]
)
def test_memory_stat_missing_key_fails(host: HostTree, key: str) -> None:
    v2_key = {"cache": "file", "rss": "anon"}.get(key, key) if host.version is V2 else key
    host.set_memory_stat("kubepods/", omit=v2_key)
    expected = v2_key if host.version is V2 else f"total_{key}"
    with pytest.raises(ValueError, match=f"memory.stat: missing key '{expected}'"):
        _read(host, cg.MEMORY_STAT, "kubepods/")


def test_memory_usage_and_limit(host: HostTree) -> None:
    host.set_memory_usage("kubepods/", 123456)
    assert _read(host, cg.MEMORY_USAGE, "kubepods/") == 123456
    host.set_memory_limit("kubepods/", 1 << 30)
    assert _read(host, cg.MEMORY_LIMIT, "kubepods/") == 1 << 30
    host.set_memory_limit("kubepods/", -1)
    expected = -1 if host.version is V2 else 9223372036854771712
    assert _read(host, cg.MEMORY_LIMIT, "kubepods/") == expected


@pytest.mark.parametrize("spec", [cg.CPU_PRESSURE, cg.MEMORY_PRESSURE, cg.IO_PRESSURE], ids=lambda s: s.name)
def test_pressure_files(host: HostTree, spec: cg.CgroupFile[object]) -> None:
    pod = host.add_pod(UID, KubeQOS.BURSTABLE)
    host.write(
        spec,
        pod,
        "some avg10=2.00 avg60=1.00 avg300=0.50 total=10\nfull avg10=1.00 avg60=0 avg300=0 total=5\n",
    )
    psi = cg.read_cgroup(host.paths.cgroup_root, host.version, spec, pod)
    assert isinstance(psi, PressureStats)
    assert psi.some.avg10 == 2.0
    assert psi.full is not None and psi.full.total == 5


@pytest.mark.parametrize(
    ("spec", "text", "match"),
    [
        (cg.CPU_USAGE, "", "expected a single value"),
        (cg.CPU_USAGE, "1 2", "expected a single value"),
        (cg.CPU_USAGE, "abc", "not an integer"),
        (cg.MEMORY_USAGE, "-5", "negative value"),
        (cg.CPU_QUOTA, "0", "neither -1 nor positive"),
        (cg.CPU_PERIOD, "0", "not positive"),
        (cg.MEMORY_LIMIT, "-2", "neither -1 nor non-negative"),
        (cg.CPU_STAT, "nr_periods 1\nnr_throttled 0\n", "missing key"),
        (cg.CPU_STAT, "nr_periods 1 2\n", "line 1: expected 'key value'"),
        (cg.CPU_STAT, "nr_periods x\n", "line 1: not an integer"),
        (cg.CPU_STAT, "nr_periods 1\nnr_throttled x\nthrottled_time 3\n", "line 2: not an integer"),
        (cg.CPU_STAT, "nr_periods 1 2\nnr_throttled 1\n", "line 1: expected 'key value'"),
        (cg.CPU_USAGE, "-3\n", "negative value"),
        (cg.MEMORY_NUMA_STAT, "file=1 N0=1\n", "first line is not 'total="),
        (cg.MEMORY_NUMA_STAT, "total=1 N0=x\n", "bad field 'N0=x'"),
    ],
)
def test_v1_converter_errors(spec: cg.CgroupFile[object], text: str, match: str) -> None:
    with pytest.raises(ValueError, match=f"^f: .*{match}"):
        cg.convert_cgroup(spec, V1, text, "f")


@pytest.mark.parametrize(
    ("spec", "text", "match"),
    [
        (cg.CPU_USAGE, "user_usec 1\n", "missing key 'usage_usec'"),
        (cg.CPU_QUOTA, "max", "expected '<quota|max> <period>'"),
        (cg.CPU_QUOTA, "x 100000", "not an integer"),
        (cg.CPU_PERIOD, "max max", "not an integer"),
        (cg.CPU_PERIOD, "max 0", "not positive"),
        (cg.MEMORY_LIMIT, "unlimited", "not an integer"),
        (cg.CPU_STAT, "nr_periods 1\nnr_throttled 0\nthrottled_time 5\n", "missing key 'throttled_usec'"),
        (cg.CPU_USAGE, "usage_usec -5\n", "negative value"),
        (cg.MEMORY_NUMA_STAT, "file N0=1\n", "expected both 'anon' and 'file' lines"),
    ],
)
def test_v2_converter_errors(spec: cg.CgroupFile[object], text: str, match: str) -> None:
    with pytest.raises(ValueError, match=f"^f: .*{match}"):
        cg.convert_cgroup(spec, V2, text, "f")


def test_missing_file_is_oserror(host: HostTree) -> None:
    with pytest.raises(FileNotFoundError):
        _read(host, cg.CPU_USAGE, "kubepods/podnothere/")


def test_kv_files_accept_blank_lines() -> None:
    text = "\nnr_periods 10\n\nnr_throttled 3\nthrottled_time 99\n\n"
    assert cg.convert_cgroup(cg.CPU_STAT, V1, text, "cpu.stat") == CpuStat(10, 3, 99)


def test_numa_stat(host: HostTree) -> None:
    pod = host.add_pod(UID, KubeQOS.BURSTABLE)
    host.set_numa_stat(pod, {0: 10, 1: 3})
    assert _read(host, cg.MEMORY_NUMA_STAT, pod) == {0: 10, 1: 3}


def test_numa_stat_v2_truncates_each_line() -> None:
    text = "anon N0=4097 N1=8191\nfile N0=4095 N1=4096\n"
    # each line is divided by 4096 separately: 1 + 0 and 1 + 1
    assert cg.convert_cgroup(cg.MEMORY_NUMA_STAT, V2, text, "x") == {0: 1, 1: 2}
    # v1 reads the first line only, and a node listed twice keeps its last value
    assert cg.convert_cgroup(cg.MEMORY_NUMA_STAT, V1, "total=3 N0=1 N0=2\nfile=x\n", "x") == {0: 2}
