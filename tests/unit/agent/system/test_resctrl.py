"""Tests of the resctrl reader on the fake tree (no resctrl on the CI host: cgroup v1 hybrid, no RDT)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.system import resctrl
from tests.fixtures.hosttree import HostTree


def test_parse_counter() -> None:
    assert resctrl.parse_counter("123456\n", "x") == 123456
    with pytest.raises(ValueError, match="x: not a non-negative integer"):
        resctrl.parse_counter("Unavailable\n", "x")
    with pytest.raises(ValueError):
        resctrl.parse_counter("-1", "x")


def test_parse_mounts() -> None:
    mounts = "sysfs /sys sysfs rw 0 0\nresctrl /sys/fs/resctrl resctrl rw,relatime 0 0\n"
    assert resctrl.parse_mounts_has_resctrl(mounts, "/sys/fs/resctrl/")
    assert not resctrl.parse_mounts_has_resctrl(mounts, "/host-sys/fs/resctrl")
    assert not resctrl.parse_mounts_has_resctrl("none /sys/fs/resctrl tmpfs rw 0 0\n", "/sys/fs/resctrl")


def test_not_mounted(host: HostTree) -> None:
    root = resctrl.resctrl_root(host.paths)
    assert root == host.paths.sys / "fs" / "resctrl"
    assert not resctrl.is_resctrl_mounted(root)
    assert resctrl.read_resctrl(root) == []


def test_read_groups(host: HostTree) -> None:
    root = host.write_resctrl(
        {"LSR": {"0": (100, 10, 20), "1": (200, 30, 40)}, "BE": {"0": (5, 6, 7)}, "other": {"0": (1, 1, 1)}}
    )
    assert resctrl.is_resctrl_mounted(root)
    got = resctrl.read_resctrl(root)
    assert got == [
        resctrl.ResctrlDomain("LSR", "0", 100, 10, 20),
        resctrl.ResctrlDomain("LSR", "1", 200, 30, 40),
        resctrl.ResctrlDomain("BE", "0", 5, 6, 7),
    ]


def test_cache_ids_sort_numerically(tmp_path: Path) -> None:
    for cid in ("10", "2"):
        d = tmp_path / "LS" / "mon_data" / f"mon_L3_{cid}"
        d.mkdir(parents=True)
        for f in ("llc_occupancy", "mbm_local_bytes", "mbm_total_bytes"):
            (d / f).write_text("1\n")
    assert [d.cache_id for d in resctrl.read_group(tmp_path, "LS")] == ["2", "10"]


def test_bad_counter_fails_group(host: HostTree) -> None:
    root = host.write_resctrl({"LS": {"0": (1, 2, 3)}})
    (root / "LS" / "mon_data" / "mon_L3_0" / "mbm_total_bytes").write_text("Unavailable\n")
    with pytest.raises(ValueError, match="mbm_total_bytes"):
        resctrl.read_resctrl(root)
