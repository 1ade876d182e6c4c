"""The executor against the REAL host cgroup v1 cpu hierarchy: a scratch cgroup koord-test-<random>."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from agent.resourceexecutor import ResourceExecutor, WriteStatus
from agent.resourceexecutor.actions import CgroupWrite
from agent.system import cgroup as cg
from agent.system.cgroup import CgroupVersion, HostPaths

ROOT = Path("/sys/fs/cgroup")


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "not root: cannot create a scratch cgroup"
    if (ROOT / "cgroup.controllers").exists():
        return "host is cgroup v2 (this test covers the v1 cpu hierarchy)"
    cpu = ROOT / "cpu"
    if not (cpu / "cpu.cfs_quota_us").exists():
        return f"{cpu}/cpu.cfs_quota_us not found: no cgroup v1 cpu controller mounted"
    if not os.access(cpu, os.W_OK):
        return f"{cpu} is not writable"
    return None


@pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))
def test_real_cgroup_quota_write(tmp_path: Path) -> None:
    name = f"koord-test-{uuid.uuid4().hex[:8]}"
    scratch = ROOT / "cpu" / name
    scratch.mkdir()
    try:
        ex = ResourceExecutor(HostPaths(cgroup_root=ROOT), CgroupVersion.V1, "test-node")
        write = CgroupWrite("test", cg.CPU_QUOTA, name + "/", 50000, cacheable=False)
        [res] = ex.apply([write])
        assert res.status is WriteStatus.WRITTEN, res.reason
        assert res.old == "-1"
        assert cg.read_cgroup(ROOT, CgroupVersion.V1, cg.CPU_QUOTA, name) == 50000
        assert ex.apply([write])[0].status is WriteStatus.UNCHANGED
        [bad] = ex.apply([CgroupWrite("test", cg.CPU_QUOTA, name + "/", 10**15, cacheable=False)])
        assert bad.status is WriteStatus.FAILED  # the kernel rejects it (EINVAL), reported not raised
        [back] = ex.apply([CgroupWrite("test", cg.CPU_QUOTA, name + "/", -1, cacheable=False)])
        assert back.status is WriteStatus.WRITTEN
        assert cg.read_cgroup(ROOT, CgroupVersion.V1, cg.CPU_QUOTA, name) == -1
    finally:
        scratch.rmdir()
    assert not scratch.exists()
