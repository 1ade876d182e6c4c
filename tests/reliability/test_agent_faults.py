"""koordlet faults on the node's side (docs/rules/koordlet.md#writing-to-the-host): a pod's cgroup that
vanishes between the resource executor's read and its write, and cgroup values a third party reverts
after the executor wrote them. The strategies, the QoS loop, the executor and its audit log and metrics
are the production code; only the host is a generated cgroup tree (v1 and v2), and time is virtual.

Eviction faults: test_agent_faults_evict.py; restart and stale metrics: test_agent_faults_restart.py and
test_agent_faults_stale.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.qosmanager.cgroupreconcile import BatchResourceStrategy
from agent.qosmanager.cpusuppress import CPUSuppressConfig, CPUSuppressStrategy
from agent.resourceexecutor.executor import WriteStatus
from agent.system.cgroup import (
    CPU_QUOTA,
    CPU_SHARES,
    CPUSET_CPUS,
    MEMORY_LIMIT,
    CgroupFile,
    CgroupVersion,
    parse_cpuset_list,
)
from agent.system.podcgroup import CgroupDriver, KubeQOS, qos_cgroup_dir
from apis.nodeslo import NodeSLOSpec
from apis.nodeslo_defaults import merge_node_slo_spec
from tests.reliability.agent_fault_helpers import NODE, HostRig, be_pod, ls_pod, vanish_before_first_write

BE_DIR = qos_cgroup_dir(CgroupDriver.CGROUPFS, KubeQOS.BESTEFFORT)
BATCH_FILES = (CPU_SHARES, CPU_QUOTA, MEMORY_LIMIT)


@pytest.fixture(params=list(CgroupVersion), ids=lambda v: v.value)
def version(request: pytest.FixtureRequest) -> CgroupVersion:
    v: CgroupVersion = request.param
    return v


@pytest.fixture()
def rig(tmp_path: Path, version: CgroupVersion) -> Iterator[HostRig]:
    r = HostRig(tmp_path, version, [be_pod("a"), be_pod("b"), ls_pod("ls")])
    try:
        yield r
    finally:
        r.close()


def _file_name(rig: HostRig, spec: CgroupFile[Any]) -> str:
    return str(spec.v1_file if rig.version is CgroupVersion.V1 else spec.v2_file)


def _skipped_count(rig: HostRig) -> float:
    """``koordlet_resource_update_duration_milliseconds_count{status="skipped"}`` over the batch files."""
    name = "koordlet_resource_update_duration_milliseconds_count"
    return sum(rig.sample(name, {"type": _file_name(rig, f), "status": "skipped"}) for f in BATCH_FILES)


def test_cgroup_vanished_between_read_and_write_is_skipped_audited_and_the_loop_goes_on(rig: HostRig) -> None:
    """Pod ``a`` is deleted after the strategy's snapshot and after the executor read its first file,
    before the write: that write is ``skipped`` and audited once, a's other files are skipped unaudited,
    pod ``b``'s writes of the same round happen; no exception reaches the loop, and the following rounds
    (a still listed by a lagging informer, then gone) are clean."""
    a, b = rig.pods[0], rig.pods[1]
    seen = vanish_before_first_write(rig, a)
    manager = rig.manager(BatchResourceStrategy(), lambda: None)
    entry = manager.entries[0]
    stop = threading.Event()
    rig.clock.at(15.0, lambda: rig.pods.remove(a))  # the informer sees the deletion
    rig.clock.at(25.0, stop.set)
    manager.run_entry(entry, stop)  # ticks at 0, 10 and 20 s of virtual time

    assert entry.failures == 0 and entry.ticks == 3
    assert len(seen) == 1 and f"pod{a.uid}" in seen[0]
    first, second, third = rig.rounds
    mine = [r for r in first if f"pod{a.uid}" in r.path]
    vanished_mid_write = [r for r in mine if r.old is not None]
    assert len(vanished_mid_write) == 1
    assert vanished_mid_write[0].status is WriteStatus.SKIPPED and vanished_mid_write[0].reason.startswith(
        "vanished"
    )
    assert all(r.status is WriteStatus.SKIPPED for r in mine)
    others = [r for r in first if f"pod{b.uid}" in r.path]
    assert len(others) == 6 and all(r.status is WriteStatus.WRITTEN for r in others)

    lines = rig.audit_lines()
    about_a = [line for line in lines if f"pod{a.uid}" in line["file"]]
    assert len(about_a) == 1, about_a
    assert about_a[0]["skipped"].startswith("vanished") and about_a[0]["pod"] == "a"
    assert about_a[0]["file"] == vanished_mid_write[0].path and about_a[0]["old"] == vanished_mid_write[0].old
    assert len([line for line in lines if f"pod{b.uid}" in line["file"]]) == 6
    assert _skipped_count(rig) >= 1

    # Next round, a still listed: its writes are skipped at the read, nothing audited, b settled.
    assert all(r.status is WriteStatus.SKIPPED and r.old is None for r in second if f"pod{a.uid}" in r.path)
    assert all(
        r.status in (WriteStatus.UNCHANGED, WriteStatus.CACHED) for r in second if f"pod{b.uid}" in r.path
    )
    # Then a is gone from the informer: not a trace of it, and still nothing new in the audit log.
    assert not [r for r in third if f"pod{a.uid}" in r.path]
    assert all(r.status in (WriteStatus.UNCHANGED, WriteStatus.CACHED) for r in third)
    assert rig.audit_lines() == lines
    # The executor forgot a's files: re-asserting touches only b's, and raises nothing.
    assert {r.path for r in rig.executor.reassert()} == {r.path for r in others}


def test_batch_cgroup_values_reverted_by_a_third_party_are_reasserted_by_the_next_round(rig: HostRig) -> None:
    """The kubelet (or an operator) resets a BE pod's ``cpu.shares`` and its container's CFS quota and
    memory limit right after the BatchResource strategy wrote them. The next round of that strategy
    (10 s later, while the executor's cache of those writes is still fresh) writes them back, counting
    drift; the executor's 10 s re-assert loop is not running here, so the round did it."""
    a = rig.pods[0]
    ctr = a.containers[0].cgroup_dir
    manager = rig.manager(BatchResourceStrategy(), lambda: None)
    entry = manager.entries[0]
    files = [(CPU_SHARES, a.cgroup_dir), (CPU_QUOTA, ctr), (MEMORY_LIMIT, ctr)]
    wanted: dict[Path, str] = {}
    reverted: dict[Path, str] = {}
    audited_before: list[int] = []

    def third_party() -> None:
        audited_before.append(len(rig.audit_lines()))
        for spec, d in files:
            wanted[rig.path(spec, d)] = rig.text(spec, d)
        rig.host.set_cpu_shares(a.cgroup_dir, 2 if rig.version is CgroupVersion.V1 else 1)
        rig.host.set_cpu_limit(ctr, -1)
        rig.host.set_memory_limit(ctr, -1)
        for spec, d in files:
            reverted[rig.path(spec, d).resolve()] = rig.text(spec, d)

    stop = threading.Event()
    rig.clock.at(5.0, third_party)
    rig.clock.at(15.0, stop.set)
    manager.run_entry(entry, stop)  # ticks at 0 and 10 s

    assert entry.failures == 0 and len(rig.rounds) == 2
    for spec, d in files:
        assert rig.text(spec, d) == wanted[rig.path(spec, d)]
    rewritten = [r for r in rig.rounds[1] if r.status is WriteStatus.WRITTEN]
    assert {Path(r.path) for r in rewritten} == {p.resolve() for p in wanted}
    assert all(r.drift for r in rewritten)
    for spec, _ in files:
        assert rig.sample("koordlet_cgroup_drift_total", {"node": NODE, "file": _file_name(rig, spec)}) == 1
    # Every re-assertion is a real change: audited with the third party's value as ``old``.
    second_round = rig.audit_lines()[audited_before[0] :]
    assert {(Path(line["file"]), line["old"]) for line in second_round} == set(reverted.items())


def _suppress_rig(rig: HostRig, policy: str) -> None:
    # docs/rules/koordlet.md#cpu-suppress-gate-becpusuppress-every-1-s: allowance = 4000 × 65 % − LS 1000
    # − system (2.0 − 1.3 = 0.7 cores) 700 = 900 milli.
    rig.slo = merge_node_slo_spec(
        NodeSLOSpec.from_dict({"resourceUsedThresholdWithBE": {
            "enable": True, "cpuSuppressThresholdPercent": 65, "cpuSuppressPolicy": policy}})
    )  # fmt: skip
    rig.metrics.set("node_cpu_usage", {}, 2.0)
    rig.metrics.set("pod_cpu_usage", {"pod_uid": rig.pods[2].uid}, 1.0)
    for be in rig.pods[:2]:
        rig.metrics.set("pod_cpu_usage", {"pod_uid": be.uid}, 0.15)


def test_be_tier_cfs_quota_reset_by_a_third_party_is_reasserted_within_one_round(rig: HostRig) -> None:
    """CPU suppress, cfsQuota policy: the besteffort tier's quota is reset to −1 (unlimited) after the
    executor wrote the allowance; the next tick, one second later, writes the allowance back."""
    _suppress_rig(rig, "cfsQuota")
    manager = rig.manager(CPUSuppressStrategy(), CPUSuppressConfig)
    entry = manager.entries[0]
    stop = threading.Event()
    rig.clock.at(0.5, lambda: rig.host.set_cpu_limit(BE_DIR, -1))
    rig.clock.at(1.5, stop.set)
    manager.run_entry(entry, stop)  # ticks at 0 and 1 s
    assert rig.text(CPU_QUOTA, BE_DIR).split()[0] == "90000"  # v2 writes cpu.max's quota alone
    quota = str(rig.path(CPU_QUOTA, BE_DIR).resolve())
    assert [r.status for r in rig.rounds[0] if r.path == quota] == [WriteStatus.WRITTEN]
    [again] = [r for r in rig.rounds[1] if r.path == quota and r.status is WriteStatus.WRITTEN]
    assert again.drift and again.old in ("-1", "max 100000")
    assert entry.failures == 0


def test_be_tier_cpuset_widened_by_a_third_party_is_narrowed_again_within_one_round(rig: HostRig) -> None:
    """CPU suppress, cpuset policy (upstream's *cacheable* writes, union then narrowed value per
    directory): someone gives the besteffort tier and its pods every CPU again; the next tick narrows
    them back and counts the drift once per directory
    (docs/rules/koordlet.md#re-asserting-written-values)."""
    _suppress_rig(rig, "cpuset")
    manager = rig.manager(CPUSuppressStrategy(), CPUSuppressConfig)
    entry = manager.entries[0]
    be_dirs = [BE_DIR, *(d for p in rig.pods[:2] for d in (p.cgroup_dir, p.containers[0].cgroup_dir))]
    narrowed: dict[str, list[int]] = {}

    def widen() -> None:
        for d in be_dirs:
            narrowed[d] = parse_cpuset_list(rig.text(CPUSET_CPUS, d))
            rig.host.set_cpuset(d, f"0-{len(rig.topology.cpus) - 1}")

    stop = threading.Event()
    rig.clock.at(0.5, widen)
    rig.clock.at(1.5, stop.set)
    manager.run_entry(entry, stop)  # ticks at 0 and 1 s
    assert all(len(cpus) == 2 for cpus in narrowed.values()), narrowed  # max(ceil(900 / 1000), 2) CPUs
    for d in be_dirs:
        assert parse_cpuset_list(rig.text(CPUSET_CPUS, d)) == narrowed[d]
    rewritten = [r for r in rig.rounds[1] if r.status is WriteStatus.WRITTEN and r.phase == "final"]
    assert len(rewritten) == len(be_dirs)
    # Each directory's change counts once as drift (seen by the round's first, loosening read).
    assert rig.sample("koordlet_cgroup_drift_total", {"node": NODE, "file": "cpuset.cpus"}) == len(be_dirs)
    assert entry.failures == 0
