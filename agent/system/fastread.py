"""The per-tick fast path of the cgroup readers: ``read_text_fast`` (one ``os.open``/``os.read``, no buffered
file object) on precomputed path strings, and ``convert_fast``, which looks up only the keys a collector needs
and falls back to the strict ``convert_cgroup`` (and its precise errors) on anything unexpected.

Imports: standard library and ``agent.system.cgroup``.
"""

from __future__ import annotations

import os
from typing import TypeVar

from agent.system.cgroup import (
    CPU_STAT,
    CPU_USAGE,
    MEMORY_STAT,
    CgroupFile,
    CgroupVersion,
    CpuStat,
    MemoryStat,
    convert_cgroup,
)

__all__ = ["convert_fast", "read_text_fast"]

T = TypeVar("T")

_MEMSTAT_FIELDS = ("inactive_file", "active_file", "inactive_anon", "active_anon", "unevictable")
"""The ``MemoryStat`` fields after cache and rss, in declaration order."""


def read_text_fast(path: str) -> str:
    """Read a small pseudo-file with ``os.open``/``os.read`` (no buffered file object); ``OSError``."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, 65536)
        if len(data) == 65536:
            chunks = [data]
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
            data = b"".join(chunks)
    finally:
        os.close(fd)
    return data.decode()


Needles = tuple[tuple[str, int], ...]


def _needles(*keys: str) -> Needles:
    """``("\\nkey ", len)`` per key: a key is matched at a line start, followed by a space."""
    return tuple(("\n" + key + " ", len(key) + 2) for key in keys)


def _find_ints(text: str, needles: Needles, from_end: bool = False) -> list[int] | None:
    """Values of the keys (each the first ``key value`` line; the last with ``from_end``, for keys that
    appear once near the end of the file); None when one is missing or not an int."""
    out: list[int] = []
    body = "\n" + text  # so every line, the first included, starts after a newline
    find = body.find
    locate = body.rfind if from_end else find
    try:
        for needle, skip in needles:
            i = locate(needle)
            if i < 0:
                return None
            i += skip
            j = find("\n", i)
            out.append(int(body[i:j] if j >= 0 else body[i:]))
    except ValueError:
        return None
    return out


_MEMSTAT_KEYS = {
    CgroupVersion.V1: _needles(*("total_" + k for k in ("cache", "rss", *_MEMSTAT_FIELDS))),
    CgroupVersion.V2: _needles("file", "anon", *_MEMSTAT_FIELDS),
}
_CPUSTAT_KEYS = {
    CgroupVersion.V1: _needles("nr_periods", "nr_throttled", "throttled_time"),
    CgroupVersion.V2: _needles("nr_periods", "nr_throttled", "throttled_usec"),
}
_USAGE_USEC = _needles("usage_usec")


def convert_fast(spec: CgroupFile[T], version: CgroupVersion, text: str, name: str) -> T:
    """``convert_cgroup`` for the per-tick files, looking up only the keys it needs.

    For ``memory.stat``, ``cpu.stat`` and v2 ``cpu.stat`` usage the required keys are located directly
    (other lines are not validated); when one is missing or malformed the strict ``convert_cgroup`` runs and
    raises its precise error. Other files go straight to ``convert_cgroup``.
    """
    if spec is MEMORY_STAT:
        # v1 lists its hierarchical ``total_*`` block last: searching from the end is ~40 % cheaper.
        values = _find_ints(text, _MEMSTAT_KEYS[version], from_end=version is CgroupVersion.V1)
        if values is not None:
            return MemoryStat(*values)  # type: ignore[return-value]
    elif spec is CPU_STAT:
        values = _find_ints(text, _CPUSTAT_KEYS[version])
        if values is not None:
            scale = 1000 if version is CgroupVersion.V2 else 1
            return CpuStat(values[0], values[1], values[2] * scale)  # type: ignore[return-value]
    elif spec is CPU_USAGE:
        if version is CgroupVersion.V2:
            values = _find_ints(text, _USAGE_USEC)
            if values is not None and values[0] >= 0:
                return values[0] * 1000  # type: ignore[return-value]
        else:
            try:
                value = int(text)  # a single integer, surrounding whitespace allowed (like ``_int``)
            except ValueError:
                value = -1
            if value >= 0:
                return value  # type: ignore[return-value]
    return convert_cgroup(spec, version, text, name)
