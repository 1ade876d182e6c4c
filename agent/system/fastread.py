"""The per-tick fast path of the cgroup readers: bytes in, only the needed keys out, the strict converter
(and its precise errors) on anything unexpected.

``reader(spec, version)`` returns ``read(path) -> value`` for one cgroup file: one ``os.open``/``os.read``/
``os.close`` (no buffered file object, no ``str`` decode), then a bytes-level parser that looks up only the
keys the collectors need and ``int()``s the byte slices; whenever that parser cannot vouch for its answer
(a key missing, a value that is not an integer, a layout it does not recognise) it returns None and the
strict ``convert_cgroup`` runs on the decoded text, so a bad file raises exactly the strict error.
``convert_fast(spec, version, text, name)`` is the same on text already read.

The bytes parsers run in C when the optional extension ``agent.system._cgparse`` is built (``pip install``
compiles it; ``KOORD_PURE_PYTHON=1`` turns it off): it answers the plain layouts the kernel writes and
returns None on anything else, and then the Python parser below decides, so both paths give the same
values and the same errors (``ACCELERATED`` tells which is in use).

Contract of the fast parsers: for every input the strict converter accepts whose keys are unique (as every
kernel's are) and which holds no ASCII separator bytes ``\\x1c``–``\\x1f`` (which ``str.split`` treats as
blanks and ``bytes.split`` does not), the fast result equals the strict one; lines the collectors do not
need are not validated (the strict converter would reject, say, a non-integer ``pgfault``).

Imports: standard library, ``agent.system.cgroup``, ``agent.accel`` (the optional C parsers).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from operator import itemgetter
from typing import Any, TypeVar, cast

from agent.accel import cgparse
from agent.system.cgroup import (
    CPU_STAT,
    CPU_USAGE,
    CPUSET_CPUS,
    MEMORY_NUMA_STAT,
    MEMORY_STAT,
    NUMA_STAT_PAGE,
    CgroupFile,
    CgroupVersion,
    CpuStat,
    MemoryStat,
    convert_cgroup,
)

__all__ = [
    "ACCELERATED",
    "CPUSTAT_KEYS",
    "MEMSTAT_KEYS",
    "anon_reader",
    "convert_fast",
    "decoder",
    "fast_parser",
    "plain_ascii",
    "read_bytes",
    "read_rest",
    "read_text_fast",
    "reader",
    "throttle_reader",
]

T = TypeVar("T")

if cgparse is not None:
    _c_kv: Callable[[bytes, tuple[bytes, ...]], tuple[int, ...] | None] | None = cgparse.kv
    _c_numa_v1: Callable[[bytes], dict[int, int] | None] | None = cgparse.numa_v1
    _c_numa_v2: Callable[[bytes, int], dict[int, int] | None] | None = cgparse.numa_v2
else:  # not built (no compiler at install time) or turned off: the Python parsers alone
    _c_kv = _c_numa_v1 = _c_numa_v2 = None

ACCELERATED = _c_kv is not None
"""True when the C parsers of ``agent.system._cgparse`` are in use."""

_CHUNK = 65536
_FLAGS = os.O_RDONLY | os.O_CLOEXEC
_open, _read, _close = os.open, os.read, os.close


def read_bytes(path: str) -> bytes:
    """Read a small pseudo-file with ``os.open``/``os.read`` (no buffered file object); ``OSError``."""
    fd = _open(path, _FLAGS)
    try:
        data = _read(fd, _CHUNK)
        if len(data) == _CHUNK:
            data = read_rest(fd, data)
    finally:
        _close(fd)
    return data


def read_rest(fd: int, first: bytes) -> bytes:
    """``first`` (a full first read of ``fd``) and the rest of the file."""
    chunks = [first]
    while chunk := _read(fd, _CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


def read_text_fast(path: str) -> str:
    """``read_bytes`` decoded as UTF-8 (``UnicodeDecodeError``, a ``ValueError``, on invalid bytes)."""
    return read_bytes(path).decode()


# ---------------------------------------------------------------- bytes parsers (None = "ask the strict one")

Parser = Callable[[bytes], Any]
"""bytes → the converted value, or None when the strict converter must decide."""


_ODD_BLANKS = b"\r\x0b\x0c\x1c\x1d\x1e\x1f"
"""ASCII bytes that ``str.splitlines``/``str.split`` treat as line breaks or blanks and ``bytes`` does not
(or the other way round): text holding one goes to the strict parser."""


def plain_ascii(data: bytes) -> bool:
    """True when ``bytes`` and ``str`` split ``data`` into the same lines and tokens."""
    return data.isascii() and len(data.translate(None, _ODD_BLANKS)) == len(data)


def _kv_parser(
    keys: tuple[str, ...],
    build: Callable[[tuple[int, ...]], Any],
    use: slice | None = None,
    accel: bool = True,
) -> Parser:
    """A parser of flat ``key value`` lines (cpu.stat, memory.stat) returning ``build(values)``: the tuple
    of the integer values of ``keys`` (or, with ``use``, of the keys in that slice only; every key must
    still be present), e.g. ``sum`` or ``tuple``. With ``accel`` the C ``kv`` answers first.

    Tokens pair up like the strict ``_kv`` fast path (token count = 2 × lines). The token positions of the
    keys are learned from the first file and then checked on each file (one ``split`` and two C-level
    ``itemgetter`` calls, no dict); a file laid out otherwise is learned afresh. None when the text is not
    ASCII, the count differs, a key is missing or a value is not an integer (or ``build`` returns None).
    """
    needed = tuple(k.encode() for k in keys)
    picked = range(len(keys))[use or slice(None)]
    c_kv = _c_kv if accel else None
    layout: list[Any] = [-1, None, None, ()]  # token count, key getter, value getter, the keys it yields

    def learn(tokens: list[bytes], data: bytes) -> bool:
        lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
        if len(tokens) != 2 * lines or not data.isascii():
            return False
        where = {tok: i for i, tok in enumerate(tokens[::2])}  # the last of duplicate keys, as strict
        if any(k not in where for k in needed):
            return False
        key_at = [2 * where[k] for k in needed]
        layout[:] = [
            len(tokens),
            itemgetter(*key_at, 0),  # (, 0): tuples even for one key
            itemgetter(*(key_at[i] + 1 for i in picked), 0),
            (*needed, tokens[0]),
        ]
        return True

    def parse(data: bytes) -> Any:
        if c_kv is not None:
            values = c_kv(data, needed)
            if values is not None:
                return build(values if use is None else values[use])
        tokens = data.split()
        known = len(tokens) == layout[0] and layout[1](tokens) == layout[3] and data.isascii()
        if not known and not learn(tokens, data):
            return None
        try:
            return build(tuple(map(int, layout[2](tokens)[:-1])))
        except ValueError:
            return None

    return parse


def _usage_v1(data: bytes) -> int | None:
    """``cpuacct.usage``: one integer, surrounding ASCII blanks allowed (like the strict ``_int``)."""
    try:
        value = int(data)
    except ValueError:
        return None
    return value if value >= 0 else None


def _usage_v2(values: tuple[int, ...]) -> int | None:
    (usage_usec,) = values
    return usage_usec * 1000 if usage_usec >= 0 else None


def _memstat(values: tuple[int, ...]) -> MemoryStat:
    return MemoryStat(*values)


def _cpustat_v1(values: tuple[int, ...]) -> CpuStat:
    return CpuStat(*values)


def _cpustat_v2(values: tuple[int, ...]) -> CpuStat:
    periods, throttled, time_us = values
    return CpuStat(periods, throttled, time_us * 1000)


def _numa_fields(fields: list[bytes], out: dict[int, int], div: int) -> bool:
    """Add ``N<id>=<value>`` fields (value // div) to ``out``; False on anything the strict parser rejects."""
    for field in fields:
        key, sep, value = field.partition(b"=")
        if not sep:
            return False
        if key[:1] != b"N":
            continue
        try:
            node = int(key[1:])
            out[node] = out.get(node, 0) + int(value) // div
        except ValueError:
            return False
    return True


def _numa_v1(data: bytes) -> dict[int, int] | None:
    """v1 ``memory.numa_stat``: the first line ``total=<pages> N0=<pages> …``."""
    if _c_numa_v1 is not None:
        pages = _c_numa_v1(data)
        if pages is not None:
            return pages
    return _py_numa_v1(data)


def _py_numa_v1(data: bytes) -> dict[int, int] | None:
    end = data.find(b"\n")
    line = data if end < 0 else data[:end]
    if not plain_ascii(line):
        return None
    fields = line.split()
    out: dict[int, int] = {}
    if not fields or not fields[0].startswith(b"total=") or not _numa_fields(fields, out, 1):
        return None
    return out if len(out) == sum(1 for f in fields if f[:1] == b"N") else None


def _numa_v2(data: bytes) -> dict[int, int] | None:
    """v2 ``memory.numa_stat``: the ``anon`` and ``file`` lines (bytes → pages, per line), summed per node."""
    if _c_numa_v2 is not None:
        pages = _c_numa_v2(data, NUMA_STAT_PAGE)
        if pages is not None:
            return pages
    return _py_numa_v2(data)


def _py_numa_v2(data: bytes) -> dict[int, int] | None:
    if not plain_ascii(data):
        return None
    out: dict[int, int] = {}
    seen = 0
    for line in data.split(b"\n"):
        fields = line.split()
        if not fields or fields[0] not in (b"anon", b"file"):
            continue
        seen += 1
        one: dict[int, int] = {}
        if not _numa_fields(fields[1:], one, NUMA_STAT_PAGE):
            return None
        if len(one) != sum(1 for f in fields[1:] if f[:1] == b"N"):
            return None  # a node listed twice in one line: the strict parser keeps the last, let it
        for node, pages in one.items():
            out[node] = out.get(node, 0) + pages
    return out if seen == 2 else None


_CPUSET_MEMO: dict[bytes, list[int]] = {}
_CPUSET_MEMO_MAX = 256


def _cpuset(version: CgroupVersion) -> Parser:
    """cpuset lists barely ever change: the strict result is memoised by the file's bytes."""

    def parse(data: bytes) -> list[int] | None:
        hit = _CPUSET_MEMO.get(data)
        if hit is None:
            try:
                hit = convert_cgroup(CPUSET_CPUS, version, data.decode(), "cpuset")
            except ValueError:
                return None  # the strict converter raises again, naming the real file
            if len(_CPUSET_MEMO) >= _CPUSET_MEMO_MAX:
                _CPUSET_MEMO.clear()
            _CPUSET_MEMO[data] = hit
        return list(hit)

    return parse


_MEMSTAT_REST = ("inactive_file", "active_file", "inactive_anon", "active_anon", "unevictable")
_MEMSTAT_KEYS = {
    CgroupVersion.V1: ("total_cache", "total_rss", *("total_" + k for k in _MEMSTAT_REST)),
    CgroupVersion.V2: ("file", "anon", *_MEMSTAT_REST),
}
"""The ``MemoryStat`` fields' keys in declaration order."""
_CPUSTAT_KEYS = {
    CgroupVersion.V1: ("nr_periods", "nr_throttled", "throttled_time"),
    CgroupVersion.V2: ("nr_periods", "nr_throttled", "throttled_usec"),
}
MEMSTAT_KEYS, CPUSTAT_KEYS = _MEMSTAT_KEYS, _CPUSTAT_KEYS
"""Public names of the keys tables (the batch decoders of ``agent.system.cgbatch`` use them)."""


def fast_parser(
    spec: CgroupFile[T], version: CgroupVersion, accel: bool = True
) -> Callable[[bytes], T | None] | None:
    """The bytes fast parser of ``spec`` under ``version`` (None: the file has none); ``accel=False``: the
    Python parsers alone (the C ones still answer first by default when built)."""
    v1 = version is CgroupVersion.V1
    parser: Parser | None = None
    if spec is MEMORY_STAT:
        parser = _kv_parser(_MEMSTAT_KEYS[version], _memstat, accel=accel)
    elif spec is CPU_STAT:
        parser = _kv_parser(_CPUSTAT_KEYS[version], _cpustat_v1 if v1 else _cpustat_v2, accel=accel)
    elif spec is CPU_USAGE:
        parser = _usage_v1 if v1 else _kv_parser(("usage_usec",), _usage_v2, accel=accel)
    elif spec is MEMORY_NUMA_STAT:
        numa = (_numa_v1, _numa_v2) if accel else (_py_numa_v1, _py_numa_v2)
        parser = numa[0] if v1 else numa[1]
    elif spec is CPUSET_CPUS:
        parser = _cpuset(version)
    return cast("Callable[[bytes], T | None] | None", parser)


def reader(spec: CgroupFile[T], version: CgroupVersion, accel: bool = True) -> Callable[[str], T]:
    """``read(path)``: read ``spec``'s file at ``path`` and convert it (fast parser, strict fallback).

    ``OSError`` when the file cannot be read, ``ValueError`` (the strict converter's) on bad content.
    """
    read: Callable[[str], T] = _reader(_decoder(spec, version, fast_parser(spec, version, accel), _same))
    return read


def anon_reader(version: CgroupVersion, accel: bool = True) -> Callable[[str], int]:
    """``read(path)`` → ``MemoryStat.usage_anon`` of a ``memory.stat`` (every ``MemoryStat`` key must be
    present, as for the strict converter; only the three anon values are converted)."""
    return cast("Callable[[str], int]", _reader(decoder("anon", version, accel)))


def throttle_reader(version: CgroupVersion, accel: bool = True) -> Callable[[str], tuple[int, int]]:
    """``read(path)`` → (nr_periods, nr_throttled) of a ``cpu.stat`` (the throttled time must be present)."""
    return cast("Callable[[str], tuple[int, int]]", _reader(decoder("throttle", version, accel)))


def decoder(kind: str, version: CgroupVersion, accel: bool = True) -> Callable[[bytes, str], Any]:
    """``decode(data, path)``: what the reader of ``kind`` returns for a file whose bytes were already read
    (``"usage"``, ``"numa"``, ``"cpuset"``: ``reader`` of CPU_USAGE, MEMORY_NUMA_STAT, CPUSET_CPUS;
    ``"anon"``: ``anon_reader``; ``"throttle"``: ``throttle_reader``); ``ValueError`` (the strict
    converter's, naming ``path``) on bad content."""
    specs: dict[str, CgroupFile[Any]] = {"usage": CPU_USAGE, "numa": MEMORY_NUMA_STAT, "cpuset": CPUSET_CPUS}
    if kind in specs:
        return _decoder(specs[kind], version, fast_parser(specs[kind], version, accel), _same)
    if kind == "anon":  # inactive + active anon + unevictable
        parse = _kv_parser(_MEMSTAT_KEYS[version], sum, use=slice(4, 7), accel=accel)
        return _decoder(MEMORY_STAT, version, parse, _usage_anon)
    if kind == "throttle":
        parse = _kv_parser(_CPUSTAT_KEYS[version], tuple, use=slice(0, 2), accel=accel)
        return _decoder(CPU_STAT, version, parse, _stat_periods)
    raise ValueError(f"decoder: unknown kind {kind!r}")


def _decoder(
    spec: CgroupFile[Any], version: CgroupVersion, parse: Parser | None, project: Callable[[Any], Any]
) -> Callable[[bytes, str], Any]:
    """``decode(data, path)``: the fast ``parse`` of the bytes, else ``project`` of the strict conversion."""

    def decode(data: bytes, path: str) -> Any:
        if parse is not None:
            value = parse(data)
            if value is not None:
                return value
        return project(convert_cgroup(spec, version, data.decode(), path))

    return decode


def _reader(decode: Callable[[bytes, str], Any]) -> Callable[[str], Any]:
    def read(path: str) -> Any:
        return decode(read_bytes(path), path)

    return read


def _same(value: Any) -> Any:
    return value


def _usage_anon(stat: MemoryStat) -> int:
    return stat.usage_anon


def _stat_periods(stat: CpuStat) -> tuple[int, int]:
    return stat.nr_periods, stat.nr_throttled


_PARSERS: dict[tuple[str, CgroupVersion], Callable[[bytes], Any] | None] = {}


def convert_fast(spec: CgroupFile[T], version: CgroupVersion, text: str, name: str) -> T:
    """``convert_cgroup`` through the fast parser of ``spec`` (the strict converter when it declines)."""
    key = (spec.name, version)
    if key not in _PARSERS:
        _PARSERS[key] = fast_parser(spec, version)
    parse = _PARSERS[key]
    if parse is not None and text.isascii():  # (non-ASCII text never takes a fast path anyway)
        value = parse(text.encode())
        if value is not None:
            return cast("T", value)
    return convert_cgroup(spec, version, text, name)
