"""A collector round's cgroup files, read in one tight loop and decoded in one call.

``read_files(paths)`` reads each file exactly as a single reader does (``os.open``, one ``os.read``,
``os.close``; None when it cannot be read) with no Python frame per file; ``read_pairs`` does the same for
two files per cgroup and the wall clock just before each pair (per-cgroup rates need it).
``BatchDecoder(kind, version)`` turns the bytes into what ``agent.system.fastread``'s reader of ``kind``
returns (``"usage"``: CPU ns, ``"anon"``: anon bytes of ``memory.stat``, ``"throttle"``: (nr_periods,
nr_throttled)), None for a file that was unreadable or is bad: the C batch parsers answer the kernel's
layouts, and each file they leave goes through ``fastread.decoder`` (the Python fast parser, then the
strict converter), so the values are exactly the single readers'.

Imports: standard library, agent.system.{cgroup,fastread}, agent.accel (the optional C parsers).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from typing import Any

from agent.accel import cgparse
from agent.system.cgroup import CgroupVersion
from agent.system.fastread import CPUSTAT_KEYS, MEMSTAT_KEYS, decoder, read_rest

__all__ = ["BatchDecoder", "read_files", "read_pairs"]

_CHUNK = 65536
_FLAGS = os.O_RDONLY | os.O_CLOEXEC
_open, _read, _close = os.open, os.read, os.close


def read_files(paths: Sequence[str]) -> list[bytes | None]:
    """The bytes of each file (None where it cannot be opened or read)."""
    return _read_all(paths, None, 1)[0]


def _read_all(
    paths: Sequence[str], clock: Callable[[], int] | None, every: int
) -> tuple[list[bytes | None], list[int]]:
    """``read_files``, and with ``clock`` also ``clock()`` just before every ``every``-th file."""
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
                data = read_rest(fd, data)  # type: ignore[arg-type]
        except OSError:
            data = None
        finally:
            _close(fd)
        append(data)
    return out, walls


def read_pairs(
    first: Sequence[str], second: Sequence[str], clock: Callable[[], int]
) -> tuple[list[int], list[bytes | None], list[bytes | None]]:
    """For each cgroup: ``clock()``, then its ``first`` file, then its ``second`` (as ``read_files``)."""
    both: list[str] = [path for pair in zip(first, second, strict=True) for path in pair]
    datas, walls = _read_all(both, clock, 2)
    return walls, datas[0::2], datas[1::2]


class BatchDecoder:
    """``decode(datas, paths)`` → the value of each file, None where unreadable or bad (see the module)."""

    def __init__(self, kind: str, version: CgroupVersion, accel: bool = True) -> None:
        self._one = decoder(kind, version, accel)
        self._batch: Callable[[list[bytes | None]], tuple[list[Any], int]] | None = None
        _cgparse = cgparse
        if accel and _cgparse is not None:

            def keys(names: Sequence[str]) -> tuple[bytes, ...]:
                return tuple(name.encode() for name in names)

            if kind == "usage" and version is CgroupVersion.V1:
                self._batch = _cgparse.uint_batch
            elif kind == "usage":
                usage = keys(("usage_usec",))
                self._batch = lambda datas: _cgparse.kv_batch(datas, usage, 0, 1, True, 1000)
            elif kind == "anon":
                mem = keys(MEMSTAT_KEYS[version])
                self._batch = lambda datas: _cgparse.kv_batch(datas, mem, 4, 7, True, 1)
            else:
                cpu = keys(CPUSTAT_KEYS[version])
                self._batch = lambda datas: _cgparse.kv_batch(datas, cpu, 0, 2, False, 1)

    def __call__(self, datas: list[bytes | None], paths: Sequence[str]) -> list[Any]:
        if self._batch is not None:
            out, misses = self._batch(datas)
        else:
            out, misses = [None] * len(datas), len(datas)
        if misses:
            one = self._one
            for i, data in enumerate(datas):
                if out[i] is None and data is not None:
                    with contextlib.suppress(ValueError):  # a bad file: no value, as a single reader's error
                        out[i] = one(data, paths[i])
        return out
