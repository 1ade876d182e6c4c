"""One host write of the resource executor (``WriteJob``) and what is audited of it
(docs/rules/koordlet.md#writing-to-the-host): the audit line of a change, made, dry-run or one that did
not happen (``audit_record``), and the memory that audits a refused or failed change once while the
same reason lasts (``ReasonMemory``; docs/rules/koordlet.md#confinement).

Imports: standard library, agent.podmeta, agent.resourceexecutor.actions, agent.system.cgroup.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from agent.podmeta import PodMeta
from agent.resourceexecutor.actions import CgroupWrite
from agent.system.cgroup import CgroupFile

__all__ = ["MAX_REASONS_REMEMBERED", "ReasonMemory", "WriteJob", "audit_record"]

MAX_REASONS_REMEMBERED = 4096  # refused / failed paths audited once each; past this many: start over


@dataclass(frozen=True)
class WriteJob:
    """One write the executor carries out: a cgroup value (``spec``: its knob) or raw text for a host file
    (``spec`` None); ``phase`` is ``merge`` for a leveled batch's loosening write, else ``final``."""

    strategy: str
    spec: CgroupFile[Any] | None
    path: Path
    text: str
    cacheable: bool
    write: CgroupWrite | None
    pod: PodMeta | None
    container_id: str | None
    phase: str = "final"


def audit_record(
    job: WriteJob,
    node_name: str,
    key: str,
    old: str | None,
    now: datetime,
    *,
    dry_run: bool,
    outcome: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """One audit line; ``outcome`` = (``refused`` | ``skipped`` | ``failed``, reason) for a change that
    did not happen."""
    pod = job.pod
    return {
        "time": now.isoformat(),
        "node": node_name,
        "pod": pod.name if pod is not None else None,
        "namespace": pod.namespace if pod is not None else None,
        "container": job.container_id,
        "strategy": job.strategy,
        "file": key,
        "old": old,
        "new": job.text,
        "dry_run": dry_run,
        **(dict([outcome]) if outcome is not None else {}),
    }


class ReasonMemory:
    """Per path, the reason last audited for a change that did not happen: audited once while that reason
    lasts, again once it changes. Past ``limit`` paths it starts over (each is then audited once more)."""

    def __init__(self, limit: int = MAX_REASONS_REMEMBERED) -> None:
        self.limit = limit
        self._reasons: dict[str, str] = {}

    def first(self, key: str, reason: str) -> bool:
        """Remember ``reason`` for ``key``; True when it is new there (to be audited)."""
        if self._reasons.get(key) == reason:
            return False
        if len(self._reasons) >= self.limit:
            self._reasons.clear()
        self._reasons[key] = reason
        return True

    def forget(self, key: str) -> None:
        """The change at ``key`` happened (or the file is unrefused): its next failure is new."""
        self._reasons.pop(key, None)
