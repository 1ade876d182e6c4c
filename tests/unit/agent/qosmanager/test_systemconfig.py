"""SystemConfig (docs/configuration.md#system-config): min_free_kbytes arithmetic and range, watermark range,
flags written only when the file exists, sched_features toggles, skips; and through the runner + executor
on a fake /proc and /sys (allowed only under the strategy's own directories)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent.metriccache import MetricCache
from agent.qosmanager.framework import Snapshot
from agent.qosmanager.runner import CacheMetricView, HostCgroupView, QoSManager, StrategyEntry
from agent.qosmanager.systemconfig import (
    FILES,
    SystemConfigInput,
    SystemConfigSource,
    SystemConfigStrategy,
    decide,
    min_free_kbytes,
    parse_sched_features,
    system_roots,
)
from agent.resourceexecutor.executor import ResourceExecutor, default_roots
from agent.system.cgroup import CgroupVersion, HostPaths
from agent.system.podcgroup import CgroupDriver
from apis.nodeslo import NodeSLOSpec
from apis.nodeslo_defaults import merge_node_slo_spec

NOW = datetime(2026, 11, 22, tzinfo=UTC)
GI = 1024**3


def _snapshot(system: dict[str, Any] | None, memory: str = "64Gi", tmp: Path | None = None) -> Snapshot:
    slo = merge_node_slo_spec(NodeSLOSpec.from_dict({"systemStrategy": system} if system else {}))
    node = {"metadata": {"name": "n1"}, "status": {"capacity": {"memory": memory}}}
    paths = HostPaths(cgroup_root=(tmp or Path("/nonexistent")) / "cg")
    return Snapshot(
        now=NOW, node=node, node_slo=slo, pods=[], metrics=CacheMetricView(MetricCache(), 0),
        cgroups=HostCgroupView(paths, CgroupVersion.V1), cgroup_version=CgroupVersion.V1,
        cgroup_driver=CgroupDriver.CGROUPFS, topology=None,
    )  # fmt: skip


def _all(
    proc: Path = Path("/p"), sys: Path = Path("/s"), features: dict[str, bool] | None = None
) -> SystemConfigInput:
    return SystemConfigInput(proc, sys, frozenset(FILES), features or {})


def test_min_free_kbytes_arithmetic() -> None:
    # 64 Gi = 68719476736 B → /1024 = 67108864 kB → ×100 = 6710886400 → /10000 = 671088.
    assert min_free_kbytes(64 * GI, 100) == 671088
    assert min_free_kbytes(1023, 100) == 0


def test_values_and_ranges() -> None:
    d = decide(_snapshot({"minFreeKbytesFactor": 100, "watermarkScaleFactor": 150, "memcgReapBackGround": 1,
                          "schedIdleSaverWmark": 7}), _all())  # fmt: skip
    got = {str(w.path): w.text for w in d.sysctl_writes}
    assert got == {
        "/p/sys/vm/min_free_kbytes": "671088",
        "/p/sys/vm/watermark_scale_factor": "150",
        "/s/kernel/mm/memcg_reaper/reap_background": "1",
        "/p/sys/kernel/sched_idle_saver_wmark": "7",
    }
    # 2 Gi × 100 → 20971 kB: in range; 1 Gi × 10 → 1048 kB: below 10240, not written; watermark 5 < 10.
    small = decide(_snapshot({"minFreeKbytesFactor": 10, "watermarkScaleFactor": 5}, memory="1Gi"), _all())
    assert small.sysctl_writes == ()


def test_missing_files_and_skips() -> None:
    none = SystemConfigInput(Path("/p"), Path("/s"))
    assert (
        decide(_snapshot({"memcgReapBackGround": 1, "watermarkScaleFactor": 100}), none).sysctl_writes == ()
    )
    assert decide(_snapshot(None), _all()).sysctl_writes == ()  # default strategy: nothing set
    assert decide(_snapshot({"watermarkScaleFactor": 100}, memory="0"), _all()).sysctl_writes == ()


def test_sched_features_toggle_only_changes() -> None:
    assert parse_sched_features("GENTLE_FAIR_SLEEPERS NO_HRTICK") == {
        "GENTLE_FAIR_SLEEPERS": True,
        "HRTICK": False,
    }
    features = {"GENTLE_FAIR_SLEEPERS": True, "HRTICK": False}
    wanted = {"GENTLE_FAIR_SLEEPERS": False, "HRTICK": False, "UNKNOWN": True}
    d = decide(_snapshot({"schedFeatures": wanted}), _all(features=features))
    assert [w.text for w in d.sysctl_writes] == ["NO_GENTLE_FAIR_SLEEPERS"]


def test_runner_writes_the_knobs_under_allowed_roots(tmp_path: Path) -> None:
    proc, sys = tmp_path / "proc", tmp_path / "sys"
    for knob in ("min_free_kbytes", "watermark_scale_factor"):
        path = SystemConfigInput(proc, sys).path(knob)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("0\n")
    paths = HostPaths(cgroup_root=tmp_path / "cg", proc=proc, sys=sys)
    (tmp_path / "cg").mkdir()
    executor = ResourceExecutor(
        paths, CgroupVersion.V1, "n1", allowed_roots=(*default_roots(paths), *system_roots(proc, sys)),
        clock=lambda: NOW,
    )  # fmt: skip
    snapshot = _snapshot({"minFreeKbytesFactor": 100, "watermarkScaleFactor": 150}, tmp=tmp_path)
    manager = QoSManager(
        [StrategyEntry(SystemConfigStrategy(), SystemConfigSource(proc, sys))],
        lambda _now: snapshot,
        executor,
        None,
    )
    manager.tick(manager.entries[0])
    assert (proc / "sys/vm/min_free_kbytes").read_text().strip() == "671088"
    assert (proc / "sys/vm/watermark_scale_factor").read_text().strip() == "150"


def test_outside_the_allowed_roots_is_refused(tmp_path: Path) -> None:
    proc, sys = tmp_path / "proc", tmp_path / "sys"
    path = SystemConfigInput(proc, sys).path("watermark_scale_factor")
    path.parent.mkdir(parents=True)
    path.write_text("10\n")
    paths = HostPaths(cgroup_root=tmp_path / "cg", proc=proc, sys=sys)
    executor = ResourceExecutor(paths, CgroupVersion.V1, "n1", clock=lambda: NOW)  # default roots only
    snapshot = _snapshot({"watermarkScaleFactor": 150}, tmp=tmp_path)
    manager = QoSManager(
        [StrategyEntry(SystemConfigStrategy(), SystemConfigSource(proc, sys))],
        lambda _now: snapshot,
        executor,
        None,
    )
    manager.tick(manager.entries[0])
    assert path.read_text().strip() == "10"


@pytest.mark.parametrize("knob", sorted(FILES))
def test_every_knob_maps_into_proc_or_sys(knob: str) -> None:
    p = SystemConfigInput(Path("/P"), Path("/S")).path(knob)
    assert str(p).startswith(("/P/sys/", "/S/kernel/"))
