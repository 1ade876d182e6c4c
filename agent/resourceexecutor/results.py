"""The outcome of one host-file action of the resource executor (docs/rules/koordlet.md#writing-to-the-host):
``WriteStatus`` (also the ``status`` label of ``koordlet_resource_update_duration_milliseconds``) and
``WriteResult``.

Imports: standard library, agent.resourceexecutor.actions.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from agent.resourceexecutor.actions import CgroupWrite

__all__ = ["WriteResult", "WriteStatus"]


class WriteStatus(enum.Enum):
    WRITTEN = "written"
    DRY_RUN = "dry_run"
    """Would have been written; audited with ``"dry_run": true``, the file is untouched."""
    UNCHANGED = "unchanged"
    """The file already holds the value (read-before-write)."""
    CACHED = "cached"
    """Cacheable write, nothing to do: the file holds the value and so does the cache, fresher than
    ``force_update_seconds`` (docs/rules/koordlet.md#re-asserting-written-values)."""
    SKIPPED = "skipped"
    """Vanished cgroup dir, missing file or a knob unsupported on this cgroup version; audited with a
    ``skipped`` field when the cgroup vanished between the read and the write."""
    REFUSED = "refused"
    """Outside every allowed root, a ``..``, a symbolic link on the way, or not a regular file."""
    INVALID = "invalid"
    """The value failed its validator / formatter (e.g. an empty cpuset)."""
    FAILED = "failed"
    """The kernel / OS rejected the read or write; a rejected write is audited with a ``failed`` field."""


@dataclass(frozen=True)
class WriteResult:
    write: CgroupWrite | None
    """The cgroup action (None for a file write or a directory)."""
    status: WriteStatus
    path: str
    """The resolved path (the unresolved one when refused or unresolvable)."""
    old: str | None = None
    """The previous content, stripped (None when not read)."""
    new: str | None = None
    """The formatted value."""
    reason: str = ""
    seconds: float = 0.0
    drift: bool = False
    phase: str = "final"
    """``merge`` for the loosening writes of ``apply_leveled``, else ``final``."""
