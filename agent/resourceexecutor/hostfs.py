"""Confined host-file access for the resource executor (docs/rules/koordlet.md#confinement): every read,
write and directory creation opens its path one component at a time from an allowed root.

A path is accepted only under an *anchor*: an allowed root (as given, or its real path), or a symbolic
link directly under an allowed root that points at a directory directly under that same root (cgroup v1's
``cpu -> cpu,cpuacct``), resolved once when the executor starts. Below the anchor every directory is opened
with ``O_NOFOLLOW | O_DIRECTORY`` relative to its parent's descriptor and the file itself with
``O_NOFOLLOW | O_NONBLOCK``, then ``fstat``-ed: a symbolic link anywhere, or a file that is not a regular one
(a FIFO, a device, a socket), raises ``RefusedPathError`` before a byte is read or written. Swapping a
directory for a link after the check cannot redirect a write: there is no separate check, and a directory
already opened stays the one written into. Nothing here blocks: cgroupfs, resctrl and sysctl files are
regular files.

Imports: standard library only.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path

__all__ = ["ConfinedFS", "RefusedPathError"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_READ_CHUNK = 1 << 16
_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFDIR: "a directory",
}


class RefusedPathError(Exception):
    """The executor must not touch this path; the message names the path and why."""


def _kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


class ConfinedFS:
    """Reads, writes and creates directories only under ``roots`` (see the module docstring).

    ``extra_anchors`` are further spellings of directories under a root (e.g. the cgroup root as
    configured when the roots were given as real paths); one whose real path is under no root is ignored.
    """

    def __init__(self, roots: Iterable[Path], extra_anchors: Iterable[Path] = ()) -> None:
        anchors: dict[str, str] = {}
        reals: list[str] = []
        for root in roots:
            real = os.path.realpath(root)
            reals.append(real)
            anchors[os.path.abspath(root)] = anchors[real] = real
            for lexical in {os.path.abspath(root), real}:
                anchors.update(_subsystem_links(lexical, real))
        for extra in extra_anchors:
            real = os.path.realpath(extra)
            if any(real == r or real.startswith(r.rstrip("/") + "/") for r in reals):
                anchors.setdefault(os.path.abspath(extra), real)
        # Longest first: a path under a subsystem link matches the link, not the root above it.
        self._anchors = sorted(anchors.items(), key=lambda kv: len(kv[0]), reverse=True)

    # ------------------------------------------------------------ naming

    def locate(self, path: Path | str) -> tuple[str, tuple[str, ...]] | None:
        """(real anchor directory, components below it), or None: outside every root, or a ``..``."""
        if ".." in Path(path).parts:
            return None
        text = os.path.abspath(path)
        for lexical, real in self._anchors:
            if text == lexical or text.startswith(lexical.rstrip("/") + "/"):
                return real, tuple(p for p in text[len(lexical) :].split("/") if p)
        return None

    def key(self, path: Path | str) -> str | None:
        """The real path the executor would touch (its cache and audit key), computed without I/O."""
        found = self.locate(path)
        return None if found is None else os.path.join(found[0], *found[1])

    # ------------------------------------------------------------ access

    def read(self, path: Path) -> str:
        fd = self._open_file(path, os.O_RDONLY)
        try:
            chunks: list[bytes] = []
            while chunk := os.read(fd, _READ_CHUNK):
                chunks.append(chunk)
        finally:
            os.close(fd)
        return b"".join(chunks).decode("ascii", errors="replace")

    def write(self, path: Path, text: str) -> None:
        """One ``write(2)``; never creates the file (a vanished cgroup must not become a regular file)."""
        fd = self._open_file(path, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)

    def is_dir(self, path: Path) -> bool:
        anchor, parts = self._locate(path)
        if not parts:
            return os.path.isdir(anchor)
        parent = self._open_dirs(anchor, parts[:-1], path)
        try:
            mode = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return False
        finally:
            os.close(parent)
        if stat.S_ISLNK(mode):
            raise RefusedPathError(f"{path}: {parts[-1]} is a symbolic link")
        return stat.S_ISDIR(mode)

    def mkdir(self, path: Path, mode: int) -> None:
        """Create the last component of ``path`` (its parent must exist); ``FileExistsError`` if present."""
        anchor, parts = self._locate(path)
        if not parts:
            raise FileExistsError(errno.EEXIST, "an allowed root", str(path))
        parent = self._open_dirs(anchor, parts[:-1], path)
        try:
            os.mkdir(parts[-1], mode, dir_fd=parent)
        finally:
            os.close(parent)

    # ------------------------------------------------------------ internals

    def _locate(self, path: Path) -> tuple[str, tuple[str, ...]]:
        found = self.locate(path)
        if found is None:
            raise RefusedPathError(f"{path} resolves outside the allowed roots")
        return found

    def _open_file(self, path: Path, flags: int) -> int:
        anchor, parts = self._locate(path)
        if not parts:
            raise RefusedPathError(f"{path}: an allowed root, not a file")
        parent = self._open_dirs(anchor, parts[:-1], path)
        try:
            fd = _open_at(parent, parts[-1], flags | _FILE_FLAGS, path)
        finally:
            os.close(parent)
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise RefusedPathError(f"{path}: {_kind(mode)}, not a regular file")
        return fd

    @staticmethod
    def _open_dirs(anchor: str, names: tuple[str, ...], path: Path) -> int:
        fd = os.open(anchor, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for name in names:
                below = _open_at(fd, name, _DIR_FLAGS, path)
                os.close(fd)
                fd = below
        except BaseException:
            os.close(fd)
            raise
        return fd


def _open_at(dir_fd: int, name: str, flags: int, path: Path) -> int:
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        # O_NOFOLLOW gives ELOOP on a link (ENOTDIR with O_DIRECTORY), a writer's O_NONBLOCK open of a
        # FIFO without a reader ENXIO: name those as refusals, the rest stays an OSError.
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK, errno.ENXIO):
            try:
                mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
            except OSError:
                raise exc from None
            if stat.S_ISLNK(mode):
                raise RefusedPathError(f"{path}: {name} is a symbolic link") from None
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise RefusedPathError(f"{path}: {name} is {_kind(mode)}, not a regular file") from None
        raise


def _subsystem_links(lexical: str, real: str) -> dict[str, str]:
    """Links directly under a root to a directory directly under the same root (cgroup v1 co-mounts)."""
    links: dict[str, str] = {}
    try:
        entries = list(os.scandir(real))
    except OSError:
        return links
    for entry in entries:
        if not entry.is_symlink():
            continue
        target = os.path.realpath(entry.path)
        if os.path.dirname(target) == real and os.path.isdir(target):
            links[os.path.join(lexical, entry.name)] = target
    return links
