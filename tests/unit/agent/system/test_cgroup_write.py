"""The writable cgroup knobs: formatters, write validators, v2 mapping, equality and leveled merge rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.system import cgroup as cg
from agent.system.cgroup import CgroupVersion

V1, V2 = CgroupVersion.V1, CgroupVersion.V2


@pytest.mark.parametrize(
    ("spec", "version", "value", "text"),
    [
        (cg.CPU_QUOTA, V1, 200000, "200000"),
        (cg.CPU_QUOTA, V1, -1, "-1"),
        (cg.CPU_QUOTA, V2, 200000, "200000"),  # quota alone: the kernel keeps the period
        (cg.CPU_QUOTA, V2, -1, "max"),
        (cg.CPU_SHARES, V1, 1024, "1024"),
        (cg.CPU_SHARES, V2, 1024, "39"),
        (cg.CPU_SHARES, V2, 2, "1"),
        (cg.CPU_SHARES, V2, 262144, "10000"),
        (cg.CPU_BURST, V1, 50000, "50000"),
        (cg.CPU_BURST, V2, 50000, "50000"),
        (cg.CPU_IDLE, V2, 1, "1"),
        (cg.CPUSET_CPUS, V1, [3, 0, 1, 2, 8, 10, 11], "0-3,8,10-11"),
        (cg.CPUSET_CPUS, V2, "0,1,2,3,5", "0-3,5"),
        (cg.MEMORY_LIMIT, V1, -1, "-1"),
        (cg.MEMORY_LIMIT, V2, -1, "max"),
        (cg.MEMORY_LIMIT, V2, 1 << 30, str(1 << 30)),
        (cg.MEMORY_MIN, V2, 4096, "4096"),
        (cg.MEMORY_LOW, V1, -1, "max"),
        (cg.MEMORY_HIGH, V2, -1, "max"),
    ],
)
def test_format(spec: cg.CgroupFile[Any], version: CgroupVersion, value: Any, text: str) -> None:
    assert cg.format_cgroup(spec, version, value) == text


def test_weight_conversion_matches_kubelet() -> None:
    for shares in (2, 3, 100, 1024, 2048, 262143, 262144):
        weight = int(cg.format_cgroup(cg.CPU_SHARES, V2, shares))
        assert weight == min(max(1 + (shares - 2) * 9999 // 262142, 1), 10000)
        # the existing reverse mapping lands in the shares range
        assert 2 <= cg.convert_cgroup(cg.CPU_SHARES, V2, f"{weight}\n", "w") <= 262144


@pytest.mark.parametrize(
    ("spec", "value"),
    [
        (cg.CPUSET_CPUS, []),
        (cg.CPUSET_CPUS, ""),
        (cg.CPUSET_CPUS, [-1]),
        (cg.CPU_QUOTA, 0),
        (cg.CPU_QUOTA, 999),
        (cg.CPU_QUOTA, -2),
        (cg.CPU_SHARES, 1),
        (cg.CPU_SHARES, 262145),
        (cg.CPU_IDLE, 2),
        (cg.MEMORY_LIMIT, -5),
        (cg.CPU_BURST, "100"),
    ],
)
@pytest.mark.parametrize("version", [V1, V2])
def test_write_validation(spec: cg.CgroupFile[Any], value: Any, version: CgroupVersion) -> None:
    with pytest.raises(ValueError, match=spec.name):
        cg.format_cgroup(spec, version, value)


@pytest.mark.parametrize("spec", [cg.CPU_STAT, cg.CPU_PERIOD, cg.CGROUP_PROCS, cg.TASKS, cg.MEMORY_USAGE])
def test_read_only_files_refuse_formatting(spec: cg.CgroupFile[Any]) -> None:
    assert not spec.writable
    with pytest.raises(cg.CgroupUnsupportedError):
        cg.format_cgroup(spec, V2, 1)


def test_writable_table() -> None:
    names = [f.name for f in cg.WRITABLE_CGROUP_FILES]
    assert len(names) == len(set(names))
    for f in cg.WRITABLE_CGROUP_FILES:
        assert f.v1_format and f.v2_format and f.v1_file and f.v2_file


def test_write_paths(tmp_path: Path) -> None:
    assert (
        cg.cgroup_write_path(tmp_path, V2, cg.CPUSET_CPUS, "kubepods/") == tmp_path / "kubepods/cpuset.cpus"
    )
    assert cg.cgroup_file_path(tmp_path, V2, cg.CPUSET_CPUS, "kubepods/").name == "cpuset.cpus.effective"
    assert cg.cgroup_write_path(tmp_path, V1, cg.CPUSET_CPUS, "kubepods/") == (
        tmp_path / "cpuset/kubepods/cpuset.cpus"
    )
    assert cg.cgroup_write_path(tmp_path, V2, cg.CPU_BURST, "a/") == tmp_path / "a/cpu.max.burst"
    assert (
        cg.cgroup_write_path(tmp_path, V1, cg.MEMORY_LIMIT, "a/")
        == tmp_path / "memory/a/memory.limit_in_bytes"
    )
    assert cg.cgroup_file_path(tmp_path, V2, cg.TASKS, "a/") == tmp_path / "a/cgroup.threads"


def test_read_procs(tmp_path: Path) -> None:
    assert cg.convert_cgroup(cg.CGROUP_PROCS, V1, "1\n22\n333\n", "p") == [1, 22, 333]
    assert cg.convert_cgroup(cg.TASKS, V2, "", "t") == []


@pytest.mark.parametrize(
    ("spec", "current", "new", "equal"),
    [
        (cg.CPU_QUOTA, "max 100000\n", "max", True),
        (cg.CPU_QUOTA, "200000 100000\n", "200000", True),
        (cg.CPU_QUOTA, "200000 100000\n", "100000", False),
        (cg.CPU_QUOTA, "-1\n", "-1", True),
        (cg.MEMORY_LIMIT, "9223372036854771712\n", "-1", True),
        (cg.MEMORY_LIMIT, "9223372036854775807\n", "max", True),
        (cg.MEMORY_LIMIT, "max\n", "9223372036854775807", True),
        (cg.MEMORY_LIMIT, "1024\n", "max", False),
        (cg.CPUSET_CPUS, "0,1,2,3\n", "0-3", True),
        (cg.CPUSET_CPUS, "0-2\n", "0-3", False),
        (cg.CPUSET_CPUS, "\n", "0-3", False),
        (cg.CPU_SHARES, "39\n", "39", True),
    ],
)
def test_text_equal(spec: cg.CgroupFile[Any], current: str, new: str, equal: bool) -> None:
    assert cg.cgroup_text_equal(spec, current, new) is equal


def test_merge_rules() -> None:
    assert cg.CPUSET_CPUS.merge is not None and cg.CPU_QUOTA.merge is not None
    assert cg.CPUSET_CPUS.merge([0, 1], [2, 3]) == [0, 1, 2, 3]
    assert cg.CPUSET_CPUS.merge([0, 1, 2, 3], [2, 3]) is None  # subset: no loosening
    assert cg.CPU_QUOTA.merge(100000, 200000) == 200000
    assert cg.CPU_QUOTA.merge(200000, 100000) is None
    assert cg.CPU_QUOTA.merge(-1, 100000) is None  # -1 is +inf
    assert cg.CPU_QUOTA.merge(100000, -1) == -1
    for spec in (cg.MEMORY_MIN, cg.MEMORY_LOW, cg.MEMORY_HIGH):
        assert spec.merge is not None and spec.merge(10, 20) == 20 and spec.merge(20, 10) is None
    assert cg.CPU_SHARES.merge is None and cg.MEMORY_LIMIT.merge is None
