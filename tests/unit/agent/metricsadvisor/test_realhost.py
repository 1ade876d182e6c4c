"""The collectors against the REAL host's /proc (this CI machine: cgroup v1 hybrid, no resctrl, no cgroup PSI;
resctrl and cgroup PSI are covered on the fake tree)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from agent.metricsadvisor.framework import NODE, CollectContext
from agent.metricsadvisor.noderesource import NodeResourceCollector
from agent.metricsadvisor.psi import PSICollector
from agent.system.cgroup import CgroupVersion, HostPaths
from agent.system.podcgroup import CgroupDriver
from agent.system.procfs import read_meminfo
from tests.unit.agent.metricsadvisor.conftest import Pods


def _ctx() -> CollectContext:
    return CollectContext(
        paths=HostPaths(cgroup_root=Path("/sys/fs/cgroup"), proc=Path("/proc"), sys=Path("/sys")),
        cgroup_version=CgroupVersion.V1,
        cgroup_driver=CgroupDriver.CGROUPFS,
        pods=Pods(),
    )


def test_real_node_cpu_and_memory() -> None:
    ctx = _ctx()
    c = NodeResourceCollector()
    assert c.collect(ctx) == []
    deadline = time.monotonic() + 0.3
    while time.monotonic() < deadline:  # burn some CPU so the delta is real
        sum(range(10_000))
    samples = {s.kind: s.value for s in c.collect(ctx)}
    ncpu = os.cpu_count() or 1
    assert 0.0 < samples["node_cpu_usage"] <= ncpu * 1.05
    info = read_meminfo(Path("/proc"))
    assert 0 < samples["node_memory_usage"] < info["MemTotal"]
    assert ctx.shared.latest(NODE) is not None


@pytest.mark.skipif(not Path("/proc/pressure/cpu").exists(), reason="kernel without PSI (/proc/pressure)")
def test_real_node_pressure() -> None:
    ctx = _ctx()
    c = PSICollector()
    assert c.enabled(ctx)
    samples = c.collect(ctx)
    kinds = {(s.labels["psi_resource"], s.labels["psi_degree"]) for s in samples if s.kind == "node_psi"}
    assert {("cpu", "some"), ("mem", "some"), ("mem", "full"), ("io", "some"), ("io", "full")} <= kinds
    assert all(0.0 <= s.value <= 100.0 for s in samples)


@pytest.mark.skipif(Path("/sys/fs/resctrl/info").is_dir(), reason="host has resctrl; this checks its absence")
def test_real_resctrl_absent_is_disabled() -> None:
    from agent.metricsadvisor.resctrl import ResctrlCollector

    assert not ResctrlCollector().enabled(_ctx())  # no RDT here: resctrl is covered on the fake tree
