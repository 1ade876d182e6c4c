"""CPU burst on the real node (docs/rules/koordlet.md#cpu-burst-gate-cpuburst-every-1-s) and drift
re-assertion (docs/rules/koordlet.md#re-asserting-written-values).

An LS Burstable pod with a 200m CPU limit burns a core, so the kernel throttles it. With the NodeSLO's
``cpuBurstStrategy`` policy ``auto``, the koordlet writes ``cpu.cfs_burst_us`` on the container's and the
pod's cgroup: ``int(limit_cores × cpuBurstPercent/100 × 100000)`` (the pod value is the sum over its
containers). The kernel refuses a burst above the quota (EINVAL), so the test uses cpuBurstPercent 50.
The limiter is switched off (``cfsQuotaBurstPeriodSeconds: -1``: always allows) and the share-pool
threshold set to 100 %, so a throttled container's quota scales up ×1.2 a tick, never past
``ceil = base × cfsQuotaBurstPercent/100``; the quota must stay within [base, ceil] throughout.

Drift: once the burst value is in place, the test overwrites it (as the kubelet might); the burst write is
cacheable (not re-checked by the strategy for 60 s), so it is the koordlet's periodic ``reassert`` that puts
it back and counts it in ``koordlet_cgroup_drift_total{file="cpu.cfs_burst_us"}``.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from agent.system.cgroup import CPU_BURST, CPU_QUOTA, CgroupVersion, cgroup_write_path, read_cgroup
from koord.localcluster.podspec import BURN_CPU
from tests.e2e.agenthelpers import audit_records, running_koordlet
from tests.e2e.conftest import RealNode, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.apiserver]

LIMIT_MILLI = 200
BURST_PERCENT = 50
QUOTA_BURST_PERCENT = 300
BURST = {
    "cpuBurstStrategy": {
        "policy": "auto",
        "cpuBurstPercent": BURST_PERCENT,
        "cfsQuotaBurstPercent": QUOTA_BURST_PERCENT,
        "cfsQuotaBurstPeriodSeconds": -1,
        "sharePoolThresholdPercent": 100,
    }
}
GATES = "--feature-gates=CPUBurst=true,BECPUSuppress=false"
BASE = LIMIT_MILLI * 100
CEIL = int(BASE * QUOTA_BURST_PERCENT / 100)
EXPECTED_BURST = int((LIMIT_MILLI / 1000) * (BURST_PERCENT / 100) * 100_000)
LS_RESOURCES = {
    "requests": {"cpu": "100m", "memory": "16Mi"},
    "limits": {"cpu": f"{LIMIT_MILLI}m", "memory": "32Mi"},
}


def _burner(real_node: RealNode, agent: Any, namespace: str, name: str) -> tuple[str, str]:
    """Starts the LS burner; (pod cgroup dir, container cgroup dir) once the koordlet knows them."""
    real_node.core.create_namespaced_pod(namespace, real_node.pod(
        name, namespace=namespace, qos="Burstable", command=BURN_CPU,
        labels={"koordinator.sh/qosClass": "LS"}, resources=LS_RESOURCES,
    ))  # fmt: skip

    def dirs() -> tuple[str, str] | None:
        for p in agent.states.pods():
            running = any(
                (s.get("state") or {}).get("running")
                for s in (p.pod.get("status") or {}).get("containerStatuses") or []
            )
            if p.name == name and p.containers and running:
                return p.cgroup_dir, p.containers[0].cgroup_dir
        return None

    found: tuple[str, str] = wait_for("the LS burner running", dirs, 90)
    return found


def _share_pool_ratio(agent: Any) -> float | None:
    """Node CPU over the last 10 s / CPUs (the LS burner counts in the share pool)."""
    now = int(time.time() * 1000)
    res = agent.cache.query("node_cpu_usage", {}, now - 10_000, now)
    return float(res.avg()) / (os.cpu_count() or 1) if res.count() else None


def _file(root: Path, version: CgroupVersion, spec: Any, cgroup_dir: str) -> Path:
    return cgroup_write_path(root, version, spec, cgroup_dir)


def _skip_without_burst(root: Path, version: CgroupVersion, cgroup_dir: str) -> None:
    path = _file(root, version, CPU_BURST, cgroup_dir)
    if not path.exists():
        pytest.skip(f"this kernel has no {path.name} (CFS burst needs Linux ≥ 5.14)")


def test_cpu_burst_and_quota_scaling(real_node: RealNode, e2e_namespace: str, tmp_path: Path) -> None:
    with running_koordlet(real_node, tmp_path, BURST, [GATES]) as env:
        agent = env["agent"]
        root, version = real_node.cgroup_root, agent.cgroup_version
        wait_for("koordlet ready", lambda: agent.ready, 30)
        pod_dir, ctr_dir = _burner(real_node, agent, e2e_namespace, f"burst-{uuid.uuid4().hex[:6]}")
        _skip_without_burst(root, version, ctr_dir)

        def burst(d: str) -> int:
            return int(read_cgroup(root, version, CPU_BURST, d))

        def quota(d: str) -> int:
            return int(read_cgroup(root, version, CPU_QUOTA, d))

        wait_for(
            f"cfs burst = {EXPECTED_BURST} on the container and the pod",
            lambda: burst(ctr_dir) == EXPECTED_BURST and burst(pod_dir) == EXPECTED_BURST,
            20,
        )
        # Throttled at 200m while burning a core: the quota grows ×1.2 a tick up to the ceiling (unless the
        # noisy node's share pool looks cooling/overloaded, which holds it or pulls it back to base).
        seen: list[int] = []

        def scaled_up() -> bool:
            seen.append(quota(ctr_dir))
            return seen[-1] > BASE

        scaled = True
        try:
            wait_for(f"the container quota above its base {BASE}", scaled_up, 30, 0.25)
        except AssertionError:
            scaled = False
            # Legitimate only when the share pool is (nearly) full: cooling holds, overload scales down.
            busy = _share_pool_ratio(agent)
            assert busy is not None and busy >= 0.85, f"no scale-up, share pool at {busy}"
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            seen.append(quota(ctr_dir))
            time.sleep(0.25)
        assert all(BASE <= q <= CEIL for q in seen), f"quota left [{BASE}, {CEIL}]: {sorted(set(seen))}"
        # The pod's quota moved by the same deltas (one container: pod quota = container quota).
        assert BASE <= quota(pod_dir) <= CEIL
        assert burst(ctr_dir) == EXPECTED_BURST  # unchanged by the quota scaling

        writes = [a for a in audit_records(env["audit"]) if a.get("strategy") == "CPUBurst"]
        burst_file, quota_file = (_file(root, version, f, ctr_dir) for f in (CPU_BURST, CPU_QUOTA))
        assert any(a["file"] == str(burst_file) and a["new"] == str(EXPECTED_BURST) for a in writes)
        assert not scaled or any(a["file"] == str(quota_file) and int(a["new"]) > BASE for a in writes)
        assert all(not a["dry_run"] for a in writes)


def test_drifted_burst_value_reasserted(real_node: RealNode, e2e_namespace: str, tmp_path: Path) -> None:
    slo = {"cpuBurstStrategy": {**BURST["cpuBurstStrategy"], "policy": "cpuBurstOnly"}}
    with running_koordlet(real_node, tmp_path, slo, [GATES], reassert_interval_seconds=2.0) as env:
        agent = env["agent"]
        root, version = real_node.cgroup_root, agent.cgroup_version
        wait_for("koordlet ready", lambda: agent.ready, 30)
        _, ctr_dir = _burner(real_node, agent, e2e_namespace, f"drift-{uuid.uuid4().hex[:6]}")
        _skip_without_burst(root, version, ctr_dir)
        path = _file(root, version, CPU_BURST, ctr_dir)
        labels = {"node": env["node"], "file": path.name}

        def drift() -> float:
            return agent.registry.get_sample_value("koordlet_cgroup_drift_total", labels) or 0.0

        wait_for(
            f"cfs burst = {EXPECTED_BURST}",
            lambda: int(read_cgroup(root, version, CPU_BURST, ctr_dir)) == EXPECTED_BURST,
            20,
        )
        before = drift()
        path.write_text("0")  # someone else (the kubelet) resets it
        assert int(read_cgroup(root, version, CPU_BURST, ctr_dir)) == 0
        t0 = time.monotonic()
        wait_for(
            "the koordlet to re-assert the burst value",
            lambda: int(read_cgroup(root, version, CPU_BURST, ctr_dir)) == EXPECTED_BURST,
            15,
            0.1,
        )
        took = time.monotonic() - t0
        wait_for("the drift counted", lambda: drift() >= before + 1, 5)
        assert took <= 2.0 * 2 + 1.0, f"re-asserted after {took:.1f}s with a 2 s re-assert interval"
