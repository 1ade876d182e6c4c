"""The collectors' per-tick reads of the host's pseudo-files, and the values of the cgroup files among them.

Bytes: ``read_bytes(path)`` is one ``os.open``, one ``os.read`` (more only for a file over 64 KiB) and
``os.close``, no buffered file object; ``read_files``/``read_pairs`` do the same for a round's files in one
loop with no Python frame per file (None where a file cannot be read).

Values: two parser tiers, and one rule (docs/architecture.md#the-koordlets-per-second-path).
- The strict parsers (``agent.system.cgroupparse``, applied by ``agent.system.cgroup.convert_cgroup``; the
  /proc ones of ``agent.system.procfs`` and ``agent.system.nodeinfo``) are the reference: pure Python, they
  define every value and every error.
- The optional C extension (``agent/system/_cgparse.c``, see ``agent.system.accel``) parses the plain
  layouts the kernel writes of the files read per cgroup (``cpuacct.usage``, ``cpu.stat``,
  ``memory.stat``, ``memory.numa_stat``), a round at a time, and answers None for anything else; every such
  file then goes to the strict parser. Where it answers, its answer is the strict parser's (property-tested),
  so values and errors are the same with or without it.

``decoder(kind, version)`` gives one file's value from its bytes, ``BatchDecoder(kind, version)`` a round's,
``reader(spec, version)`` reads and converts one file; the /proc readers give the node collector's values.

Imports: standard library, agent.system.{accel,cgroup,cgroupparse,nodeinfo,procfs}.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from agent.system.accel import cgparse
from agent.system.cgroup import (
    CPU_STAT,
    CPU_USAGE,
    CPUSET_CPUS,
    MEMORY_NUMA_STAT,
    MEMORY_STAT,
    CgroupFile,
    CgroupVersion,
    convert_cgroup,
)
from agent.system.cgroupparse import (
    CPUSTAT_V1_KEYS,
    CPUSTAT_V2_KEYS,
    MEMSTAT_V1_KEYS,
    MEMSTAT_V2_KEYS,
    NUMA_STAT_PAGE,
    CpuStat,
    MemoryStat,
)
from agent.system.nodeinfo import numa_memory_usage_bytes, parse_node_meminfo
from agent.system.procfs import meminfo_usage_bytes, parse_meminfo, parse_proc_stat

__all__ = [
    "KINDS",
    "BatchDecoder",
    "decoder",
    "node_meminfo_usage",
    "proc_meminfo_usage",
    "read_bytes",
    "read_files",
    "read_pairs",
    "read_proc_stat_busy",
    "read_text",
    "reader",
]

T = TypeVar("T")

_CHUNK = 65536
_FLAGS = os.O_RDONLY | os.O_CLOEXEC
_open, _read, _close = os.open, os.read, os.close

# ---------------------------------------------------------------- bytes


def read_bytes(path: str) -> bytes:
    """The bytes of a small pseudo-file (``OSError`` when it cannot be read)."""
    fd = _open(path, _FLAGS)
    try:
        data = _read(fd, _CHUNK)
        if len(data) == _CHUNK:
            data = _read_rest(fd, data)
    finally:
        _close(fd)
    return data


def _read_rest(fd: int, first: bytes) -> bytes:
    """``first`` (a full first read of ``fd``) and the rest of the file."""
    chunks = [first]
    while chunk := _read(fd, _CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


def read_text(path: str) -> str:
    """``read_bytes`` decoded as UTF-8 (``UnicodeDecodeError``, a ``ValueError``, on invalid bytes)."""
    return read_bytes(path).decode()


def read_files(paths: Sequence[str]) -> list[bytes | None]:
    """The bytes of each file (None where it cannot be opened or read)."""
    return _read_all(paths, None, 1)[0]


def read_pairs(
    first: Sequence[str], second: Sequence[str], clock: Callable[[], int]
) -> tuple[list[int], list[bytes | None], list[bytes | None]]:
    """For each cgroup: ``clock()``, then its ``first`` file, then its ``second`` (as ``read_files``)."""
    both: list[str] = [path for pair in zip(first, second, strict=True) for path in pair]
    datas, walls = _read_all(both, clock, 2)
    return walls, datas[0::2], datas[1::2]


def _read_all(
    paths: Sequence[str], clock: Callable[[], int] | None, every: int
) -> tuple[list[bytes | None], list[int]]:
    """``read_files``, and with ``clock`` also ``clock()`` just before every ``every``-th file. The read of
    ``read_bytes``, inlined: a call per file would cost more than the parsing of most files."""
    out: list[bytes | None] = []
    walls: list[int] = []
    append, stamp = out.append, walls.append
    for i, path in enumerate(paths):
        if clock is not None and i % every == 0:
            stamp(clock())
        try:
            fd = _open(path, _FLAGS)
        except OSError:
            append(None)
            continue
        try:
            data: bytes | None = _read(fd, _CHUNK)
            if len(data) == _CHUNK:  # type: ignore[arg-type]
                data = _read_rest(fd, data)  # type: ignore[arg-type]
        except OSError:
            data = None
        finally:
            _close(fd)
        append(data)
    return out, walls


# ---------------------------------------------------------------- cgroup values


def _same(value: Any) -> Any:
    return value


def _usage_anon(stat: MemoryStat) -> int:
    return stat.usage_anon


def _periods(stat: CpuStat) -> tuple[int, int]:
    return stat.nr_periods, stat.nr_throttled


KINDS: dict[str, tuple[CgroupFile[Any], Callable[[Any], Any]]] = {
    "usage": (CPU_USAGE, _same),
    "anon": (MEMORY_STAT, _usage_anon),
    "throttle": (CPU_STAT, _periods),
    "numa": (MEMORY_NUMA_STAT, _same),
    "cpuset": (CPUSET_CPUS, _same),
}
"""What a decoder of each kind returns: (the cgroup file, the projection of its strict value): CPU usage ns,
anon bytes (``MemoryStat.usage_anon``), (nr_periods, nr_throttled), pages per NUMA node, a CPU list."""


def reader(spec: CgroupFile[T], version: CgroupVersion) -> Callable[[str], T]:
    """``read(path)``: ``spec``'s file at ``path``, read and converted by the strict parser (``OSError``,
    ``ValueError`` naming ``path``)."""

    def read(path: str) -> T:
        return convert_cgroup(spec, version, read_bytes(path).decode(), path)

    return read


def decoder(kind: str, version: CgroupVersion) -> Callable[[bytes, str], Any]:
    """``decode(data, path)``: the value of kind ``kind`` (see ``KINDS``) of a file whose bytes were read;
    ``ValueError`` (the strict parser's, naming ``path``) on bad content."""
    if kind not in KINDS:
        raise ValueError(f"decoder: unknown kind {kind!r}")
    spec, project = KINDS[kind]
    if kind == "cpuset":
        return _cpuset_decoder(version)
    fast: Callable[[bytes], Any] | None = None
    if kind == "numa" and cgparse is not None:
        c = cgparse
        fast = c.numa_v1 if version is CgroupVersion.V1 else (lambda data: c.numa_v2(data, NUMA_STAT_PAGE))

    def decode(data: bytes, path: str) -> Any:
        if fast is not None:
            value = fast(data)
            if value is not None:
                return value
        return project(convert_cgroup(spec, version, data.decode(), path))

    return decode


_CPUSET_MEMO_MAX = 256


def _cpuset_decoder(version: CgroupVersion) -> Callable[[bytes, str], list[int]]:
    """cpuset lists barely ever change: the strict result is memoised by the file's bytes (a fresh list
    each time; errors are not memoised)."""
    memo: dict[bytes, list[int]] = {}

    def decode(data: bytes, path: str) -> list[int]:
        hit = memo.get(data)
        if hit is None:
            hit = convert_cgroup(CPUSET_CPUS, version, data.decode(), path)
            if len(memo) >= _CPUSET_MEMO_MAX:
                memo.clear()
            memo[data] = hit
        return list(hit)

    return decode


class BatchDecoder:
    """``decode(datas, paths)`` → the value of each file of a round (kinds ``usage``, ``anon``, ``throttle``),
    None where it was unreadable or is bad: the C batch parser first, the strict parser for each file it
    leaves (see the module docstring)."""

    def __init__(self, kind: str, version: CgroupVersion) -> None:
        if kind not in ("usage", "anon", "throttle"):
            raise ValueError(f"BatchDecoder: unknown kind {kind!r}")
        self._one = decoder(kind, version)
        self._batch: Callable[[list[bytes | None]], tuple[list[Any], int]] | None = None
        c = cgparse
        if c is None:
            return
        v1 = version is CgroupVersion.V1
        if kind == "usage" and v1:
            self._batch = c.uint_batch
        elif kind == "usage":
            usage = (b"usage_usec",)
            self._batch = lambda datas: c.kv_batch(datas, usage, 0, 1, True, 1000)
        elif kind == "anon":  # inactive_anon + active_anon + unevictable
            mem = _encoded(MEMSTAT_V1_KEYS if v1 else MEMSTAT_V2_KEYS)
            self._batch = lambda datas: c.kv_batch(datas, mem, 4, 7, True, 1)
        else:  # nr_periods, nr_throttled (the throttled time must be there too)
            cpu = _encoded(CPUSTAT_V1_KEYS if v1 else CPUSTAT_V2_KEYS)
            self._batch = lambda datas: c.kv_batch(datas, cpu, 0, 2, False, 1)

    def __call__(self, datas: list[bytes | None], paths: Sequence[str]) -> list[Any]:
        if self._batch is not None:
            out, misses = self._batch(datas)
        else:
            out, misses = [None] * len(datas), len(datas)
        if misses:
            one = self._one
            for i, data in enumerate(datas):
                if out[i] is None and data is not None:
                    try:  # noqa: SIM105 (contextlib.suppress costs 40 times more, per file)
                        out[i] = one(data, paths[i])
                    except ValueError:
                        pass  # a bad file: no value (a single reader raises)
        return out


def _encoded(keys: tuple[str, ...]) -> tuple[bytes, ...]:
    return tuple(key.encode() for key in keys)


# ---------------------------------------------------------------- /proc (a few files a tick: strict parsers)


def read_proc_stat_busy(path: str) -> tuple[int, dict[int, int]]:
    """(aggregate busy ticks, busy ticks per CPU id) of /proc/stat (``parse_proc_stat``'s errors)."""
    stat = parse_proc_stat(read_text(path), path)
    return stat.total.busy, {cpu: ticks.busy for cpu, ticks in stat.per_cpu.items()}


def proc_meminfo_usage(path: str) -> int:
    """``meminfo_usage_bytes`` (MemTotal − MemAvailable) of /proc/meminfo."""
    return meminfo_usage_bytes(parse_meminfo(read_text(path), path), path)


def node_meminfo_usage(path: str) -> int:
    """``numa_memory_usage_bytes`` of a ``node<N>/meminfo`` (``Node N Key: value kB`` lines)."""
    return numa_memory_usage_bytes(parse_node_meminfo(read_text(path), path), path)
