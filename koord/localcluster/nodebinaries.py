"""Locates the binaries of the real local node: kubelet and kube-controller-manager (built by
build-kube.sh into `$KOORD_CACHE/k8s/bin`, or taken from `KUBEBUILDER_ASSETS`), and Debian's
containerd, ctr, runc, the runc shim, busybox-static, the CNI plugins, iptables and iproute2.

Every miss raises MissingBinaryError naming the binary and how to get it.
Imports: standard library and koord.localcluster.binaries only.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from koord.localcluster.binaries import BUILD_SCRIPT, MissingBinaryError, kube_bin_dir

# Debian's containernetworking-plugins installs here; containerd's CRI plugin runs them from it.
CNI_BIN_DIR = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "loopback")
DEBIAN_PACKAGES = "containerd runc busybox-static containernetworking-plugins"


@dataclass(frozen=True)
class NodeBinaries:
    kubelet: Path
    kube_controller_manager: Path
    containerd: Path
    ctr: Path
    runc: Path
    shim: Path
    busybox: Path
    cni_bin_dir: Path
    iptables: Path
    ip6tables: Path | None
    ip: Path


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _kube(name: str) -> Path:
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    candidates = ([Path(assets) / name] if assets else []) + [kube_bin_dir() / name]
    for path in candidates:
        if _executable(path):
            return path
    raise MissingBinaryError(
        f"{name} not found at {' or '.join(map(str, candidates))}: run `make deps` (builds it once "
        f"from Debian's kubernetes source package with `bash {BUILD_SCRIPT} {name}`)"
    )


def _debian(name: str, package: str) -> Path:
    found = shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin:/usr/bin:/bin")
    if found is None:
        raise MissingBinaryError(
            f"{name} not found on PATH: `apt-get install {package}` (or run `make deps`, which installs "
            f"{DEBIAN_PACKAGES})"
        )
    return Path(found)


def find_node_binaries() -> NodeBinaries:
    """The binaries a LocalNode needs, or MissingBinaryError for the first one missing."""
    busybox = _debian("busybox", "busybox-static")
    # The image is this one binary: a dynamically linked busybox (package `busybox`) would not run.
    if b"/ld-linux" in busybox.read_bytes()[:4096]:
        raise MissingBinaryError(f"{busybox} is dynamically linked: `apt-get install busybox-static`")
    for plugin in CNI_PLUGINS:
        if not _executable(CNI_BIN_DIR / plugin):
            raise MissingBinaryError(
                f"CNI plugin {CNI_BIN_DIR / plugin} not found: `apt-get install containernetworking-plugins`"
            )
    ip6 = shutil.which("ip6tables", path="/usr/sbin:/sbin:/usr/bin:/bin")
    return NodeBinaries(
        kubelet=_kube("kubelet"),
        kube_controller_manager=_kube("kube-controller-manager"),
        containerd=_debian("containerd", "containerd"),
        ctr=_debian("ctr", "containerd"),
        runc=_debian("runc", "runc"),
        shim=_debian("containerd-shim-runc-v2", "containerd"),
        busybox=busybox,
        cni_bin_dir=CNI_BIN_DIR,
        iptables=_debian("iptables", "iptables"),
        ip6tables=Path(ip6) if ip6 else None,
        ip=_debian("ip", "iproute2"),
    )
