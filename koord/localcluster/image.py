"""Builds container images for the local node without any registry: a docker-save archive holding
one layer with a static busybox and its applet links (from Debian's busybox-static), for
`ctr -n k8s.io images import`. The same binary makes the pause image (`sleep`), so pods need no
network at all.

Imports: standard library only.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

BUSYBOX_IMAGE = "docker.io/library/busybox:1.35-local"
# kubelet's --pod-infra-container-image and containerd's sandbox_image; kubelet's image GC never
# removes the image it is told is the pause image.
PAUSE_IMAGE = "k8s.gcr.io/pause:3.2"
_PAUSE_CMD = ["/bin/sleep", "2147483647"]
_DIRS = ["bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "proc", "sys", "dev", "root", "var", "run"]


def _add(tar: tarfile.TarFile, name: str, data: bytes | None = None, mode: int = 0o755,
         link: str | None = None) -> None:  # fmt: skip
    info = tarfile.TarInfo(name)
    info.mode = mode
    if link is not None:
        info.type, info.linkname = tarfile.SYMTYPE, link
        tar.addfile(info)
    elif data is None:
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    else:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def _layer(busybox: Path) -> bytes:
    applets = subprocess.run([str(busybox), "--list-full"], check=True, capture_output=True, text=True)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for d in _DIRS:
            _add(t, d)
        _add(t, "tmp", mode=0o1777)
        _add(t, "bin/busybox", busybox.read_bytes(), 0o755)
        for applet in applets.stdout.split():
            # Entries without a folder are not applet paths; bin/busybox is the binary itself.
            if applet != "bin/busybox" and "/" in applet:
                _add(t, applet, link="/bin/busybox")
        _add(
            t,
            "etc/passwd",
            b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
            0o644,
        )
        _add(t, "etc/group", b"root:x:0:\nnogroup:x:65534:\n", 0o644)
    return buf.getvalue()


def build_image(busybox: Path, out: Path, ref: str, cmd: list[str] | None = None) -> Path:
    """Writes a docker-save archive of `ref` to `out` (atomically) and returns `out`."""
    layer = _layer(busybox)
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"],
            "Cmd": cmd or ["/bin/sh"],
            "WorkingDir": "/",
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": "koord.localcluster.image from busybox-static"}],
    }
    cfg = json.dumps(config).encode()
    cfg_name = hashlib.sha256(cfg).hexdigest() + ".json"
    manifest = json.dumps([{"Config": cfg_name, "RepoTags": [ref], "Layers": ["layer.tar"]}]).encode()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with tarfile.open(tmp, "w") as t:
        for name, data in (("layer.tar", layer), (cfg_name, cfg), ("manifest.json", manifest)):
            _add(t, name, data, 0o644)
    tmp.replace(out)
    return out


def ensure_images(busybox: Path, cache: Path) -> list[Path]:
    """The busybox and pause archives for this busybox binary, built once into `cache`."""
    digest = hashlib.sha256(busybox.read_bytes()).hexdigest()[:12]
    images = []
    for name, ref, cmd in (("busybox", BUSYBOX_IMAGE, None), ("pause", PAUSE_IMAGE, _PAUSE_CMD)):
        out = cache / f"{name}-{digest}.tar"
        images.append(out if out.is_file() else build_image(busybox, out, ref, cmd))
    return images
