"""CPU burst ``decide`` (docs/rules/koordlet.md, CPU burst): eligibility, cfs_burst_us writes, the CFS quota
burst with node state, limiter and write orders, with fake metric/cgroup views and a seeded random source."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from agent.podmeta import PodMeta, pod_meta
from agent.qosmanager import cpuburst_limiter as lim
from agent.qosmanager.cpuburst import (
    BurstConfig,
    CPUBurstOptions,
    CPUBurstState,
    CPUBurstStrategy,
    NodeState,
    Operation,
    adjust_by_node,
    decide,
    milli_to_quota,
    target_quota,
)
from agent.qosmanager.framework import Snapshot
from agent.system.cgroup import CgroupFile, CgroupVersion
from agent.system.nodeinfo import CpuInfo, NodeTopology
from agent.system.podcgroup import CgroupDriver
from apis.nodeslo import NodeSLOSpec

NOW = datetime(2026, 1, 1, tzinfo=UTC)
TOPO = NodeTopology(tuple(CpuInfo(i, i, 0, 0) for i in range(8)), (0,))


class Metrics:
    def __init__(self, values: Mapping[tuple[str, str], float]) -> None:
        self.values = values

    def last(self, kind: str, labels: Mapping[str, str], window_seconds: float) -> float | None:
        return self.values.get((kind, next(iter(labels.values()), "")))

    avg = last


class Cgroups:
    def __init__(self, values: Mapping[tuple[str, str], Any]) -> None:
        self.values = values

    def read(self, spec: CgroupFile[Any], cgroup_dir: str) -> Any | None:
        return self.values.get((spec.name, cgroup_dir))

    def children(self, cgroup_dir: str) -> Sequence[str]:
        return ()


def pod(
    uid: str,
    qos: str | None = "LS",
    lim_cpu: str = "2",
    phase: str = "Running",
    ann: Mapping[str, str] | None = None,
) -> PodMeta:
    p: dict[str, Any] = {
        "metadata": {
            "uid": uid,
            "name": uid,
            "namespace": "d",
            "labels": {"koordinator.sh/qosClass": qos} if qos else {},
            "annotations": dict(ann or {}),
        },
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": lim_cpu}}}]
        },
        "status": {
            "phase": phase,
            "containerStatuses": [
                {"name": "c", "containerID": f"containerd://{uid}c", "state": {"running": {}}}
            ],
        },
    }
    return pod_meta(p, CgroupDriver.CGROUPFS)


P = pod("a")
CDIR, PDIR, CID = P.containers[0].cgroup_dir, P.cgroup_dir, P.containers[0].container_id


def snap(
    cfg: BurstConfig | None,
    *,
    pods: Sequence[PodMeta] = (P,),
    metrics: Mapping[tuple[str, str], float] | None = None,
    cgroups: Mapping[tuple[str, str], Any] | None = None,
    now: datetime = NOW,
) -> Snapshot:
    return Snapshot(
        now=now,
        node=None,
        node_slo=NodeSLOSpec(cpu_burst_strategy=cfg),
        pods=pods,
        metrics=Metrics(metrics if metrics is not None else {("node_cpu_usage", ""): 1.0}),
        cgroups=Cgroups(
            cgroups
            if cgroups is not None
            else {("cpu_cfs_quota_us", CDIR): 200000, ("cpu_cfs_quota_us", PDIR): 200000}
        ),
        cgroup_version=CgroupVersion.V1,
        cgroup_driver=CgroupDriver.CGROUPFS,
        topology=TOPO,
    )


def cfg(policy: str = "auto", **kw: Any) -> BurstConfig:
    base = {
        "cpu_burst_percent": 1000,
        "cfs_quota_burst_percent": 300,
        "cfs_quota_burst_period_seconds": -1,
        "share_pool_threshold_percent": 50,
    }
    base.update(kw)
    return BurstConfig(policy=policy, **base)


OPT = CPUBurstOptions(rand=random.Random(1).random)


def writes(d: Any) -> list[tuple[str, str, Any]]:
    return [(w.file.name, w.cgroup_dir, w.value) for w in sorted(d.cgroup_writes, key=lambda w: w.order)]


def test_strategy_identity() -> None:
    s = CPUBurstStrategy()
    assert (s.name, s.interval_seconds) == ("CPUBurst", 1.0)


def test_no_config_skips() -> None:
    assert decide(snap(None), OPT, None).cgroup_writes == ()


def test_none_policy_resets_burst_and_quota() -> None:
    # burst 0 everywhere; the quota is already at its base 200000 (limit 2) → no quota write
    d = decide(snap(cfg("none")), OPT, None)
    assert writes(d) == [("cpu_cfs_burst_us", CDIR, 0), ("cpu_cfs_burst_us", PDIR, 0)]


def test_reset_pulls_quota_to_base_container_then_pod() -> None:
    cg = {("cpu_cfs_quota_us", CDIR): 500000, ("cpu_cfs_quota_us", PDIR): 600000}
    d = decide(snap(cfg("cpuBurstOnly"), cgroups=cg), OPT, None)
    assert writes(d)[2:] == [("cpu_cfs_quota_us", CDIR, 200000), ("cpu_cfs_quota_us", PDIR, 300000)]
    assert writes(d)[:2] == [("cpu_cfs_burst_us", CDIR, 2000000), ("cpu_cfs_burst_us", PDIR, 2000000)]


def test_scale_up_when_throttled_pod_then_container() -> None:
    m = {("node_cpu_usage", ""): 1.0, ("container_cpu_throttled", CID): 0.3}
    d = decide(snap(cfg(), metrics=m), OPT, None)
    assert writes(d)[2:] == [("cpu_cfs_quota_us", PDIR, 240000), ("cpu_cfs_quota_us", CDIR, 240000)]
    assert d.gauges[f'container_scaled_cfs_quota_us{{container_id="{CID}"}}'] == 240000


def test_scale_up_capped_at_ceil() -> None:
    m = {("node_cpu_usage", ""): 1.0, ("container_cpu_throttled", CID): 1}
    cg = {("cpu_cfs_quota_us", CDIR): 550000, ("cpu_cfs_quota_us", PDIR): -1}
    d = decide(snap(cfg(), metrics=m, cgroups=cg), OPT, None)
    assert writes(d)[2:] == [("cpu_cfs_quota_us", CDIR, 600000)]  # ceil 200000×300/100; pod −1 not written


def test_overload_scales_down_and_unknown_blocks_up() -> None:
    m = {("node_cpu_usage", ""): 6.0, ("container_cpu_throttled", CID): 1}
    cg = {("cpu_cfs_quota_us", CDIR): 400000, ("cpu_cfs_quota_us", PDIR): 400000}
    d = decide(snap(cfg(), metrics=m, cgroups=cg), OPT, None)
    assert writes(d)[2:] == [("cpu_cfs_quota_us", CDIR, 320000), ("cpu_cfs_quota_us", PDIR, 320000)]
    d = decide(snap(cfg(), metrics={("container_cpu_throttled", CID): 1}, cgroups=cg), OPT, None)
    assert writes(d)[2:] == []  # unknown: scaleUp → remain


def test_unlimited_quota_pulled_into_range_by_remain() -> None:
    cg = {("cpu_cfs_quota_us", CDIR): -1, ("cpu_cfs_quota_us", PDIR): -1}
    d = decide(snap(cfg(), cgroups=cg), OPT, None)
    assert writes(d)[2:] == [("cpu_cfs_quota_us", CDIR, 200000)]


def test_quota_read_errors() -> None:
    d = decide(snap(cfg(), cgroups={("cpu_cfs_quota_us", CDIR): 500000}), OPT, None)
    assert writes(d)[2:] == []  # pod quota unreadable → container aborted
    d = decide(snap(cfg(), cgroups={}), OPT, None)
    assert writes(d)[2:] == []


def test_ineligible_pods_untouched() -> None:
    pods = (pod("lsr", "LSR"), pod("be", "BE"), pod("lse", "LSE"), pod("done", phase="Succeeded"))
    assert decide(snap(cfg(), pods=pods), OPT, None).cgroup_writes == ()
    assert decide(snap(cfg(), pods=(pod("none", None), pod("sys", "SYSTEM"))), OPT, None).cgroup_writes != ()


def test_annotation_overrides_policy() -> None:
    p = pod("x", ann={"koordinator.sh/cpuBurst": '{"policy": "none"}'})
    cg = {
        ("cpu_cfs_quota_us", p.containers[0].cgroup_dir): 200000,
        ("cpu_cfs_quota_us", p.cgroup_dir): 200000,
    }
    d = decide(snap(cfg(), pods=(p,), cgroups=cg), OPT, None)
    assert [w[2] for w in writes(d)] == [0, 0]


def test_limiter_refusal_scales_down_and_state_is_kept() -> None:
    c = cfg(cfs_quota_burst_period_seconds=60, cfs_quota_burst_percent=300)
    m = {("node_cpu_usage", ""): 1.0, ("container_cpu_throttled", CID): 1, ("container_cpu_usage", CID): 4.0}
    cg = {("cpu_cfs_quota_us", CDIR): 400000, ("cpu_cfs_quota_us", PDIR): 400000}
    state = CPUBurstState({CID: lim.BurstLimiter(60, 12000, 50, NOW - timedelta(seconds=1))})
    d = decide(snap(c, metrics=m, cgroups=cg), OPT, state)
    # u = int(4/2×100) = 200 → 50 − 100×1 = −50 → refused → scaleDown 320000
    assert writes(d)[2] == ("cpu_cfs_quota_us", CDIR, 320000)
    assert d.state is not None and d.state.limiters[CID].tokens == -50
    assert d.state.limiters[CID].last_update == NOW


def test_limiter_initial_tokens_are_seeded_and_expire() -> None:
    c = cfg(cfs_quota_burst_period_seconds=10, cfs_quota_burst_percent=200)
    d = decide(snap(c), CPUBurstOptions(rand=lambda: 0.5), None)
    assert d.state is not None and d.state.limiters[CID].tokens == 250  # int(C 1000 × r), r = 0.5 × 0.5
    old = CPUBurstState({"gone": lim.BurstLimiter(10, 1000, 5, NOW - timedelta(seconds=21))})
    d = decide(snap(c), CPUBurstOptions(rand=lambda: 0.0), old)
    assert d.state is not None and "gone" not in d.state.limiters


def test_limiter_reinitialised_when_capacity_changes() -> None:
    c = cfg(cfs_quota_burst_period_seconds=10, cfs_quota_burst_percent=200)
    old = CPUBurstState({CID: lim.BurstLimiter(10, 2000, -1000, NOW)})
    d = decide(snap(c), CPUBurstOptions(rand=lambda: 0.2), old)
    assert (
        d.state is not None and d.state.limiters[CID].capacity == 1000 and d.state.limiters[CID].tokens == 100
    )


def test_pure_helpers() -> None:
    assert milli_to_quota(5) == 1000 and milli_to_quota(0) == -1 and milli_to_quota(1500) == 150000
    assert target_quota(Operation.SCALE_UP, -1, 1000, 3000) == 1000
    assert target_quota(Operation.SCALE_DOWN, 2000, 1000, 3000) == 1600
    assert adjust_by_node(NodeState.COOLING, Operation.SCALE_UP) is Operation.REMAIN
    assert adjust_by_node(NodeState.OVERLOAD, Operation.REMAIN) is Operation.SCALE_DOWN
    assert adjust_by_node(NodeState.COOLING, Operation.SCALE_DOWN) is Operation.SCALE_DOWN
