"""resctrl monitoring reader (docs/rules/koordlet.md#collectors): is resctrl mounted, and the per-domain
``mon_data/mon_L3_<id>/{llc_occupancy,mbm_local_bytes,mbm_total_bytes}`` counters of groups LSR, LS, BE.

Pure parsers (``parse_counter``, ``parse_mounts_has_resctrl``) plus thin readers; the root is injectable
(default ``<paths.sys>/fs/resctrl``). Imports: standard library and ``agent.system.cgroup`` (HostPaths).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from agent.system.cgroup import HostPaths

__all__ = [
    "RESCTRL_GROUPS",
    "ResctrlDomain",
    "is_resctrl_mounted",
    "parse_counter",
    "parse_mounts_has_resctrl",
    "read_group",
    "read_resctrl",
    "resctrl_root",
]

RESCTRL_GROUPS = ("LSR", "LS", "BE")
"""The koordlet's resctrl control groups, in collection order."""

_MON_PREFIX = "mon_L3_"


@dataclass(frozen=True, slots=True)
class ResctrlDomain:
    """The monitoring counters of one L3 cache domain of one group (bytes)."""

    group: str
    cache_id: str
    llc_occupancy: int
    mbm_local_bytes: int
    mbm_total_bytes: int


def resctrl_root(paths: HostPaths) -> Path:
    return paths.sys / "fs" / "resctrl"


def parse_counter(text: str, name: str) -> int:
    """A single non-negative integer counter (``Unavailable`` and garbage are ``ValueError``)."""
    value = text.strip()
    if not value.isdigit():
        raise ValueError(f"{name}: not a non-negative integer: {value!r}")
    return int(value)


def parse_mounts_has_resctrl(text: str, mount_point: str) -> bool:
    """Pure: does /proc/mounts text show a ``resctrl`` file system mounted at ``mount_point``."""
    want = mount_point.rstrip("/") or "/"
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2] == "resctrl" and (fields[1].rstrip("/") or "/") == want:
            return True
    return False


def is_resctrl_mounted(root: Path) -> bool:
    """resctrl is usable at ``root`` when its ``info`` dir and ``schemata`` file exist (a mount has both)."""
    return (root / "info").is_dir() and (root / "schemata").is_file()


def _group_dir(root: Path, group: str) -> Path:
    return root / group


def read_group(root: Path, group: str) -> list[ResctrlDomain]:
    """Every ``mon_data/mon_L3_<id>`` domain of ``<root>/<group>`` by cache id; ``OSError``/``ValueError``."""
    mon = _group_dir(root, group) / "mon_data"
    out: list[ResctrlDomain] = []
    for entry in sorted(os.listdir(mon)):
        if not entry.startswith(_MON_PREFIX):
            continue
        domain = mon / entry
        values = []
        for file in ("llc_occupancy", "mbm_local_bytes", "mbm_total_bytes"):
            path = domain / file
            values.append(parse_counter(path.read_text(), str(path)))
        out.append(ResctrlDomain(group, entry[len(_MON_PREFIX) :], *values))
    out.sort(key=lambda d: (len(d.cache_id), d.cache_id))
    return out


def read_resctrl(root: Path, groups: tuple[str, ...] = RESCTRL_GROUPS) -> list[ResctrlDomain]:
    """All domains of the groups that exist under ``root`` (a missing group dir is skipped)."""
    out: list[ResctrlDomain] = []
    for group in groups:
        if (_group_dir(root, group) / "mon_data").is_dir():
            out.extend(read_group(root, group))
    return out
