"""Pure parsers of /proc text: ``/proc/stat``, ``/proc/meminfo`` and PSI pressure files
(docs/rules/koordlet.md#collectors).

Every parser is a pure function of the file's text; ``name`` only labels errors, which are ``ValueError``
naming the file and the offending line. Imports: standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CpuTicks",
    "PressureLine",
    "PressureStats",
    "ProcStat",
    "meminfo_usage_bytes",
    "meminfo_usage_with_page_cache_bytes",
    "parse_meminfo",
    "parse_pressure",
    "parse_proc_stat",
    "read_meminfo",
    "read_pressure",
    "read_proc_stat",
]

_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True, slots=True)
class CpuTicks:
    """One ``cpu``/``cpuN`` line of /proc/stat, in clock ticks (missing trailing fields are 0)."""

    user: int
    nice: int
    system: int
    idle: int
    iowait: int = 0
    irq: int = 0
    softirq: int = 0
    steal: int = 0

    @property
    def busy(self) -> int:
        """Busy ticks = user + nice + system + irq + softirq (idle, iowait and steal excluded)."""
        return self.user + self.nice + self.system + self.irq + self.softirq


@dataclass(frozen=True, slots=True)
class ProcStat:
    """The CPU lines of /proc/stat: the aggregate line and the per-CPU lines keyed by CPU id."""

    total: CpuTicks
    per_cpu: dict[int, CpuTicks]


def _bad(name: str, lineno: int, line: str, why: str) -> ValueError:
    return ValueError(f"{name}: line {lineno}: {why}: {line!r}")


def _parse_cpu_line(name: str, lineno: int, line: str, fields: list[str]) -> CpuTicks:
    values = fields[1:]
    if len(values) < 4:
        raise _bad(name, lineno, line, "expected at least 4 tick counters")
    try:
        ticks = [int(v) for v in values[: len(_CPU_FIELDS)]]
    except ValueError:
        raise _bad(name, lineno, line, "non-integer tick counter") from None
    if any(t < 0 for t in ticks):
        raise _bad(name, lineno, line, "negative tick counter")
    ticks += [0] * (len(_CPU_FIELDS) - len(ticks))
    return CpuTicks(*ticks)


def parse_proc_stat(text: str, name: str = "/proc/stat") -> ProcStat:
    """Parse the ``cpu`` and ``cpuN`` lines of /proc/stat; other lines are ignored."""
    total: CpuTicks | None = None
    per_cpu: dict[int, CpuTicks] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields or not fields[0].startswith("cpu"):
            continue
        key = fields[0]
        if key == "cpu":
            if total is not None:
                raise _bad(name, lineno, line, "duplicate aggregate cpu line")
            total = _parse_cpu_line(name, lineno, line, fields)
            continue
        suffix = key[3:]
        if not suffix.isdigit():
            raise _bad(name, lineno, line, "bad cpu line key")
        cpu = int(suffix)
        if cpu in per_cpu:
            raise _bad(name, lineno, line, f"duplicate line for cpu {cpu}")
        per_cpu[cpu] = _parse_cpu_line(name, lineno, line, fields)
    if total is None:
        raise ValueError(f"{name}: no aggregate 'cpu' line")
    return ProcStat(total=total, per_cpu=per_cpu)


def parse_meminfo(text: str, name: str = "/proc/meminfo") -> dict[str, int]:
    """Parse meminfo lines ``Key: value [kB]`` into bytes (kB × 1024; unit-less values as is)."""
    out: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        key, sep, rest = line.partition(":")
        fields = rest.split()
        if not sep or not key.strip() or not 1 <= len(fields) <= 2:
            raise _bad(name, lineno, line, "expected 'Key: value [kB]'")
        try:
            value = int(fields[0])
        except ValueError:
            raise _bad(name, lineno, line, "non-integer value") from None
        if len(fields) == 2:
            if fields[1] != "kB":
                raise _bad(name, lineno, line, f"unknown unit {fields[1]!r}")
            value *= 1024
        out[key.strip()] = value
    return out


def _require(info: dict[str, int], key: str, name: str) -> int:
    if key not in info:
        raise ValueError(f"{name}: missing {key}")
    return info[key]


def meminfo_usage_bytes(info: dict[str, int], name: str = "/proc/meminfo") -> int:
    """Node memory usage = MemTotal − MemAvailable (metric ``node_memory_usage``)."""
    return _require(info, "MemTotal", name) - _require(info, "MemAvailable", name)


def meminfo_usage_with_page_cache_bytes(info: dict[str, int], name: str = "/proc/meminfo") -> int:
    """Node memory usage with page cache = MemTotal − MemFree."""
    return _require(info, "MemTotal", name) - _require(info, "MemFree", name)


@dataclass(frozen=True, slots=True)
class PressureLine:
    """One ``some``/``full`` line of a PSI file: averages in percent, total stall in microseconds."""

    avg10: float
    avg60: float
    avg300: float
    total: int


@dataclass(frozen=True, slots=True)
class PressureStats:
    """A PSI file; ``full`` is None when absent (e.g. the node-level ``cpu`` file on older kernels)."""

    some: PressureLine
    full: PressureLine | None


_PSI_KEYS = ("avg10", "avg60", "avg300", "total")


def _parse_pressure_line(name: str, lineno: int, line: str, fields: list[str]) -> PressureLine:
    values: dict[str, str] = {}
    for field in fields[1:]:
        key, sep, value = field.partition("=")
        if not sep or key in values:
            raise _bad(name, lineno, line, f"bad field {field!r}")
        values[key] = value
    if set(values) != set(_PSI_KEYS):
        raise _bad(name, lineno, line, "expected avg10, avg60, avg300 and total")
    try:
        return PressureLine(
            avg10=float(values["avg10"]),
            avg60=float(values["avg60"]),
            avg300=float(values["avg300"]),
            total=int(values["total"]),
        )
    except ValueError:
        raise _bad(name, lineno, line, "non-numeric value") from None


def parse_pressure(text: str, name: str = "pressure") -> PressureStats:
    """Parse a PSI file (``some avg10=… avg60=… avg300=… total=…`` and optional ``full …``)."""
    lines: dict[str, PressureLine] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        kind = fields[0]
        if kind not in ("some", "full"):
            raise _bad(name, lineno, line, "expected 'some' or 'full'")
        if kind in lines:
            raise _bad(name, lineno, line, f"duplicate {kind!r} line")
        lines[kind] = _parse_pressure_line(name, lineno, line, fields)
    if "some" not in lines:
        raise ValueError(f"{name}: no 'some' line")
    return PressureStats(some=lines["some"], full=lines.get("full"))


def read_proc_stat(proc: Path) -> ProcStat:
    """Read and parse ``<proc>/stat``."""
    path = proc / "stat"
    return parse_proc_stat(path.read_text(), str(path))


def read_meminfo(proc: Path) -> dict[str, int]:
    """Read and parse ``<proc>/meminfo``."""
    path = proc / "meminfo"
    return parse_meminfo(path.read_text(), str(path))


def read_pressure(proc: Path, resource: str) -> PressureStats:
    """Read and parse ``<proc>/pressure/<resource>`` (``cpu``, ``memory`` or ``io``)."""
    path = proc / "pressure" / resource
    return parse_pressure(path.read_text(), str(path))
