"""ResctrlReconcile (docs/rules/koordlet.md, Resctrl): hand-computed CAT masks / MBA values, the pure decide
on a fake view, and the runner writing schemata and tasks through the executor on a fake resctrl tree
(cgroup v1 and v2)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent.podmeta import PodMeta, pod_meta
from agent.qosmanager.framework import Decision, Snapshot
from agent.qosmanager.resctrlqos import (
    ResctrlConfig,
    ResctrlConfigSource,
    ResctrlInfo,
    ResctrlReconcileStrategy,
    decide,
    l3_mask,
    mba_value,
    parse_l3_ids,
    read_resctrl_info,
)
from agent.qosmanager.runner import HostCgroupView, QoSManager, StrategyEntry
from agent.resourceexecutor.executor import ResourceExecutor, WriteStatus
from agent.system.cgroup import TASKS, CgroupFile, CgroupVersion
from agent.system.podcgroup import CgroupDriver
from apis.nodeslo import NodeSLOSpec
from apis.nodeslo_defaults import merge_node_slo_spec
from tests.fixtures.hosttree import HostTree
from tests.unit.agent.qosmanager.fakeclock import FakeClock

NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
ROOT = Path("/sys/fs/resctrl")


@pytest.mark.parametrize(
    ("cbm", "start", "end", "want"),
    [
        ("7ff", 0, 30, "f"),  # 11 ways: endWay = ceil(3.3) = 4 → 0b1111
        ("7ff", 0, 100, "7ff"),
        ("7ff", 10, 50, "3c"),  # startWay ceil(1.1)=2, endWay ceil(5.5)=6 → 0x40 − 0x4
        ("fffff", 50, 100, "ffc00"),  # 20 ways: 10..20
        ("f0f", 0, 50, None),  # not contiguous low bits
        ("7ff", 30, 30, None),  # start ≥ end
        ("zz", 0, 30, None),
    ],
)
def test_l3_mask(cbm: str, start: int, end: int, want: str | None) -> None:
    assert l3_mask(cbm, start, end) == want


@pytest.mark.parametrize(
    ("pct", "vendor", "want"),
    [
        (55, "GenuineIntel", 60),
        (100, "GenuineIntel", 100),
        (10, "GenuineIntel", 10),
        (1, "GenuineIntel", 10),
        (0, "GenuineIntel", None),
        (101, "GenuineIntel", None),
        (100, "AuthenticAMD", 2048),
        (50, "AuthenticAMD", 80),
        (33, "AuthenticAMD", 52),  # int(160 × 33 / 100) = int(52.8)
    ],
)
def test_mba_value(pct: int, vendor: str, want: int | None) -> None:
    assert mba_value(pct, vendor) == want


def test_parse_l3_ids() -> None:
    assert parse_l3_ids("    L3:1=7ff;0=7ff\n    MB:0=100;1=100\n") == (0, 1)
    assert parse_l3_ids("MB:0=100\n") == ()


class FakeView:
    def __init__(self, tasks: Mapping[str, list[int]]) -> None:
        self.tasks = tasks

    def read(self, spec: CgroupFile[Any], cgroup_dir: str) -> Any | None:
        return self.tasks.get(cgroup_dir) if spec is TASKS else None

    def children(self, cgroup_dir: str) -> Sequence[str]:
        return []


def _pod(
    name: str,
    uid: str,
    qos_label: str | None,
    kube_qos: str,
    phase: str = "Running",
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid,
                     "labels": {"koordinator.sh/qosClass": qos_label} if qos_label else {},
                     "annotations": dict(annotations or {})},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"qosClass": kube_qos, "phase": phase,
                   "containerStatuses": [{"name": "c", "containerID": f"containerd://{uid}c"}]},
    }  # fmt: skip


def _slo(be_enable: bool = True, ls_enable: bool = False) -> NodeSLOSpec:
    return merge_node_slo_spec(
        NodeSLOSpec.from_dict(
            {
                "resourceQOSStrategy": {
                    "beClass": {"resctrlQOS": {"enable": be_enable, "mbaPercent": 55}},
                    "lsClass": {"resctrlQOS": {"enable": ls_enable}},
                }
            }
        )
    )


def _snapshot(pods: Sequence[PodMeta], slo: NodeSLOSpec | None, view: Any) -> Snapshot:
    return Snapshot(
        now=NOW, node=None, node_slo=slo, pods=pods, metrics=None,  # type: ignore[arg-type]
        cgroups=view, cgroup_version=CgroupVersion.V1, cgroup_driver=CgroupDriver.CGROUPFS, topology=None,
    )  # fmt: skip


def test_decide_schemata_and_tasks() -> None:
    be = pod_meta(_pod("be", "u-be", "BE", "BestEffort"), CgroupDriver.CGROUPFS)
    ls = pod_meta(_pod("ls", "u-ls", None, "Burstable"), CgroupDriver.CGROUPFS)
    skip = pod_meta(
        _pod("x", "u-x", "BE", "BestEffort", annotations={"node.koordinator.sh/resctrl": "{}"}),
        CgroupDriver.CGROUPFS,
    )
    done = pod_meta(_pod("d", "u-d", "BE", "BestEffort", phase="Succeeded"), CgroupDriver.CGROUPFS)
    view = FakeView({
        be.containers[0].cgroup_dir: [30, 10, 20],
        ls.containers[0].cgroup_dir: [40],
        skip.containers[0].cgroup_dir: [50],
        done.containers[0].cgroup_dir: [60],
    })  # fmt: skip
    info = ResctrlInfo(ROOT, "7ff", (0, 1), "GenuineIntel", {"BE": frozenset({10})})
    d = decide(_snapshot([be, ls, skip, done], _slo(), view), ResctrlConfig(info))
    assert [(str(m.path), m.mode) for m in d.mkdirs] == [(f"{ROOT}/{g}", 0o755) for g in ("LSR", "LS", "BE")]
    got = [(str(w.path), w.text, w.cacheable) for w in d.resctrl_writes]
    # LSR/LS: the None values 0/100/100 (disabled classes are still written); BE: 0–30 % → f, MBA 55 → 60.
    assert got == [
        ("/sys/fs/resctrl/LSR/schemata", "L3:0=7ff;1=7ff;\n", True),
        ("/sys/fs/resctrl/LSR/schemata", "MB:0=100;1=100;\n", True),
        ("/sys/fs/resctrl/LS/schemata", "L3:0=7ff;1=7ff;\n", True),
        ("/sys/fs/resctrl/LS/schemata", "MB:0=100;1=100;\n", True),
        ("/sys/fs/resctrl/BE/schemata", "L3:0=f;1=f;\n", True),
        ("/sys/fs/resctrl/BE/schemata", "MB:0=60;1=60;\n", True),
        # only the BE class enables resctrl; 10 is already in BE/tasks; ascending, uncached
        ("/sys/fs/resctrl/BE/tasks", "20", False),
        ("/sys/fs/resctrl/BE/tasks", "30", False),
    ]
    assert d.resctrl_writes[-1].pod is be


def test_decide_skips_without_resctrl_or_slo() -> None:
    info = ResctrlInfo(ROOT, "7ff", (0,), "GenuineIntel")
    assert decide(_snapshot([], _slo(), FakeView({})), ResctrlConfig(None)) == Decision()
    assert decide(_snapshot([], None, FakeView({})), ResctrlConfig(info)) == Decision()


def test_read_info_not_mounted(tmp_path: Path) -> None:
    assert read_resctrl_info(tmp_path / "resctrl", tmp_path) is None
    assert ResctrlConfigSource(tmp_path / "resctrl", tmp_path)() == ResctrlConfig(None)


@pytest.mark.parametrize("version", list(CgroupVersion), ids=lambda v: v.value)
def test_runner_writes_resctrl_files(tmp_path: Path, version: CgroupVersion) -> None:
    host = HostTree(tmp_path / "host", version, CgroupDriver.CGROUPFS)
    root = host.write_resctrl_ctrl("7ff", (0, 1), groups=("LSR", "BE"), tasks={"BE": [10]})
    be = pod_meta(_pod("be", "u-be", "BE", "BestEffort"), CgroupDriver.CGROUPFS)
    host.mkdir(be.containers[0].cgroup_dir)
    host.set_tasks(be.containers[0].cgroup_dir, [20, 10])
    slo = _slo()

    def snapshot(now: datetime) -> Snapshot:
        return _snapshot([be], slo, HostCgroupView(host.paths, version))

    executor = ResourceExecutor(host.paths, version, "n1")
    entry = StrategyEntry(ResctrlReconcileStrategy(), ResctrlConfigSource(root, host.paths.proc))
    manager = QoSManager([entry], snapshot, executor, None, clock=FakeClock(NOW))
    manager.tick(entry)
    by_path = {(r.path, r.new): r.status for r in entry.last_results}
    assert by_path[(str(root / "BE" / "schemata"), "L3:0=f;1=f;\n")] is WriteStatus.WRITTEN
    assert by_path[(str(root / "BE" / "schemata"), "MB:0=60;1=60;\n")] is WriteStatus.WRITTEN
    assert by_path[(str(root / "BE" / "tasks"), "20")] is WriteStatus.WRITTEN
    assert (root / "LS").is_dir()  # the missing group dir was created (0755)
    assert (root / "BE" / "tasks").read_text() == "20"  # the fake file keeps the last write
    assert (root / "BE" / "schemata").read_text() == "MB:0=60;1=60;\n"
    # next tick: 20 is now in BE/tasks. (The executor caches by path, so the L3 and MB lines of one
    # schemata file displace each other's entry and are re-written every tick, without drift.)
    manager.tick(entry)
    assert not any(r.drift for r in entry.last_results)
    # (the fake file kept only "20", so 10 looks missing again; the kernel would list both)
    assert [r.new for r in entry.last_results if r.path.endswith("tasks")] == ["10"]
