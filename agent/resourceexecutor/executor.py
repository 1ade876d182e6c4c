"""The resource executor: the koordlet's ONLY writer of host files (cgroups, resctrl, kernel knobs); see
docs/rules/koordlet.md#writing-to-the-host.

``execute`` applies one decision's ``HostActions`` (agent.resourceexecutor.actions) in a fixed order:
directories, leveled cgroup writes, cgroup writes, resctrl writes, sysctl writes. The executor validates
and formats each cgroup value (``format_cgroup``), touches files only through ``ConfinedFS`` (outside its
allowed roots, a ``..``, a symbolic link on the way or a file that is not a regular one: refused, and
audited once while it stays refused; docs/rules/koordlet.md#confinement), reads the file first and skips
equal values — always, cacheable writes included: its cache (agent.resourceexecutor.writecache; fresh for
``force_update_seconds``, entries expire after ``cache_ttl_seconds``) only names an equal value ``cached``,
it never stands in for the file, so a value someone else changed is re-written in the same round;
a write-only kernel file (``CgroupFile.write_only``) is written blind each time it is asked —, treats
a vanished cgroup / missing file / unsupported knob as ``skipped``, times every write into ``on_write`` and
audits every real change, a created directory included (also in dry-run mode, where nothing is changed),
and every change that did not happen (the cgroup vanished between the read and the write, the kernel
refused the value) once while it lasts. It remembers what it last wrote per file: a current value that
differs from it is *drift* (someone else, e.g. the kubelet, changed it) and is counted through
``on_drift`` before the desired value is re-written; ``reassert()`` re-checks every remembered file.

Imports: standard library, agent.system.cgroup,
agent.resourceexecutor.{actions,audit,hostfs,results,writecache,writejob}; never the QoS strategy framework.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent.resourceexecutor.actions import CgroupWrite, FileWrite, HostActions, MakeDir
from agent.resourceexecutor.audit import AuditLog
from agent.resourceexecutor.hostfs import ConfinedFS, RefusedPathError
from agent.resourceexecutor.results import WriteResult, WriteStatus
from agent.resourceexecutor.writecache import WriteCache
from agent.resourceexecutor.writejob import ReasonMemory, WriteJob, audit_record
from agent.system.cgroup import (
    CgroupUnsupportedError,
    CgroupVersion,
    HostPaths,
    cgroup_text_equal,
    cgroup_write_path,
    convert_cgroup,
    format_cgroup,
)

__all__ = ["ResourceExecutor", "WriteResult", "WriteStatus"]

OnWrite = Callable[[str, str, float, str], None]
"""``on_write(strategy, file, seconds, status)`` — e.g. ``koordlet_resource_update_duration_milliseconds``."""
OnDrift = Callable[[str, str], None]
"""``on_drift(strategy, file)`` — a value the executor had written was changed by someone else."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


class ResourceExecutor:
    """See the module docstring. Thread-safe: writes are serialised."""

    def __init__(
        self,
        paths: HostPaths,
        version: CgroupVersion,
        node_name: str,
        *,
        allowed_roots: Iterable[Path] | None = None,
        audit: AuditLog | None = None,
        dry_run: bool = False,
        clock: Callable[[], datetime] = _utcnow,
        force_update_seconds: float = 60.0,
        cache_ttl_seconds: float = 120.0,
        on_write: OnWrite | None = None,
        on_drift: OnDrift | None = None,
    ) -> None:
        self.paths = paths
        self.version = version
        self.node_name = node_name
        roots = allowed_roots if allowed_roots is not None else default_roots(paths)
        roots = tuple(roots)
        self.allowed_roots = tuple(Path(os.path.realpath(r)) for r in roots)
        self.fs = ConfinedFS(roots, extra_anchors=default_roots(paths))
        self.audit = audit
        self.dry_run = dry_run
        self.clock = clock
        self.on_write = on_write
        self.on_drift = on_drift
        self._lock = threading.RLock()
        self._cache = WriteCache(force_update_seconds, cache_ttl_seconds)
        self._last: dict[str, WriteJob] = {}
        self._refused = ReasonMemory()  # path -> reason last audited (audited once while refused)
        self._failed = ReasonMemory()  # path -> why its last change did not happen (audited once)

    # ------------------------------------------------------------ public API

    def apply(self, writes: Sequence[CgroupWrite]) -> list[WriteResult]:
        """Apply ``writes`` in ``order`` (stable); one result per write."""
        return [self._apply_one(w) for w in sorted(writes, key=lambda w: w.order)]

    def apply_leveled(self, levels: Sequence[Sequence[CgroupWrite]]) -> list[WriteResult]:
        """Leveled batch update (upstream ``LeveledUpdateBatch``); ``levels[0]`` is the top (parents).

        Top-down, every write whose knob has a ``merge`` rule is first written with the loosening value
        (cpuset union unless the new set is a subset; quota / memory.min/low/high only when the new value is
        larger, −1 = +∞); then bottom-up every write gets its final value. Final writes to files loosened
        here bypass the cache.
        """
        results: list[WriteResult] = []
        loosened: set[str] = set()
        for level in levels:
            for w in level:
                merged = self._merged_value(w)
                if merged is not None:
                    res = self._apply_one(replace(w, value=merged, cacheable=False), phase="merge")
                    results.append(res)
                    loosened.add(res.path)
        for level in reversed(levels):
            for w in level:
                try:
                    key = self.fs.key(self._path(w)) or ""
                except CgroupUnsupportedError:
                    key = ""
                results.append(self._apply_one(replace(w, cacheable=False) if key in loosened else w))
        return results

    def write_file(self, action: FileWrite) -> WriteResult:
        """Write raw text to a host file under an allowed root (resctrl ``schemata`` / ``tasks``, a kernel
        knob)."""
        return self._execute(
            WriteJob(
                action.strategy, None, action.path, action.text, action.cacheable, None, action.pod,
                action.container_id,
            )
        )  # fmt: skip

    def make_dir(self, action: MakeDir) -> WriteResult:
        """Create a missing directory (one level) whose parent is under an allowed root; audited with
        ``"old": null, "new": "mkdir <mode>"``. An existing directory is ``unchanged``."""
        start = time.perf_counter()
        text = f"mkdir {action.mode:04o}"
        job = WriteJob(action.strategy, None, action.path, text, False, None, None, None)
        key = self.fs.key(action.path) if action.path.name not in ("", ".", "..") else None
        if key is None:
            return self._refuse(
                job, str(action.path), f"{action.path} resolves outside the allowed roots", start
            )
        with self._lock:
            now = self.clock()
            attempted: datetime | None = None  # set once the mkdir itself runs
            try:
                if self.fs.is_dir(action.path):
                    return self._done(job, WriteStatus.UNCHANGED, key, "", start)
                if self.dry_run:
                    self._audit(job, key, None, now, dry_run=True)
                    return self._done(job, WriteStatus.DRY_RUN, key, "", start)
                attempted = now
                self.fs.mkdir(action.path, action.mode)
            except FileExistsError:
                return self._done(job, WriteStatus.UNCHANGED, key, "", start)
            except RefusedPathError as exc:
                return self._refuse(job, key, str(exc), start)
            except OSError as exc:
                return self._os_error(job, key, exc, start, attempted=attempted)
            self._failed.forget(key)
            self._audit(job, key, None, now, dry_run=False)
            return self._done(job, WriteStatus.WRITTEN, key, "", start)

    def execute(self, actions: HostActions) -> list[WriteResult]:
        """Every host action of one decision, in ``HostActions`` field order; one result per action."""
        results = [self.make_dir(d) for d in actions.mkdirs]
        results += self.apply_leveled(actions.leveled_writes)
        results += self.apply(actions.cgroup_writes)
        results += [self.write_file(w) for w in (*actions.resctrl_writes, *actions.sysctl_writes)]
        return results

    def reassert(self) -> list[WriteResult]:
        """Re-check every file this executor last wrote (bypassing the cache): drift is counted and the
        remembered value re-written; vanished files are forgotten."""
        with self._lock:
            jobs = list(self._last.values())
        return [self._execute(replace(job, cacheable=False, phase="final")) for job in jobs]

    def forget(self, path: Path | str) -> None:
        """Drop the cache and drift memory of one file (e.g. a deleted cgroup)."""
        key = self.fs.key(path) or os.path.realpath(path)
        with self._lock:
            self._cache.drop(key)
            self._last.pop(key, None)

    # ------------------------------------------------------------ internals

    def _path(self, w: CgroupWrite) -> Path:
        return cgroup_write_path(self.paths.cgroup_root, self.version, w.file, w.cgroup_dir)

    def _apply_one(self, w: CgroupWrite, phase: str = "final") -> WriteResult:
        job = WriteJob(
            w.strategy, w.file, Path(w.file.name), "", w.cacheable, w, w.pod, w.container_id, phase
        )
        try:
            job = replace(job, path=self._path(w))
            job = replace(job, text=format_cgroup(w.file, self.version, w.value))
        except CgroupUnsupportedError as exc:
            return self._done(job, WriteStatus.SKIPPED, str(job.path), str(exc))
        except ValueError as exc:
            return self._done(job, WriteStatus.INVALID, str(job.path), str(exc))
        return self._execute(job)

    def _merged_value(self, w: CgroupWrite) -> Any | None:
        if w.file.merge is None:
            return None
        try:
            path = self._path(w)
            old = convert_cgroup(w.file, self.version, self.fs.read(path), str(path))
            return w.file.merge(old, w.value)
        except (OSError, ValueError, TypeError, CgroupUnsupportedError, RefusedPathError):
            return None  # the final phase reports why

    def _equal(self, job: WriteJob, current: str, new: str) -> bool:
        if job.spec is None:
            return current.strip() == new.strip()
        return cgroup_text_equal(job.spec, current, new)

    def _execute(self, job: WriteJob) -> WriteResult:
        start = time.perf_counter()
        key = self.fs.key(job.path)
        if key is None:
            return self._refuse(job, str(job.path), f"{job.path} resolves outside the allowed roots", start)
        with self._lock:
            now = self.clock()
            self._cache.expire(now)
            if job.spec is not None and job.spec.write_only:
                return self._write_blind(job, key, now, start)
            # The file is read even when the cache holds the value: the cache cannot see a third party's
            # write (docs/rules/koordlet.md#re-asserting-written-values).
            try:
                current = self.fs.read(job.path)
            except RefusedPathError as exc:
                return self._refuse(job, key, str(exc), start)
            except OSError as exc:
                return self._os_error(job, key, exc, start)
            self._refused.forget(key)
            old = current.strip()
            last = self._last.get(key)
            drift = last is not None and not self._equal(last, current, last.text)
            if drift and self.on_drift is not None:
                self.on_drift(job.strategy, job.path.name)
            if self._equal(job, current, job.text):
                self._failed.forget(key)
                if self._cached(job, key, now):
                    return self._done(job, WriteStatus.CACHED, key, "", start, old, drift)
                self._remember(job, key, now)
                return self._done(job, WriteStatus.UNCHANGED, key, "", start, old, drift)
            if self.dry_run:
                self._audit(job, key, old, now, dry_run=True)
                return self._done(job, WriteStatus.DRY_RUN, key, "", start, old, drift)
            try:
                self.fs.write(job.path, job.text)
            except RefusedPathError as exc:
                return self._refuse(job, key, str(exc), start, old)
            except OSError as exc:
                return self._os_error(job, key, exc, start, old, drift, attempted=now)
            self._failed.forget(key)
            self._remember(job, key, now)
            self._audit(job, key, old, now, dry_run=False)
            return self._done(job, WriteStatus.WRITTEN, key, "", start, old, drift)

    def _write_blind(self, job: WriteJob, key: str, now: datetime, start: float) -> WriteResult:
        """A write-only kernel file (``CgroupFile.write_only``; reading it fails with EINVAL): written every
        time it is asked, audited with ``"old": null``; no cache, no drift memory, so never re-asserted."""
        if self.dry_run:
            self._audit(job, key, None, now, dry_run=True)
            return self._done(job, WriteStatus.DRY_RUN, key, "", start)
        try:
            self.fs.write(job.path, job.text)
        except RefusedPathError as exc:
            return self._refuse(job, key, str(exc), start)
        except OSError as exc:
            return self._os_error(job, key, exc, start, attempted=now)
        self._refused.forget(key)
        self._failed.forget(key)
        self._audit(job, key, None, now, dry_run=False)
        return self._done(job, WriteStatus.WRITTEN, key, "", start)

    def _cached(self, job: WriteJob, key: str, now: datetime) -> bool:
        """A cacheable write whose value the cache holds, fresher than ``force_update_seconds``."""
        text = self._cache.fresh(key, now) if job.cacheable else None
        return text is not None and self._equal(job, text, job.text)

    def _os_error(
        self,
        job: WriteJob,
        key: str,
        exc: OSError,
        start: float,
        old: str | None = None,
        drift: bool = False,
        *,
        attempted: datetime | None = None,
    ) -> WriteResult:
        """SKIPPED (vanished) or FAILED. ``attempted``: the change itself failed (a write or a mkdir, not
        the read before it): audited with ``skipped`` / ``failed`` naming the reason, once while it lasts."""
        vanished = exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ENODEV)
        if vanished:
            self._cache.drop(key)
            self._last.pop(key, None)
        status = WriteStatus.SKIPPED if vanished else WriteStatus.FAILED
        reason = f"{'vanished: ' if vanished else ''}{exc.strerror or exc}"
        if attempted is not None and self._failed.first(key, reason):
            self._audit(job, key, old, attempted, dry_run=False, outcome=(status.value, reason))
        return self._done(job, status, key, reason, start, old, drift)

    def _refuse(
        self, job: WriteJob, key: str, reason: str, start: float, old: str | None = None
    ) -> WriteResult:
        """REFUSED, audited with ``"refused": reason`` the first time (again once the reason changes)."""
        with self._lock:
            self._cache.drop(key)
            self._last.pop(key, None)
            first = self._refused.first(key, reason)
        if first:
            self._audit(job, key, old, self.clock(), dry_run=self.dry_run, outcome=("refused", reason))
        return self._done(job, WriteStatus.REFUSED, key, reason, start, old)

    def _remember(self, job: WriteJob, key: str, now: datetime) -> None:
        self._last[key] = job  # a merge-phase value too: the final phase must not see it as drift
        if job.cacheable:
            self._cache.put(key, job.text, now)
        else:
            self._cache.drop(key)

    def _audit(
        self,
        job: WriteJob,
        key: str,
        old: str | None,
        now: datetime,
        *,
        dry_run: bool,
        outcome: tuple[str, str] | None = None,
    ) -> None:
        """One audit line (``audit_record``)."""
        if self.audit is not None:
            self.audit.write(
                audit_record(job, self.node_name, key, old, now, dry_run=dry_run, outcome=outcome)
            )

    def _done(
        self,
        job: WriteJob,
        status: WriteStatus,
        path: str,
        reason: str = "",
        start: float | None = None,
        old: str | None = None,
        drift: bool = False,
    ) -> WriteResult:
        seconds = time.perf_counter() - start if start is not None else 0.0
        if self.on_write is not None:
            self.on_write(job.strategy, job.path.name, seconds, status.value)
        return WriteResult(job.write, status, path, old, job.text or None, reason, seconds, drift, job.phase)


def default_roots(paths: HostPaths) -> tuple[Path, ...]:
    """The cgroup root and the resctrl root (``<sys>/fs/resctrl``)."""
    return (paths.cgroup_root, paths.sys / "fs" / "resctrl")
