"""Host paths, cgroup version detection and the cgroup files the koordlet reads or writes, declared once as
data (the v1 and v2 layout of each, docs/rules/koordlet.md#cgroup-v1-and-v2).

Each ``CgroupFile`` names its v1 (subsystem, file) and v2 file, a strict converter per version (text → typed
value, ``ValueError`` naming the file on bad input; the parsers live in ``agent.system.cgroupparse``) and an
optional validator. ``convert_cgroup`` applies them; ``read_cgroup`` is the plain file reader (the collectors'
per-tick readers are in ``agent.system.readers``). Semantics per docs/rules/koordlet.md#collectors.
Writable knobs also carry a *formatter* per version (typed value → text, see ``format_cgroup``), an
optional write-only validator and the "merged" loosening rule of leveled updates
(``agent.system.cgroupfmt``); ``agent.resourceexecutor`` is the only code that writes them.

Imports: standard library and ``agent.system.{cgroupfmt,cgroupparse,procfs}``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from agent.system.cgroupfmt import (
    UNLIMITED_MIN,
    fmt_int,
    fmt_int_or_max,
    fmt_weight,
    format_cpuset,
    int_lines,
    merge_cpuset,
    merge_larger,
    nonempty_cpuset,
    parse_cpuset_list,
    quota_write,
    range_check,
    shares_write,
)
from agent.system.cgroupparse import (
    NUMA_STAT_PAGE,
    CpuStat,
    MemoryStat,
    cpu_max_period,
    cpu_max_quota,
    cpu_stat_v1,
    cpu_stat_v2,
    cpu_usage_v2,
    int_or_max,
    int_value,
    limit,
    memory_stat_v1,
    memory_stat_v2,
    nonneg,
    numa_stat_v1,
    numa_stat_v2,
    positive,
    quota,
    weight_to_shares,
)
from agent.system.procfs import PressureStats, parse_pressure

__all__ = [
    "CGROUP_FILES",
    "CGROUP_PROCS",
    "CPUSET_CPUS",
    "CPU_BURST",
    "CPU_BVT_WARP_NS",
    "CPU_IDLE",
    "CPU_PERIOD",
    "CPU_PRESSURE",
    "CPU_QUOTA",
    "CPU_SHARES",
    "CPU_STAT",
    "CPU_USAGE",
    "IO_PRESSURE",
    "MEMORY_HIGH",
    "MEMORY_LIMIT",
    "MEMORY_LOW",
    "MEMORY_MIN",
    "MEMORY_NUMA_STAT",
    "MEMORY_PRESSURE",
    "MEMORY_STAT",
    "MEMORY_USAGE",
    "NUMA_STAT_PAGE",
    "TASKS",
    "WRITABLE_CGROUP_FILES",
    "CgroupFile",
    "CgroupUnsupportedError",
    "CgroupVersion",
    "CpuStat",
    "HostPaths",
    "MemoryStat",
    "cgroup_file_path",
    "cgroup_text_equal",
    "cgroup_write_path",
    "convert_cgroup",
    "detect_cgroup_version",
    "format_cgroup",
    "format_cpuset",
    "parse_cpuset_list",
    "read_cgroup",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class HostPaths:
    """Where the host's proc, sys and cgroup trees are mounted; defaults fit the koordlet DaemonSet."""

    cgroup_root: Path = Path("/host-cgroup/")
    proc: Path = Path("/proc")
    sys: Path = Path("/host-sys/")


class CgroupVersion(enum.Enum):
    V1 = "v1"
    V2 = "v2"


class CgroupUnsupportedError(LookupError):
    """The cgroup file has no equivalent under this cgroup version."""


def detect_cgroup_version(root: Path) -> CgroupVersion:
    """v2 when ``cgroup.controllers`` exists at the root; v1 (hybrid too) when ``cpu``/``cpuacct`` dirs exist.

    A hybrid host's ``unified`` hierarchy is ignored. Raises ``ValueError`` when neither layout is found.
    """
    if (root / "cgroup.controllers").is_file():
        return CgroupVersion.V2
    if (root / "cpu").is_dir() or (root / "cpuacct").is_dir() or (root / "cpu,cpuacct").is_dir():
        return CgroupVersion.V1
    raise ValueError(f"{root}: no cgroup v2 cgroup.controllers and no cgroup v1 cpu/cpuacct subsystem")


# ---------------------------------------------------------------- the table


@dataclass(frozen=True)  # no slots: ``CgroupFile[int](...)`` sets ``__orig_class__``
class CgroupFile(Generic[T]):
    """One logical cgroup file: v1 (subsystem, file) and v2 file with their converters, and a validator.

    Writable files add a formatter per version (None: read-only there), ``validate_write`` (checked on
    writes only, after ``validate``), ``v2_write_file`` when v2 reads and writes differ (``cpuset.cpus``
    vs ``cpuset.cpus.effective``) and ``merge(old, new)``: the loosening value a leveled update writes
    top-down first (None: no loosening needed). ``write_only``: a kernel file that cannot be read (v1
    ``devices.allow``/``devices.deny``, read gives EINVAL): the executor writes it every time it is asked,
    never comparing, caching or remembering it (docs/rules/koordlet.md#writing-to-the-host).
    """

    name: str
    v1_subsystem: str | None
    v1_file: str | None
    v1_convert: Callable[[str, str], T] | None
    v2_file: str | None
    v2_convert: Callable[[str, str], T] | None
    validate: Callable[[T], str | None] | None = None
    v1_format: Callable[[T], str] | None = None
    v2_format: Callable[[T], str] | None = None
    validate_write: Callable[[T], str | None] | None = None
    v2_write_file: str | None = None
    merge: Callable[[T, T], T | None] | None = None
    # A kernel file with no read handler: written without reading, no cache or drift memory.
    write_only: bool = False

    @property
    def writable(self) -> bool:
        return self.v1_format is not None or self.v2_format is not None


CPU_USAGE: CgroupFile[int] = CgroupFile(
    "cpu_usage_ns", "cpuacct", "cpuacct.usage", int_value, "cpu.stat", cpu_usage_v2, nonneg
)
CPU_STAT: CgroupFile[CpuStat] = CgroupFile(
    "cpu_stat", "cpu", "cpu.stat", cpu_stat_v1, "cpu.stat", cpu_stat_v2
)
# cpu.max: the kernel parses "<quota|max> [<period>]" and keeps the current period when only the quota is
# written (kernel/sched/core.c cpu_period_quota_parse), so the quota is written alone
# (docs/rules/koordlet.md).
CPU_QUOTA: CgroupFile[int] = CgroupFile(
    "cpu_cfs_quota_us",
    "cpu",
    "cpu.cfs_quota_us",
    int_value,
    "cpu.max",
    cpu_max_quota,
    quota,
    v1_format=fmt_int,
    v2_format=fmt_int_or_max,
    validate_write=quota_write,
    merge=merge_larger,
)
CPU_PERIOD: CgroupFile[int] = CgroupFile(
    "cpu_cfs_period_us", "cpu", "cpu.cfs_period_us", int_value, "cpu.max", cpu_max_period, positive
)
CPU_SHARES: CgroupFile[int] = CgroupFile(
    "cpu_shares",
    "cpu",
    "cpu.shares",
    int_value,
    "cpu.weight",
    weight_to_shares,
    positive,
    v1_format=fmt_int,
    v2_format=fmt_weight,
    validate_write=shares_write,
)


def _cpu_int_knob(
    name: str, v1_file: str, v2_file: str, check: Callable[[int], str | None]
) -> CgroupFile[int]:
    """A ``cpu`` subsystem integer, read and written as is on both versions."""
    return CgroupFile(name, "cpu", v1_file, int_value, v2_file, int_value, check, fmt_int, fmt_int)


CPU_BURST = _cpu_int_knob("cpu_cfs_burst_us", "cpu.cfs_burst_us", "cpu.max.burst", nonneg)
CPU_IDLE = _cpu_int_knob("cpu_idle", "cpu.idle", "cpu.idle", range_check(0, 1))
# Anolis group identity.
CPU_BVT_WARP_NS = _cpu_int_knob("cpu_bvt_warp_ns", "cpu.bvt_warp_ns", "cpu.bvt_warp_ns", range_check(-1, 2))
# Writes take CPU ids or any cpuset text and write the canonical list; never an empty set. v2 reads
# ``cpuset.cpus.effective`` but writes (and compares against) ``cpuset.cpus``.
CPUSET_CPUS: CgroupFile[list[int]] = CgroupFile(
    "cpuset_cpus",
    "cpuset",
    "cpuset.cpus",
    parse_cpuset_list,
    "cpuset.cpus.effective",
    parse_cpuset_list,
    v1_format=format_cpuset,
    v2_format=format_cpuset,
    validate_write=nonempty_cpuset,
    v2_write_file="cpuset.cpus",
    merge=merge_cpuset,
)
CGROUP_PROCS: CgroupFile[list[int]] = CgroupFile(
    "cgroup_procs", "cpu", "cgroup.procs", int_lines, "cgroup.procs", int_lines
)
TASKS: CgroupFile[list[int]] = CgroupFile("tasks", "cpu", "tasks", int_lines, "cgroup.threads", int_lines)
MEMORY_STAT: CgroupFile[MemoryStat] = CgroupFile(
    "memory_stat",
    "memory",
    "memory.stat",
    memory_stat_v1,
    "memory.stat",
    memory_stat_v2,
)
MEMORY_USAGE: CgroupFile[int] = CgroupFile(
    "memory_usage_bytes", "memory", "memory.usage_in_bytes", int_value, "memory.current", int_value, nonneg
)
MEMORY_LIMIT: CgroupFile[int] = CgroupFile(
    "memory_limit_bytes",
    "memory",
    "memory.limit_in_bytes",
    int_value,
    "memory.max",
    int_or_max,
    limit,
    v1_format=fmt_int,  # v1 takes "-1" for unlimited
    v2_format=fmt_int_or_max,
)


def _memory_protection(file: str) -> CgroupFile[int]:
    """memory.min/low/high: same name on both versions (v1: Anolis/Alinux only); −1 ⇄ ``max``."""
    name = file.replace(".", "_")
    fmt = fmt_int_or_max  # v1 Anolis parses these with page_counter_memparse(buf, "max")
    return CgroupFile(name, "memory", file, int_or_max, file, int_or_max, limit, fmt, fmt, merge=merge_larger)


MEMORY_MIN = _memory_protection("memory.min")
MEMORY_LOW = _memory_protection("memory.low")
MEMORY_HIGH = _memory_protection("memory.high")
MEMORY_NUMA_STAT: CgroupFile[dict[int, int]] = CgroupFile(
    "memory_numa_stat", "memory", "memory.numa_stat", numa_stat_v1, "memory.numa_stat", numa_stat_v2
)
# PSI: cgroup v2, or Anolis v1 kernels exposing the pressure files in the cpuacct subsystem.
CPU_PRESSURE: CgroupFile[PressureStats] = CgroupFile(
    "cpu_pressure", "cpuacct", "cpu.pressure", parse_pressure, "cpu.pressure", parse_pressure
)
MEMORY_PRESSURE: CgroupFile[PressureStats] = CgroupFile(
    "memory_pressure", "cpuacct", "memory.pressure", parse_pressure, "memory.pressure", parse_pressure
)
IO_PRESSURE: CgroupFile[PressureStats] = CgroupFile(
    "io_pressure", "cpuacct", "io.pressure", parse_pressure, "io.pressure", parse_pressure
)

CGROUP_FILES: tuple[CgroupFile[Any], ...] = (
    CPU_USAGE,
    CPU_STAT,
    CPU_QUOTA,
    CPU_PERIOD,
    CPU_SHARES,
    CPUSET_CPUS,
    MEMORY_STAT,
    MEMORY_USAGE,
    MEMORY_LIMIT,
    MEMORY_NUMA_STAT,
    CPU_PRESSURE,
    MEMORY_PRESSURE,
    IO_PRESSURE,
)
"""The files the koordlet reads (metrics); the writable knobs are ``WRITABLE_CGROUP_FILES``."""

WRITABLE_CGROUP_FILES: tuple[CgroupFile[Any], ...] = (
    CPU_QUOTA,
    CPU_SHARES,
    CPU_BURST,
    CPU_IDLE,
    CPU_BVT_WARP_NS,
    CPUSET_CPUS,
    MEMORY_LIMIT,
    MEMORY_MIN,
    MEMORY_LOW,
    MEMORY_HIGH,
)


def cgroup_file_path(root: Path, version: CgroupVersion, spec: CgroupFile[T], cgroup_dir: str) -> Path:
    """Path of ``spec`` for the cgroup ``cgroup_dir`` (relative to the cgroup root, e.g. a pod's dir)."""
    rel = cgroup_dir.strip("/")
    if version is CgroupVersion.V1:
        if spec.v1_subsystem is None or spec.v1_file is None:
            raise CgroupUnsupportedError(f"{spec.name}: not available on cgroup v1")
        base = root / spec.v1_subsystem
        return (base / rel if rel else base) / spec.v1_file
    if spec.v2_file is None:
        raise CgroupUnsupportedError(f"{spec.name}: not available on cgroup v2")
    return (root / rel if rel else root) / spec.v2_file


def convert_cgroup(spec: CgroupFile[T], version: CgroupVersion, text: str, name: str) -> T:
    """Pure: convert the text of ``spec``'s file under ``version`` and validate it; ``name`` labels errors."""
    convert = spec.v1_convert if version is CgroupVersion.V1 else spec.v2_convert
    if convert is None:
        raise CgroupUnsupportedError(f"{spec.name}: not available on cgroup {version.value}")
    value = convert(text, name)
    if spec.validate is not None:
        problem = spec.validate(value)
        if problem is not None:
            raise ValueError(f"{name}: {problem}")
    return value


def cgroup_write_path(root: Path, version: CgroupVersion, spec: CgroupFile[T], cgroup_dir: str) -> Path:
    """Path written for ``spec`` (differs from ``cgroup_file_path`` only for v2 ``v2_write_file``)."""
    path = cgroup_file_path(root, version, spec, cgroup_dir)
    if version is CgroupVersion.V2 and spec.v2_write_file is not None:
        return path.with_name(spec.v2_write_file)
    return path


def format_cgroup(spec: CgroupFile[T], version: CgroupVersion, value: T) -> str:
    """Pure: validate ``value`` (``validate`` then ``validate_write``) and format it as ``spec``'s file text
    under ``version`` (no trailing newline). ``CgroupUnsupportedError`` when read-only/absent there,
    ``ValueError`` naming the knob on a bad value."""
    fmt = spec.v1_format if version is CgroupVersion.V1 else spec.v2_format
    if fmt is None:
        raise CgroupUnsupportedError(f"{spec.name}: not writable on cgroup {version.value}")
    try:
        for check in (spec.validate, spec.validate_write):
            problem = check(value) if check is not None else None
            if problem is not None:
                raise ValueError(problem)
        return fmt(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{spec.name}: {exc}") from None


def _norm_token(token: str) -> str:
    try:
        number = int(token)
    except ValueError:
        return token
    return "max" if number == -1 or number >= UNLIMITED_MIN else str(number)


def cgroup_text_equal(spec: CgroupFile[Any], current: str, new: str) -> bool:
    """Pure: does the file content ``current`` already hold the formatted ``new``?

    Tokens compare after normalisation (−1, ``max`` and integers ≥ ``UNLIMITED_MIN`` are all unlimited);
    ``new`` may be a prefix of ``current`` (v2 ``cpu.max``: the quota alone vs ``"<quota> <period>"``);
    cpuset files compare as CPU sets in any notation.
    """
    cur, want = current.split(), new.split()
    if want and [_norm_token(t) for t in cur[: len(want)]] == [_norm_token(t) for t in want]:
        return True
    if spec.v1_format is format_cpuset:
        try:
            return parse_cpuset_list(current) == parse_cpuset_list(new)
        except ValueError:
            return False
    return not cur and not want


def read_cgroup(root: Path, version: CgroupVersion, spec: CgroupFile[T], cgroup_dir: str) -> T:
    """Read, convert and validate ``spec`` for ``cgroup_dir``; ``OSError`` when the file cannot be read."""
    path = cgroup_file_path(root, version, spec, cgroup_dir)
    return convert_cgroup(spec, version, path.read_text(), str(path))
