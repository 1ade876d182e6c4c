"""The actions a QoS decision carries (docs/architecture.md, "Layering rules"): host-file actions the
resource executor applies (cgroup writes, leveled cgroup writes, resctrl and sysctl file writes, directory
creations) and the evictions the evictor makes. The strategies build them, the executor and the evictor
consume them; this module is the only type both sides share, so the executor never imports the strategy
framework.

Imports: standard library, agent.podmeta, agent.system.cgroup (types only).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.podmeta import PodMeta
from agent.system.cgroup import CgroupFile

__all__ = ["CgroupWrite", "Evict", "FileWrite", "HostActions", "MakeDir"]


@dataclass(frozen=True)
class CgroupWrite:
    """One write of a declared cgroup file. ``order`` sorts the writes of one batch (parent-before-child
    merges, then final values); ``cacheable`` as upstream, except that the executor still reads the file: a
    fresh cache entry only names the outcome ``cached`` and never hides a third party's change
    (docs/rules/koordlet.md#re-asserting-written-values)."""

    strategy: str
    file: CgroupFile[Any]
    cgroup_dir: str
    value: Any
    pod: PodMeta | None = None
    container_id: str | None = None
    cacheable: bool = True
    order: int = 0


@dataclass(frozen=True)
class FileWrite:
    """A raw write of ``text`` to a host file that is not a cgroup file: a resctrl ``schemata`` / ``tasks``
    file or a kernel knob under ``/proc/sys`` or ``/sys/kernel``."""

    strategy: str
    path: Path
    text: str
    cacheable: bool = False
    pod: PodMeta | None = None
    container_id: str | None = None


@dataclass(frozen=True)
class MakeDir:
    """Create ``path`` (one level, ``mode``) when it is missing, e.g. a resctrl control group."""

    strategy: str
    path: Path
    mode: int = 0o755


@dataclass(frozen=True)
class Evict:
    """Evict one pod through the Eviction API (never directly); ``reason`` is upstream's reason string."""

    strategy: str
    pod: PodMeta
    reason: str
    message: str
    released_bytes: int = 0
    released_milli_cpu: int = 0


@dataclass(frozen=True)
class HostActions:
    """Every host-file action kind, applied by ``ResourceExecutor.execute`` in field order: directories
    first (a resctrl group must exist before its ``schemata``), then leveled and plain cgroup writes, then
    resctrl and sysctl writes."""

    mkdirs: tuple[MakeDir, ...] = ()
    leveled_writes: tuple[tuple[CgroupWrite, ...], ...] = ()
    """``leveled_writes[0]`` = parents (pods), ``[1]`` = children (containers); see ``apply_leveled``."""
    cgroup_writes: tuple[CgroupWrite, ...] = ()
    resctrl_writes: tuple[FileWrite, ...] = ()
    sysctl_writes: tuple[FileWrite, ...] = ()

    def has_host_actions(self) -> bool:
        kinds = (
            self.mkdirs,
            self.leveled_writes,
            self.cgroup_writes,
            self.resctrl_writes,
            self.sysctl_writes,
        )
        return any(kinds)
