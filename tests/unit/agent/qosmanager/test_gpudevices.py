"""GPU device-cgroup strategy (docs/rules/koordlet-gpu.md#container): the writes worked out by hand for
containers as runc and the NVIDIA toolkit leave them, applied to a model of the kernel's devices
controller (the next round writes nothing, and only the allocated cards open); what is left alone; and the
writes going through the resource executor to ``devices.deny`` / ``devices.allow`` on a fake v1 tree."""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.podmeta import PodMeta, pod_meta
from agent.qosmanager.framework import Snapshot
from agent.qosmanager.gpudevices import (
    DEVICES_ALLOW,
    DEVICES_DENY,
    DEVICES_LIST,
    V2_NOTE,
    GPUDevicesConfig,
    GPUDevicesConfigSource,
    GPUDevicesStrategy,
    decide_gpu_devices,
    parse_devices_list,
    uvm_major,
)
from agent.qosmanager.runner import HostCgroupView
from agent.resourceexecutor.actions import CgroupWrite
from agent.resourceexecutor.executor import ResourceExecutor, WriteStatus
from agent.system.cgroup import CgroupFile, CgroupVersion, HostPaths
from agent.system.podcgroup import CgroupDriver
from agent.topology.gpuhook import DeviceRule
from apis.kubeobjects import Pod
from tests.fixtures.gpus import FakeDevicesCgroup
from tests.fixtures.hosttree import HostTree

NOW = datetime(2026, 11, 27, 21, 0, tzinfo=UTC)
ANN = "scheduling.koordinator.sh/device-allocated"
TOOLKIT_ALL = ["c 195:0 rw", "c 195:1 rw", "c 195:2 rw", "c 195:3 rw", "c 195:254 rw", "c 195:255 rw",
               "c 510:0 rw", "c 510:1 rw"]  # fmt: skip
UVM = GPUDevicesConfig(uvm_major=510)


def _pod(name: str, minors: list[int] | None, phase: str = "Running", raw: str | None = None) -> PodMeta:
    annotations: dict[str, str] = {}
    if minors is not None:
        annotations[ANN] = json.dumps(
            {"gpu": [{"minor": m, "resources": {"koordinator.sh/gpu-core": "100"}} for m in minors]}
        )
    if raw is not None:
        annotations[ANN] = raw
    pod: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}", "annotations": annotations},
        "spec": {"containers": [{"name": "main"}]},
        "status": {"qosClass": "BestEffort", "phase": phase,
                   "containerStatuses": [{"name": "main", "containerID": f"containerd://{name}c"}]},
    }  # fmt: skip
    return pod_meta(cast(Pod, pod), CgroupDriver.CGROUPFS)


class ModelView:
    """``CgroupView`` over the kernel model: each container dir has a ``FakeDevicesCgroup``."""

    def __init__(self) -> None:
        self.cgroups: dict[str, FakeDevicesCgroup] = {}

    def read(self, spec: CgroupFile[Any], cgroup_dir: str) -> Any | None:
        assert spec is DEVICES_LIST
        cg = self.cgroups.get(cgroup_dir)
        return None if cg is None else parse_devices_list(cg.devices_list(), cgroup_dir)

    def children(self, cgroup_dir: str) -> list[str]:
        return []


def _snapshot(pods: list[PodMeta], view: Any, version: CgroupVersion = CgroupVersion.V1) -> Snapshot:
    return Snapshot(
        now=NOW, node=None, node_slo=None, pods=pods, metrics=None,  # type: ignore[arg-type]
        cgroups=view, cgroup_version=version, cgroup_driver=CgroupDriver.CGROUPFS, topology=None,
    )  # fmt: skip


def _texts(snapshot: Snapshot, config: GPUDevicesConfig = UVM) -> list[tuple[str, str, str]]:
    decision, _ = decide_gpu_devices(snapshot, config)
    return [
        (w.cgroup_dir.rstrip("/").rsplit("/", 1)[-1], w.file.name, w.value.text())
        for w in decision.cgroup_writes
    ]


def _apply(view: ModelView, snapshot: Snapshot) -> None:
    decision, _ = decide_gpu_devices(snapshot, UVM)
    for w in sorted(decision.cgroup_writes, key=lambda w: w.order):
        view.cgroups[w.cgroup_dir].write("allow" if w.file is DEVICES_ALLOW else "deny", w.value.text())


def test_toolkit_gave_every_card_two_were_allocated() -> None:
    pod = _pod("a", [1, 2])
    view = ModelView()
    cg = view.cgroups[pod.containers[0].cgroup_dir] = FakeDevicesCgroup.runc(TOOLKIT_ALL)
    snap = _snapshot([pod], view)
    # Cards 0 and 3 lose read/write; 1, 2, nvidiactl and uvm are already readable and writable.
    assert _texts(snap) == [("ac", "devices_deny", "c 195:0 rwm"), ("ac", "devices_deny", "c 195:3 rwm")]
    _apply(view, snap)
    assert [cg.can_open(195, m) for m in (0, 1, 2, 3, 254, 255)] == [False, True, True, False, True, True]
    assert cg.can_open(510, 0) and cg.can_open(1, 3)  # uvm and /dev/null untouched
    assert _texts(snap) == []  # devices.list now shows the wanted state


def test_wildcard_loses_rw_and_the_allocation_is_allowed() -> None:
    pod = _pod("b", [0])
    view = ModelView()
    cg = view.cgroups[pod.containers[0].cgroup_dir] = FakeDevicesCgroup.runc(["c 195:* rwm", "c 510:* rw"])
    snap = _snapshot([pod], view)
    # 195:* keeps only mknod; card 0 and nvidiactl are allowed; uvm is covered by 510:* rw; modeset gets
    # back the rw the wildcard gave it.
    assert _texts(snap) == [
        ("bc", "devices_deny", "c 195:* rw"),
        ("bc", "devices_allow", "c 195:0 rw"),
        ("bc", "devices_allow", "c 195:255 rw"),
        ("bc", "devices_allow", "c 195:254 rw"),
    ]
    _apply(view, snap)
    assert cg.exceptions[("c", 195, None)] == "m"
    assert [cg.can_open(195, m) for m in (0, 1, 2, 254, 255)] == [True, False, False, True, True]
    assert cg.can_open(510, 1)
    assert _texts(snap) == []


def test_runc_defaults_only_get_the_allocation_allowed() -> None:
    pod = _pod("c", [1])
    view = ModelView()
    view.cgroups[pod.containers[0].cgroup_dir] = FakeDevicesCgroup.runc()
    assert _texts(_snapshot([pod], view)) == [
        ("cc", "devices_allow", "c 195:1 rw"),
        ("cc", "devices_allow", "c 195:255 rw"),
        ("cc", "devices_allow", "c 510:0 rw"),
        ("cc", "devices_allow", "c 510:1 rw"),
    ]
    # Without nvidia-uvm loaded there is nothing to allow for it.
    assert [t[2] for t in _texts(_snapshot([pod], view), GPUDevicesConfig())] == [
        "c 195:1 rw",
        "c 195:255 rw",
    ]


@pytest.mark.parametrize(
    ("pod", "rules", "note"),
    [
        (_pod("none", None), TOOLKIT_ALL, None),  # no allocation: never narrowed
        (_pod("done", [0], phase="Succeeded"), TOOLKIT_ALL, None),
        (_pod("bad", None, raw="{oops"), TOOLKIT_ALL, "pod ml/bad: GPU allocation not enforced: "),
        (_pod("wide", [0]), ["c *:* rwm"], "holds c *:* read/write"),
    ],
)
def test_left_alone(pod: PodMeta, rules: list[str], note: str | None) -> None:
    view = ModelView()
    view.cgroups[pod.containers[0].cgroup_dir] = FakeDevicesCgroup.runc(rules)
    decision, notes = decide_gpu_devices(_snapshot([pod], view), UVM)
    assert decision.cgroup_writes == ()
    assert (notes[0] if notes else None) is None if note is None else note in notes[0]


def test_privileged_and_v2_and_vanished_are_left_alone() -> None:
    pod = _pod("priv", [0])
    view = ModelView()
    view.cgroups[pod.containers[0].cgroup_dir] = FakeDevicesCgroup(default_allow=True)
    decision, notes = decide_gpu_devices(_snapshot([pod], view), UVM)
    assert decision.cgroup_writes == () and "default allow (privileged)" in notes[0]
    decision, notes = decide_gpu_devices(_snapshot([pod], view, CgroupVersion.V2), UVM)
    assert decision.cgroup_writes == () and notes == (V2_NOTE,)
    decision, notes = decide_gpu_devices(_snapshot([_pod("gone", [0])], ModelView()), UVM)
    assert decision.cgroup_writes == () and notes == ()


def test_strategy_logs_each_note_once() -> None:
    said: list[str] = []
    strategy = GPUDevicesStrategy(said.append)
    snap = _snapshot([], ModelView(), CgroupVersion.V2)
    strategy.decide(snap, UVM, None)
    strategy.decide(snap, UVM, None)
    assert said == [V2_NOTE]


def test_parse_devices_list() -> None:
    assert parse_devices_list("a *:* rwm\n", "f").default_allow
    got = parse_devices_list("c 1:3 rwm\nb *:* m\nc 195:* rw\n", "f")
    assert not got.default_allow
    assert got.rules == (
        DeviceRule("c", 1, 3, "rwm"),
        DeviceRule("b", None, None, "m"),
        DeviceRule("c", 195, None, "rw"),
    )
    with pytest.raises(ValueError, match=r"devices.list: bad devices.list line 'x 1:3 rwm'"):
        parse_devices_list("x 1:3 rwm", "devices.list")
    with pytest.raises(ValueError, match="bad device number 'q'"):
        parse_devices_list("c q:3 rwm", "f")


def test_uvm_major(tmp_path: Path) -> None:
    text = "Character devices:\n  1 mem\n195 nvidia\n510 nvidia-uvm\n\nBlock devices:\n511 nvidia-uvm\n"
    assert uvm_major(text) == 510
    assert uvm_major("Character devices:\n  1 mem\n") is None
    (tmp_path / "devices").write_text(text)
    assert GPUDevicesConfigSource(tmp_path)() == GPUDevicesConfig(510)
    assert GPUDevicesConfigSource(tmp_path / "missing")() == GPUDevicesConfig(None)


def test_writes_reach_the_files_through_the_executor(tmp_path: Path) -> None:
    tree = HostTree(tmp_path, CgroupVersion.V1)
    pod = _pod("e", [1])
    cdir = pod.containers[0].cgroup_dir
    tree.write(DEVICES_LIST, cdir, "c 1:3 rwm\nc 195:0 rw\nc 195:1 rw\n")
    tree.write(DEVICES_DENY, cdir, "")
    tree.write(DEVICES_ALLOW, cdir, "")
    snap = _snapshot([pod], HostCgroupView(tree.paths, CgroupVersion.V1))
    decision, _ = decide_gpu_devices(snap, GPUDevicesConfig())
    executor = ResourceExecutor(tree.paths, CgroupVersion.V1, "node-a")
    results = executor.execute(decision)
    assert [r.status for r in results] == [WriteStatus.WRITTEN, WriteStatus.WRITTEN]
    root = tree.paths.cgroup_root / "devices" / cdir
    assert (root / "devices.deny").read_text() == "c 195:0 rwm"
    assert (root / "devices.allow").read_text() == "c 195:255 rw"


# --- against the REAL kernel (root, cgroup v1 devices controller): a scratch cgroup koord-test-<random> ----
DEVICES_ROOT = Path("/sys/fs/cgroup/devices")


def _real_skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "not root: cannot create a scratch cgroup"
    if not (DEVICES_ROOT / "devices.list").exists():
        return f"{DEVICES_ROOT}/devices.list not found: no cgroup v1 devices controller mounted"
    if not os.access(DEVICES_ROOT, os.W_OK):
        return f"{DEVICES_ROOT} is not writable"
    return None


def _kernel_write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


@pytest.mark.skipif(_real_skip_reason() is not None, reason=str(_real_skip_reason()))
@pytest.mark.parametrize(
    ("extra", "minors"),
    [(TOOLKIT_ALL, [1, 2]), (["c 195:* rwm", "c 510:* rw"], [0]), ([], [1])],
    ids=["toolkit", "wildcard", "runc-only"],
)
def test_model_matches_the_real_kernel(extra: list[str], minors: list[int]) -> None:
    """The same writes applied to the kernel and to the model leave the same devices.list, and the next
    round has nothing to write (so the unit tests above speak for the kernel)."""
    scratch = DEVICES_ROOT / f"koord-test-{uuid.uuid4().hex[:8]}"
    scratch.mkdir()
    try:
        model = FakeDevicesCgroup.runc(extra)
        _kernel_write(scratch / "devices.deny", "a")
        for line in FakeDevicesCgroup.RUNC_DEFAULTS + tuple(extra):
            _kernel_write(scratch / "devices.allow", line)
        pod = _pod("real", minors)
        view = ModelView()
        view.cgroups[pod.containers[0].cgroup_dir] = model
        snap = _snapshot([pod], view)
        assert parse_devices_list((scratch / "devices.list").read_text(), "kernel") == view.read(
            DEVICES_LIST, pod.containers[0].cgroup_dir
        )
        decision, _ = decide_gpu_devices(snap, UVM)
        assert decision.cgroup_writes  # something to do in each case
        for w in sorted(decision.cgroup_writes, key=lambda w: w.order):
            _kernel_write(scratch / w.file.v1_file, w.value.text())  # type: ignore[operator]
        _apply(view, snap)
        kernel = (scratch / "devices.list").read_text()
        assert sorted(kernel.split("\n")) == sorted(model.devices_list().split("\n"))
        assert _texts(snap) == []
        # One rule per write(2): a second line in the same write is ignored by the kernel.
        _kernel_write(scratch / "devices.allow", "c 7:1 rw\nc 7:2 rw\n")
        assert "c 7:1 rw" in kernel_lines(scratch) and "c 7:2 rw" not in kernel_lines(scratch)
    finally:
        scratch.rmdir()
    assert not scratch.exists()


def kernel_lines(scratch: Path) -> list[str]:
    return (scratch / "devices.list").read_text().splitlines()


@pytest.mark.skipif(_real_skip_reason() is not None, reason=str(_real_skip_reason()))
def test_executor_writes_real_devices_files() -> None:
    """devices.allow/deny cannot be read (EINVAL): the executor writes them blind, one rule per write."""
    scratch = DEVICES_ROOT / f"koord-test-{uuid.uuid4().hex[:8]}"
    scratch.mkdir()
    try:
        _kernel_write(scratch / "devices.deny", "a")
        _kernel_write(scratch / "devices.allow", "c 195:0 rw")
        with pytest.raises(OSError):
            (scratch / "devices.allow").read_text()  # what the executor must not do
        executor = ResourceExecutor(HostPaths(cgroup_root=DEVICES_ROOT.parent), CgroupVersion.V1, "test-node")
        cdir = scratch.name + "/"
        deny = CgroupWrite("test", DEVICES_DENY, cdir, DeviceRule("c", 195, 0, "rwm"), cacheable=False)
        allow = CgroupWrite(
            "test", DEVICES_ALLOW, cdir, DeviceRule("c", 195, 255, "rw"), cacheable=False, order=1
        )
        results = executor.apply([deny, allow])
        assert [r.status for r in results] == [WriteStatus.WRITTEN] * 2, [r.reason for r in results]
        assert kernel_lines(scratch) == ["c 195:255 rw"]
        # Asked again, written again (nothing to compare with); the kernel's state does not change.
        assert [r.status for r in executor.apply([deny, allow])] == [WriteStatus.WRITTEN] * 2
        assert kernel_lines(scratch) == ["c 195:255 rw"]
        assert executor.reassert() == []  # nothing remembered to re-assert
    finally:
        scratch.rmdir()


# --- property: any starting rules of the kinds runc and the toolkit write -----------------------------------
VOCABULARY = ["c 195:0 rw", "c 195:1 rw", "c 195:2 r", "c 195:3 rwm", "c 195:254 rw", "c 195:254 r",
              "c 195:255 rw", "c 195:* rwm", "c 195:* rw", "c 195:* m", "c 510:0 rw", "c 510:* rw",
              "c 7:1 rw", "b 8:0 rw"]  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(
    extra=st.lists(st.sampled_from(VOCABULARY), unique=True),
    minors=st.sets(st.integers(0, 3), min_size=1),
    uvm=st.sampled_from([510, None]),
)
def test_any_start_ends_with_exactly_the_allocation(
    extra: list[str], minors: set[int], uvm: int | None
) -> None:
    pod = _pod("p", sorted(minors))
    view = ModelView()
    cg = view.cgroups[pod.containers[0].cgroup_dir] = FakeDevicesCgroup.runc(extra)
    before = dict(cg.exceptions)
    modeset = [cg.can_open(195, 254, a) for a in ("r", "w", "rw")]
    snap = _snapshot([pod], view)
    config = GPUDevicesConfig(uvm)
    decision, notes = decide_gpu_devices(snap, config)
    assert notes == ()
    for w in sorted(decision.cgroup_writes, key=lambda w: w.order):
        cg.write("allow" if w.file is DEVICES_ALLOW else "deny", w.value.text())
    assert all(cg.can_open(195, m) for m in [*sorted(minors), 255])
    assert not any(cg.can_open(195, m, a) for m in set(range(4)) - minors for a in "rw")
    assert uvm is None or (cg.can_open(uvm, 0) and cg.can_open(uvm, 1))
    assert [cg.can_open(195, 254, a) for a in ("r", "w", "rw")] == modeset  # left as it was
    others = {k: v for k, v in before.items() if k[1] not in (195, 510)}
    assert {k: v for k, v in cg.exceptions.items() if k[1] not in (195, 510)} == others
    assert decide_gpu_devices(snap, config)[0].cgroup_writes == ()  # nothing left to write
