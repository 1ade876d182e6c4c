"""Locates (and on request builds) the etcd and kube-apiserver binaries of the local control plane,
and kube-scheduler, the differential tests' oracle (docs/testing.md#the-kube-scheduler-oracle).

Order: `KUBEBUILDER_ASSETS` (envtest convention: a folder holding `kube-apiserver` and `etcd`), then
the build cache of `build-kube.sh` (`$KOORD_CACHE/k8s/bin`, default `~/.cache/koord/k8s/bin`) for
kube-apiserver and `PATH` for etcd (Debian's `etcd-server`).
Imports: standard library only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

BUILD_SCRIPT = Path(__file__).with_name("build-kube.sh")


class MissingBinaryError(RuntimeError):
    """A binary the control plane needs is absent; the message says how to get it."""


@dataclass(frozen=True)
class Binaries:
    etcd: Path
    kube_apiserver: Path


def cache_dir() -> Path:
    base = os.environ.get("KOORD_CACHE")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "koord"


def kube_bin_dir() -> Path:
    return cache_dir() / "k8s" / "bin"


def _assets_dir() -> Path | None:
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    return Path(assets) if assets else None


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_binaries() -> Binaries:
    """Returns the binaries to use, or raises MissingBinaryError naming what is missing and the fix."""
    assets = _assets_dir()
    if assets is not None:
        apiserver, etcd = assets / "kube-apiserver", assets / "etcd"
        missing = [str(p) for p in (apiserver, etcd) if not _executable(p)]
        if missing:
            raise MissingBinaryError(
                f"KUBEBUILDER_ASSETS={assets} lacks executable {', '.join(missing)}; "
                "unset it to use the built and Debian binaries"
            )
        return Binaries(etcd=etcd, kube_apiserver=apiserver)
    apiserver = kube_bin_dir() / "kube-apiserver"
    if not _executable(apiserver):
        raise MissingBinaryError(
            f"kube-apiserver not found at {apiserver}: run `make deps` (builds it once from Debian's "
            f"kubernetes source package with {BUILD_SCRIPT}) or set KUBEBUILDER_ASSETS"
        )
    etcd_path = shutil.which("etcd")
    if etcd_path is None:
        raise MissingBinaryError(
            "etcd not found on PATH: run `make deps` or `apt-get install etcd-server`, "
            "or set KUBEBUILDER_ASSETS"
        )
    return Binaries(etcd=Path(etcd_path), kube_apiserver=apiserver)


def find_kube_scheduler() -> Path:
    """The real kube-scheduler v1.20.2: `KUBEBUILDER_ASSETS` when it holds one, else build-kube.sh's
    cache; raises MissingBinaryError naming the command that builds it."""
    assets = _assets_dir()
    candidates = ([assets / "kube-scheduler"] if assets is not None else []) + [
        kube_bin_dir() / "kube-scheduler"
    ]
    for path in candidates:
        if _executable(path):
            return path
    raise MissingBinaryError(
        f"kube-scheduler not found at {' or '.join(map(str, candidates))}: run `make deps` (builds it "
        f"once from Debian's kubernetes source package with `bash {BUILD_SCRIPT} kube-scheduler`)"
    )


def build_components(*components: str) -> None:
    """Builds (or reuses the cached) Kubernetes components with build-kube.sh; needs root for apt-get."""
    subprocess.run(["bash", str(BUILD_SCRIPT), *components], check=True)


def ensure_binaries(build: bool = False) -> Binaries:
    """find_binaries(), building kube-apiserver first when `build` is set and it is missing."""
    try:
        return find_binaries()
    except MissingBinaryError:
        if not build or _assets_dir() is not None:
            raise
    build_components("kube-apiserver")
    if shutil.which("etcd") is None:
        raise MissingBinaryError("etcd not found on PATH: `apt-get install etcd-server`")
    return find_binaries()
