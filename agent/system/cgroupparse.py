"""The strict parsers of the cgroup files the koordlet reads: pure functions from a file's text to its typed
value, raising ``ValueError`` that names the file (and the line) on anything they do not accept.

They are the reference: the file table of ``agent.system.cgroup`` uses them as its converters, and the
optional C parser (``agent/system/_cgparse.c``) answers only where it gives exactly their value (the readers
of ``agent.system.readers`` hand every other file to them). Semantics per docs/rules/koordlet.md#collectors.
The key tables (``MEMSTAT_KEYS``, ``CPUSTAT_KEYS``) name the ``memory.stat`` and ``cpu.stat`` keys once, for
these parsers and the C ones alike.

Imports: standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CPUSTAT_V1_KEYS",
    "CPUSTAT_V2_KEYS",
    "MEMSTAT_V1_KEYS",
    "MEMSTAT_V2_KEYS",
    "NUMA_STAT_PAGE",
    "CpuStat",
    "MemoryStat",
    "cpu_max_period",
    "cpu_max_quota",
    "cpu_stat_v1",
    "cpu_stat_v2",
    "cpu_usage_v2",
    "int_or_max",
    "int_value",
    "limit",
    "memory_stat_v1",
    "memory_stat_v2",
    "nonneg",
    "numa_stat_v1",
    "numa_stat_v2",
    "positive",
    "quota",
    "weight_to_shares",
]


def _single(text: str, name: str) -> str:
    fields = text.split()
    if len(fields) != 1:
        raise ValueError(f"{name}: expected a single value, got {text.strip()!r}")
    return fields[0]


def int_value(text: str, name: str) -> int:
    """A file holding one integer (blanks around it allowed)."""
    value = _single(text, name)
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}: not an integer: {value!r}") from None


def int_or_max(text: str, name: str) -> int:
    """An integer, or the v2 literal ``max`` meaning unlimited (−1)."""
    return -1 if _single(text, name) == "max" else int_value(text, name)


def _kv(text: str, name: str) -> dict[str, int]:
    """Flat-keyed ``key value`` lines (cpu.stat, memory.stat); the last of duplicate keys wins.

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


def _pick(text: str, name: str, keys: tuple[str, ...]) -> list[int]:
    """The values of ``keys`` in a ``key value`` file, in order (``ValueError`` naming the first missing)."""
    values = _kv(text, name)
    for key in keys:
        if key not in values:
            raise ValueError(f"{name}: missing key {key!r}")
    return [values[key] for key in keys]


def _cpu_max(text: str, name: str) -> tuple[int, int]:
    """v2 ``cpu.max``: ``<quota|max> <period>`` → (quota or −1, period)."""
    fields = text.split()
    if len(fields) != 2:
        raise ValueError(f"{name}: expected '<quota|max> <period>', got {text.strip()!r}")
    return int_or_max(fields[0], name), int_value(fields[1], name)


def cpu_max_quota(text: str, name: str) -> int:
    return _cpu_max(text, name)[0]


def cpu_max_period(text: str, name: str) -> int:
    return _cpu_max(text, name)[1]


@dataclass(frozen=True, slots=True)
class CpuStat:
    """CFS bandwidth counters of ``cpu.stat`` (throttled time in ns for both versions)."""

    nr_periods: int
    nr_throttled: int
    throttled_time_ns: int


CPUSTAT_V1_KEYS = ("nr_periods", "nr_throttled", "throttled_time")
CPUSTAT_V2_KEYS = ("nr_periods", "nr_throttled", "throttled_usec")
"""The ``cpu.stat`` keys of ``CpuStat``'s fields, in order (v2's time is in µs)."""


def cpu_stat_v1(text: str, name: str) -> CpuStat:
    return CpuStat(*_pick(text, name, CPUSTAT_V1_KEYS))


def cpu_stat_v2(text: str, name: str) -> CpuStat:
    periods, throttled, usec = _pick(text, name, CPUSTAT_V2_KEYS)
    return CpuStat(periods, throttled, usec * 1000)


def cpu_usage_v2(text: str, name: str) -> int:
    """v2 CPU usage in ns: ``usage_usec`` of ``cpu.stat`` × 1000."""
    return _pick(text, name, ("usage_usec",))[0] * 1000


def weight_to_shares(text: str, name: str) -> int:
    """v2 ``cpu.weight`` [1, 10000] → v1-equivalent shares [2, 262144] (kubernetes' inverse mapping)."""
    weight = int_value(text, name)
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


_MEMSTAT_REST = ("inactive_file", "active_file", "inactive_anon", "active_anon", "unevictable")
MEMSTAT_V1_KEYS = ("total_cache", "total_rss", *("total_" + key for key in _MEMSTAT_REST))
MEMSTAT_V2_KEYS = ("file", "anon", *_MEMSTAT_REST)
"""The ``memory.stat`` keys of ``MemoryStat``'s fields, in order (v1: the hierarchical ``total_*`` ones)."""


def memory_stat_v1(text: str, name: str) -> MemoryStat:
    return MemoryStat(*_pick(text, name, MEMSTAT_V1_KEYS))


def memory_stat_v2(text: str, name: str) -> MemoryStat:
    return MemoryStat(*_pick(text, name, MEMSTAT_V2_KEYS))


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


def numa_stat_v1(text: str, name: str) -> dict[int, int]:
    """v1 ``memory.numa_stat`` → pages per NUMA node: the first line ``total=<pages> N0=<pages> …``."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("total="):
        raise ValueError(f"{name}: first line is not 'total=…'")
    return _numa_fields(lines[0].split(), name, lines[0])


def numa_stat_v2(text: str, name: str) -> dict[int, int]:
    """v2 ``memory.numa_stat`` → pages per NUMA node: the ``anon`` and ``file`` lines (bytes), each converted
    to pages by integer division by ``NUMA_STAT_PAGE`` and summed per node."""
    out: dict[int, int] = {}
    seen = 0
    for line in text.splitlines():
        fields = line.split()
        if not fields or fields[0] not in ("anon", "file"):
            continue
        seen += 1
        for node, value in _numa_fields(fields[1:], name, line).items():
            out[node] = out.get(node, 0) + value // NUMA_STAT_PAGE
    if seen != 2:
        raise ValueError(f"{name}: expected both 'anon' and 'file' lines")
    return out


# ---------------------------------------------------------------- validators of read values (None: fine)


def nonneg(value: int) -> str | None:
    return None if value >= 0 else f"negative value {value}"


def quota(value: int) -> str | None:
    return None if value == -1 or value > 0 else f"quota {value} is neither -1 nor positive"


def positive(value: int) -> str | None:
    return None if value > 0 else f"value {value} is not positive"


def limit(value: int) -> str | None:
    return None if value == -1 or value >= 0 else f"limit {value} is neither -1 nor non-negative"
