"""Tests of pod/container cgroup dirs (kubelet naming) and of cgroup driver detection (cgroupfs, systemd)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.system import cgroup as cg
from agent.system.cgroup import CgroupVersion, HostPaths
from agent.system.podcgroup import (
    CgroupDriver,
    ContainerID,
    KubeQOS,
    container_cgroup_dir,
    detect_cgroup_driver,
    parse_container_id,
    pod_cgroup_dir,
    qos_cgroup_dir,
)
from tests.fixtures.hosttree import HostTree

FS, SD = CgroupDriver.CGROUPFS, CgroupDriver.SYSTEMD
UID = "7d3b6a3e-aaaa-bbbb-cccc-0123456789ab"
UID_ = UID.replace("-", "_")


@pytest.mark.parametrize(
    ("driver", "qos", "expected"),
    [
        (FS, KubeQOS.GUARANTEED, f"kubepods/pod{UID}/"),
        (FS, KubeQOS.BURSTABLE, f"kubepods/burstable/pod{UID}/"),
        (FS, KubeQOS.BESTEFFORT, f"kubepods/besteffort/pod{UID}/"),
        (SD, KubeQOS.GUARANTEED, f"kubepods.slice/kubepods-pod{UID_}.slice/"),
        (
            SD,
            KubeQOS.BURSTABLE,
            f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/",
        ),
        (
            SD,
            KubeQOS.BESTEFFORT,
            f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/",
        ),
    ],
)
def test_pod_cgroup_dir(driver: CgroupDriver, qos: KubeQOS, expected: str) -> None:
    assert pod_cgroup_dir(driver, qos, UID) == expected
    assert expected.startswith(qos_cgroup_dir(driver, qos))


@pytest.mark.parametrize("uid", ["", "a/b"])
def test_bad_uid(uid: str) -> None:
    with pytest.raises(ValueError, match="bad pod UID"):
        pod_cgroup_dir(FS, KubeQOS.BURSTABLE, uid)


def test_parse_container_id() -> None:
    assert parse_container_id("containerd://abc") == ContainerID("containerd", "abc")
    assert parse_container_id("cri-o://f00") == ContainerID("cri-o", "f00")


@pytest.mark.parametrize("value", ["", "abc", "://abc", "docker://", "docker://a/b"])
def test_parse_container_id_errors(value: str) -> None:
    with pytest.raises(ValueError, match="bad containerID"):
        parse_container_id(value)


@pytest.mark.parametrize(
    ("cid", "systemd"),
    [
        ("docker://d1", "docker-d1.scope/"),
        ("containerd://c1", "cri-containerd-c1.scope/"),
        ("cri-o://o1", "crio-o1.scope/"),
        ("pouch://p1", "pouch-p1.scope/"),
    ],
)
def test_container_cgroup_dir(cid: str, systemd: str) -> None:
    pod = pod_cgroup_dir(SD, KubeQOS.BURSTABLE, UID)
    assert container_cgroup_dir(SD, pod, cid) == pod + systemd
    assert container_cgroup_dir(SD, pod.rstrip("/"), parse_container_id(cid)) == pod + systemd
    fs_pod = pod_cgroup_dir(FS, KubeQOS.BURSTABLE, UID)
    assert container_cgroup_dir(FS, fs_pod, cid) == fs_pod + cid.split("://")[1] + "/"


def test_unknown_runtime_systemd() -> None:
    with pytest.raises(ValueError, match="unknown container runtime 'rkt'"):
        container_cgroup_dir(SD, "kubepods.slice/", "rkt://x")
    assert container_cgroup_dir(FS, "kubepods/", "rkt://x") == "kubepods/x/"


def test_read_pod_and_container_on_host(host: HostTree) -> None:
    pod = host.add_pod(UID, KubeQOS.BESTEFFORT)
    ctr = host.add_container(pod, "containerd://abc123")
    assert ctr.startswith(pod)
    host.set_cpu_usage(pod, 2_000_000)
    host.set_cpu_usage(ctr, 1_000_000)
    host.set_memory_stat(ctr, inactive_anon=10, active_anon=20, unevictable=3)
    root, ver = host.paths.cgroup_root, host.version
    assert cg.read_cgroup(root, ver, cg.CPU_USAGE, pod) == 2_000_000
    assert cg.read_cgroup(root, ver, cg.CPU_USAGE, ctr) == 1_000_000
    assert cg.read_cgroup(root, ver, cg.MEMORY_STAT, ctr).usage_anon == 33
    qos_dir = (
        root / ("cpu" if ver is cg.CgroupVersion.V1 else "") / qos_cgroup_dir(host.driver, KubeQOS.BESTEFFORT)
    )
    assert (qos_dir / pod.split("/")[-2]).is_dir()


def test_detect_driver(host: HostTree) -> None:
    assert detect_cgroup_driver(host.paths, host.version) is host.driver


def test_detect_driver_nothing(tmp_path: Path) -> None:
    paths = HostPaths(cgroup_root=tmp_path)
    with pytest.raises(ValueError, match=r"neither kubepods\.slice"):
        detect_cgroup_driver(paths, CgroupVersion.V2)
    (tmp_path / "kubepods").mkdir()  # v1 looks under cpu/, not at the root
    with pytest.raises(ValueError):
        detect_cgroup_driver(paths, CgroupVersion.V1)
    assert detect_cgroup_driver(paths, CgroupVersion.V2) is CgroupDriver.CGROUPFS
