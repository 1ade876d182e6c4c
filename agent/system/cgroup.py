"""Host paths, cgroup version detection and the cgroup files the koordlet reads, declared once as data.

Each ``CgroupFile`` names its v1 (subsystem, file) and v2 file, a pure converter per version (text → typed
value, ``ValueError`` naming the file on bad input) and an optional validator. ``read_cgroup`` is the thin
file reader (``agent.system.fastread`` has the per-tick fast path). Semantics per
docs/rules/koordlet.md#collectors. Writable knobs (each with its v1 and v2 file, docs/upstream.md D8)
also carry a *formatter* per version (typed value → text, see ``format_cgroup``), an optional write-only
validator and the "merged" loosening rule of leveled updates;
``agent.resourceexecutor`` is the only code that writes them.
Imports: standard library only (plus ``agent.system.procfs`` and ``agent.system.cgroupfmt``).
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
    "parse_numa_stat",
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


# ---------------------------------------------------------------- pure converters


def _single(text: str, name: str) -> str:
    fields = text.split()
    if len(fields) != 1:
        raise ValueError(f"{name}: expected a single value, got {text.strip()!r}")
    return fields[0]


def _int(text: str, name: str) -> int:
    value = _single(text, name)
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}: not an integer: {value!r}") from None


def _int_or_max(text: str, name: str) -> int:
    """An integer, or the v2 literal ``max`` meaning unlimited (−1)."""
    return -1 if _single(text, name) == "max" else _int(text, name)


def _kv(text: str, name: str) -> dict[str, int]:
    """Flat-keyed ``key value`` lines (cpu.stat, memory.stat).

    Fast path (the per-tick case): exactly two tokens per line on average over a file without blank
    lines, all values integers; anything else takes the line-by-line path, which names the bad line.
    """
    tokens = text.split()
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    if tokens and len(tokens) == 2 * lines:
        try:
            return dict(zip(tokens[0::2], map(int, tokens[1::2]), strict=True))
        except ValueError:
            pass
    return _kv_slow(text, name)


def _kv_slow(text: str, name: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 2:
            raise ValueError(f"{name}: line {lineno}: expected 'key value': {line!r}")
        try:
            out[fields[0]] = int(fields[1])
        except ValueError:
            raise ValueError(f"{name}: line {lineno}: not an integer: {line!r}") from None
    return out


def _need(values: dict[str, int], key: str, name: str) -> int:
    if key not in values:
        raise ValueError(f"{name}: missing key {key!r}")
    return values[key]


def _cpu_max(text: str, name: str) -> tuple[int, int]:
    """v2 ``cpu.max``: ``<quota|max> <period>`` → (quota or −1, period)."""
    fields = text.split()
    if len(fields) != 2:
        raise ValueError(f"{name}: expected '<quota|max> <period>', got {text.strip()!r}")
    return _int_or_max(fields[0], name), _int(fields[1], name)


def _cpu_max_quota(text: str, name: str) -> int:
    return _cpu_max(text, name)[0]


def _cpu_max_period(text: str, name: str) -> int:
    return _cpu_max(text, name)[1]


@dataclass(frozen=True, slots=True)
class CpuStat:
    """CFS bandwidth counters of ``cpu.stat`` (throttled time in ns for both versions)."""

    nr_periods: int
    nr_throttled: int
    throttled_time_ns: int


def _cpu_stat_v1(text: str, name: str) -> CpuStat:
    kv = _kv(text, name)
    return CpuStat(
        _need(kv, "nr_periods", name), _need(kv, "nr_throttled", name), _need(kv, "throttled_time", name)
    )


def _cpu_stat_v2(text: str, name: str) -> CpuStat:
    kv = _kv(text, name)
    return CpuStat(
        _need(kv, "nr_periods", name),
        _need(kv, "nr_throttled", name),
        _need(kv, "throttled_usec", name) * 1000,
    )


def _cpu_usage_v2(text: str, name: str) -> int:
    return _need(_kv(text, name), "usage_usec", name) * 1000


def _weight_to_shares(text: str, name: str) -> int:
    """v2 ``cpu.weight`` [1, 10000] → v1-equivalent shares [2, 262144] (kubernetes' inverse mapping)."""
    weight = _int(text, name)
    if not 1 <= weight <= 10000:
        raise ValueError(f"{name}: cpu.weight {weight} out of [1, 10000]")
    return 2 + ((weight - 1) * 262142) // 9999


@dataclass(frozen=True, slots=True)
class MemoryStat:
    """The ``memory.stat`` keys the pod collector needs (v1 ``total_*`` keys, v2 plain keys), in bytes
    (docs/rules/koordlet.md#collectors)."""

    cache: int
    rss: int
    inactive_file: int
    active_file: int
    inactive_anon: int
    active_anon: int
    unevictable: int

    @property
    def usage_anon(self) -> int:
        """Anon-only usage = inactive_anon + active_anon + unevictable (page cache excluded)."""
        return self.inactive_anon + self.active_anon + self.unevictable


_MEMSTAT_FIELDS = ("inactive_file", "active_file", "inactive_anon", "active_anon", "unevictable")


def _memory_stat(prefix: str, cache_key: str, rss_key: str) -> Callable[[str, str], MemoryStat]:
    def convert(text: str, name: str) -> MemoryStat:
        kv = _kv(text, name)
        rest = [_need(kv, prefix + key, name) for key in _MEMSTAT_FIELDS]
        return MemoryStat(_need(kv, prefix + cache_key, name), _need(kv, prefix + rss_key, name), *rest)

    return convert


NUMA_STAT_PAGE = 4096
"""v2 ``memory.numa_stat`` is in bytes; each line is converted to pages by integer division by 4096
(docs/rules/koordlet.md#collectors)."""


def _numa_fields(fields: list[str], name: str, line: str) -> dict[int, int]:
    out: dict[int, int] = {}
    for field in fields:
        key, sep, value = field.partition("=")
        if not sep:
            raise ValueError(f"{name}: bad field {field!r} in {line!r}")
        if not key.startswith("N"):
            continue
        try:
            out[int(key[1:])] = int(value)
        except ValueError:
            raise ValueError(f"{name}: bad field {field!r} in {line!r}") from None
    return out


def parse_numa_stat(text: str, name: str, version: CgroupVersion) -> dict[int, int]:
    """``memory.numa_stat`` → pages per NUMA node (pod NUMA memory, docs/rules/koordlet.md#collectors).

    v1: the first line ``total=<pages> N0=<pages> …``. v2: the ``anon`` and ``file`` lines (bytes), each
    converted to pages by integer division by 4096 and summed per node.
    """
    lines = text.splitlines()
    if version is CgroupVersion.V1:
        if not lines or not lines[0].startswith("total="):
            raise ValueError(f"{name}: first line is not 'total=…'")
        return _numa_fields(lines[0].split(), name, lines[0])
    out: dict[int, int] = {}
    seen = 0
    for line in lines:
        fields = line.split()
        if not fields or fields[0] not in ("anon", "file"):
            continue
        seen += 1
        for node, value in _numa_fields(fields[1:], name, line).items():
            out[node] = out.get(node, 0) + value // NUMA_STAT_PAGE
    if seen != 2:
        raise ValueError(f"{name}: expected both 'anon' and 'file' lines")
    return out


def _numa_stat_v1(text: str, name: str) -> dict[int, int]:
    return parse_numa_stat(text, name, CgroupVersion.V1)


def _numa_stat_v2(text: str, name: str) -> dict[int, int]:
    return parse_numa_stat(text, name, CgroupVersion.V2)


def _nonneg(value: int) -> str | None:
    return None if value >= 0 else f"negative value {value}"


def _quota(value: int) -> str | None:
    return None if value == -1 or value > 0 else f"quota {value} is neither -1 nor positive"


def _positive(value: int) -> str | None:
    return None if value > 0 else f"value {value} is not positive"


def _limit(value: int) -> str | None:
    return None if value == -1 or value >= 0 else f"limit {value} is neither -1 nor non-negative"


# ---------------------------------------------------------------- the table


@dataclass(frozen=True)  # no slots: ``CgroupFile[int](...)`` sets ``__orig_class__``
class CgroupFile(Generic[T]):
    """One logical cgroup file: v1 (subsystem, file) and v2 file with their converters, and a validator.

    Writable files add a formatter per version (None: read-only there), ``validate_write`` (checked on
    writes only, after ``validate``), ``v2_write_file`` when v2 reads and writes differ (``cpuset.cpus``
    vs ``cpuset.cpus.effective``) and ``merge(old, new)``: the loosening value a leveled update writes
    top-down first (None: no loosening needed).
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

    @property
    def writable(self) -> bool:
        return self.v1_format is not None or self.v2_format is not None


CPU_USAGE: CgroupFile[int] = CgroupFile(
    "cpu_usage_ns", "cpuacct", "cpuacct.usage", _int, "cpu.stat", _cpu_usage_v2, _nonneg
)
CPU_STAT: CgroupFile[CpuStat] = CgroupFile(
    "cpu_stat", "cpu", "cpu.stat", _cpu_stat_v1, "cpu.stat", _cpu_stat_v2
)
# cpu.max: the kernel parses "<quota|max> [<period>]" and keeps the current period when only the quota is
# written (kernel/sched/core.c cpu_period_quota_parse), so the quota is written alone
# (docs/rules/koordlet.md).
CPU_QUOTA: CgroupFile[int] = CgroupFile(
    "cpu_cfs_quota_us",
    "cpu",
    "cpu.cfs_quota_us",
    _int,
    "cpu.max",
    _cpu_max_quota,
    _quota,
    v1_format=fmt_int,
    v2_format=fmt_int_or_max,
    validate_write=quota_write,
    merge=merge_larger,
)
CPU_PERIOD: CgroupFile[int] = CgroupFile(
    "cpu_cfs_period_us", "cpu", "cpu.cfs_period_us", _int, "cpu.max", _cpu_max_period, _positive
)
CPU_SHARES: CgroupFile[int] = CgroupFile(
    "cpu_shares",
    "cpu",
    "cpu.shares",
    _int,
    "cpu.weight",
    _weight_to_shares,
    _positive,
    v1_format=fmt_int,
    v2_format=fmt_weight,
    validate_write=shares_write,
)
CPU_BURST: CgroupFile[int] = CgroupFile(
    "cpu_cfs_burst_us", "cpu", "cpu.cfs_burst_us", _int, "cpu.max.burst", _int, _nonneg, fmt_int, fmt_int
)
CPU_IDLE: CgroupFile[int] = CgroupFile(
    "cpu_idle", "cpu", "cpu.idle", _int, "cpu.idle", _int, range_check(0, 1), fmt_int, fmt_int
)
CPU_BVT_WARP_NS: CgroupFile[int] = CgroupFile(  # Anolis group identity
    "cpu_bvt_warp_ns",
    "cpu",
    "cpu.bvt_warp_ns",
    _int,
    "cpu.bvt_warp_ns",
    _int,
    range_check(-1, 2),
    fmt_int,
    fmt_int,
)
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
    _memory_stat("total_", "cache", "rss"),
    "memory.stat",
    _memory_stat("", "file", "anon"),
)
MEMORY_USAGE: CgroupFile[int] = CgroupFile(
    "memory_usage_bytes", "memory", "memory.usage_in_bytes", _int, "memory.current", _int, _nonneg
)
MEMORY_LIMIT: CgroupFile[int] = CgroupFile(
    "memory_limit_bytes",
    "memory",
    "memory.limit_in_bytes",
    _int,
    "memory.max",
    _int_or_max,
    _limit,
    v1_format=fmt_int,  # v1 takes "-1" for unlimited
    v2_format=fmt_int_or_max,
)


def _memory_protection(file: str) -> CgroupFile[int]:
    """memory.min/low/high: same name on both versions (v1: Anolis/Alinux only); −1 ⇄ ``max``."""
    name = file.replace(".", "_")
    fmt = fmt_int_or_max  # v1 Anolis parses these with page_counter_memparse(buf, "max")
    return CgroupFile(
        name, "memory", file, _int_or_max, file, _int_or_max, _limit, fmt, fmt, merge=merge_larger
    )


MEMORY_MIN = _memory_protection("memory.min")
MEMORY_LOW = _memory_protection("memory.low")
MEMORY_HIGH = _memory_protection("memory.high")
MEMORY_NUMA_STAT: CgroupFile[dict[int, int]] = CgroupFile(
    "memory_numa_stat", "memory", "memory.numa_stat", _numa_stat_v1, "memory.numa_stat", _numa_stat_v2
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
