"""Pure text formatters, write validators and leveled-update merge rules for the writable cgroup knobs.

Used as data by the file table in ``agent.system.cgroup`` (which re-exports ``parse_cpuset_list``,
``format_cpuset`` and ``UNLIMITED_MIN``); see docs/rules/koordlet.md#writing-to-the-host and, for the v1 and
v2 files, docs/rules/koordlet.md#cgroup-v1-and-v2.
Imports: standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

__all__ = [
    "UNLIMITED_MIN",
    "fmt_int",
    "fmt_int_or_max",
    "fmt_weight",
    "format_cpuset",
    "int_lines",
    "merge_cpuset",
    "merge_larger",
    "nonempty_cpuset",
    "parse_cpuset_list",
    "quota_write",
    "range_check",
    "shares_write",
]


def parse_cpuset_list(text: str, name: str = "cpuset.cpus") -> list[int]:
    """Parse a cpuset list like ``0-3,8,10-11`` into sorted unique CPU ids; empty text is no CPUs."""
    cpus: set[int] = set()
    body = text.strip()
    if not body:
        return []
    for part in body.split(","):
        lo, sep, hi = part.strip().partition("-")
        try:
            first = int(lo)
            last = int(hi) if sep else first
        except ValueError:
            raise ValueError(f"{name}: bad cpuset element {part!r} in {body!r}") from None
        if first < 0 or last < first:
            raise ValueError(f"{name}: bad cpuset range {part!r} in {body!r}")
        cpus.update(range(first, last + 1))
    return sorted(cpus)


UNLIMITED_MIN = 0x7FFFFFFFFFFFF000
"""Integers at or above this (9223372036854775807, v1's page-rounded 9223372036854771712) mean ``max``."""


def int_lines(text: str, name: str) -> list[int]:
    """One integer per line (``cgroup.procs``, ``tasks``/``cgroup.threads``)."""
    try:
        return [int(line) for line in text.split()]
    except ValueError:
        raise ValueError(f"{name}: not a list of integers") from None


def fmt_int(value: int) -> str:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, got {value!r}")
    return str(value)


def fmt_int_or_max(value: int) -> str:
    """−1 (unlimited) → ``max``; other integers as is (v2 ``cpu.max`` quota, ``memory.max/min/low/high``)."""
    return "max" if fmt_int(value) == "-1" else str(value)


def fmt_weight(shares: int) -> str:
    """v1 shares → v2 ``cpu.weight`` = ``1 + (shares − 2) × 9999 / 262142`` (int64 division, [1, 10000])."""
    num = (int(fmt_int(shares)) - 2) * 9999
    quotient = abs(num) // 262142 * (1 if num >= 0 else -1)
    return str(min(max(1 + quotient, 1), 10000))


def format_cpuset(cpus: Iterable[int] | str) -> str:
    """Canonical cpuset list text (``0-3,8,10-11``) from CPU ids or any cpuset notation."""
    ids = parse_cpuset_list(cpus) if isinstance(cpus, str) else sorted(set(cpus))
    ranges: list[str] = []
    start = prev = None
    for cpu in ids:
        if isinstance(cpu, bool) or not isinstance(cpu, int) or cpu < 0:
            raise ValueError(f"bad CPU id {cpu!r}")
        if prev is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None:
            ranges.append(f"{start}-{prev}" if prev != start else str(start))
        start = prev = cpu
    if start is not None:
        ranges.append(f"{start}-{prev}" if prev != start else str(start))
    return ",".join(ranges)


def nonempty_cpuset(cpus: Iterable[int] | str) -> str | None:
    return None if format_cpuset(cpus) else "refusing to write an empty cpuset"


def quota_write(value: int) -> str | None:
    return (
        None if value == -1 or value >= 1000 else f"quota {value} is neither -1 nor >= 1000 (kernel minimum)"
    )


def shares_write(value: int) -> str | None:
    return None if 2 <= value <= 262144 else f"cpu.shares {value} out of [2, 262144]"


def range_check(lo: int, hi: int) -> Callable[[int], str | None]:
    def check(value: int) -> str | None:
        return None if lo <= value <= hi else f"value {value} out of [{lo}, {hi}]"

    return check


def _inf(value: int) -> float:
    return float("inf") if value == -1 or value >= UNLIMITED_MIN else float(value)


def merge_larger(old: int, new: int) -> int | None:
    """Leveled-update loosening: write ``new`` first only when it is larger (−1/max = +∞)."""
    return new if _inf(new) > _inf(old) else None


def merge_cpuset(old: Iterable[int] | str, new: Iterable[int] | str) -> list[int] | None:
    """Leveled-update loosening: the union of old and new, unless new ⊆ old."""
    old_set = set(parse_cpuset_list(old) if isinstance(old, str) else old)
    new_set = set(parse_cpuset_list(new) if isinstance(new, str) else new)
    return None if new_set <= old_set else sorted(old_set | new_set)
