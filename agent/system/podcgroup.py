"""Pod and container cgroup directories from a pod's UID and Kubernetes QoS class (kubelet's naming).

Supports the ``cgroupfs`` and ``systemd`` cgroup drivers (docs/rules/koordlet.md#collectors). Directories
are relative to the cgroup root (and, on cgroup v1, to a subsystem) and end with ``/``. Pure functions
plus one probe, ``detect_cgroup_driver``. Imports: standard library and ``agent.system.cgroup``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from agent.system.cgroup import CgroupVersion, HostPaths

__all__ = [
    "CgroupDriver",
    "ContainerID",
    "KubeQOS",
    "container_cgroup_dir",
    "detect_cgroup_driver",
    "parse_container_id",
    "pod_cgroup_dir",
    "qos_cgroup_dir",
]


class CgroupDriver(enum.Enum):
    CGROUPFS = "cgroupfs"
    SYSTEMD = "systemd"


def detect_cgroup_driver(paths: HostPaths, version: CgroupVersion) -> CgroupDriver:
    """``systemd`` when ``kubepods.slice`` exists, ``cgroupfs`` when ``kubepods`` does.

    Looked up under the ``cpu`` subsystem on v1 and at the root on v2; ``ValueError`` when neither exists.
    """
    base = paths.cgroup_root / "cpu" if version is CgroupVersion.V1 else paths.cgroup_root
    if (base / "kubepods.slice").is_dir():
        return CgroupDriver.SYSTEMD
    if (base / "kubepods").is_dir():
        return CgroupDriver.CGROUPFS
    raise ValueError(f"{base}: neither kubepods.slice (systemd) nor kubepods (cgroupfs) found")


class KubeQOS(enum.Enum):
    """Kubernetes QoS class (``pod.status.qosClass``)."""

    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BESTEFFORT = "BestEffort"


def qos_cgroup_dir(driver: CgroupDriver, qos: KubeQOS) -> str:
    """The QoS-level cgroup dir: Guaranteed pods sit directly under ``kubepods``."""
    if driver is CgroupDriver.CGROUPFS:
        if qos is KubeQOS.GUARANTEED:
            return "kubepods/"
        return f"kubepods/{qos.value.lower()}/"
    if qos is KubeQOS.GUARANTEED:
        return "kubepods.slice/"
    return f"kubepods.slice/kubepods-{qos.value.lower()}.slice/"


def pod_cgroup_dir(driver: CgroupDriver, qos: KubeQOS, uid: str) -> str:
    """``kubepods/[burstable|besteffort/]pod<uid>/`` (cgroupfs) or the systemd slice (UID ``-`` → ``_``)."""
    if not uid or "/" in uid:
        raise ValueError(f"bad pod UID {uid!r}")
    base = qos_cgroup_dir(driver, qos)
    if driver is CgroupDriver.CGROUPFS:
        return f"{base}pod{uid}/"
    prefix = "kubepods" if qos is KubeQOS.GUARANTEED else f"kubepods-{qos.value.lower()}"
    return f"{base}{prefix}-pod{uid.replace('-', '_')}.slice/"


@dataclass(frozen=True, slots=True)
class ContainerID:
    """A ``<runtime>://<id>`` container ID from ``containerStatuses[].containerID``."""

    runtime: str
    id: str


# Runtime (containerID scheme) → systemd scope prefix.
_SYSTEMD_PREFIX = {
    "docker": "docker-",
    "containerd": "cri-containerd-",
    "cri-o": "crio-",
    "pouch": "pouch-",
}


def parse_container_id(value: str) -> ContainerID:
    """Parse ``containerd://abc`` into ``ContainerID("containerd", "abc")``; ``ValueError`` when malformed."""
    runtime, sep, cid = value.partition("://")
    if not sep or not runtime or not cid or "/" in cid:
        raise ValueError(f"bad containerID {value!r}: expected '<runtime>://<id>'")
    return ContainerID(runtime, cid)


def container_cgroup_dir(driver: CgroupDriver, pod_dir: str, container_id: str | ContainerID) -> str:
    """``<podDir>/<id>/`` (cgroupfs) or ``<podDir>/<prefix><id>.scope/`` (systemd, prefix per runtime)."""
    cid = parse_container_id(container_id) if isinstance(container_id, str) else container_id
    base = pod_dir if pod_dir.endswith("/") else pod_dir + "/"
    if driver is CgroupDriver.CGROUPFS:
        return f"{base}{cid.id}/"
    prefix = _SYSTEMD_PREFIX.get(cid.runtime)
    if prefix is None:
        raise ValueError(f"unknown container runtime {cid.runtime!r} for the systemd driver")
    return f"{base}{prefix}{cid.id}.scope/"
