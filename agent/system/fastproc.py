"""Bytes fast paths for the per-tick /proc and NUMA meminfo reads of the node collector, each falling back to
the strict parsers of ``agent.system.procfs`` / ``agent.system.nodeinfo`` (and their exact errors).

``proc_stat_busy`` validates every ``cpu``/``cpuN`` line exactly as ``parse_proc_stat`` does (so the two
agree on every plain-ASCII input) but builds no ``CpuTicks``; ``meminfo_values`` picks the needed keys only
(lines it does not need are not validated; keys are assumed unique, as the kernel's are).

Imports: standard library and ``agent.system.{fastread,procfs,nodeinfo}``.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.system.fastread import plain_ascii, read_bytes
from agent.system.nodeinfo import numa_memory_usage_bytes, parse_node_meminfo
from agent.system.procfs import meminfo_usage_bytes, parse_meminfo, parse_proc_stat

__all__ = [
    "meminfo_values",
    "node_meminfo_usage",
    "proc_meminfo_usage",
    "proc_stat_busy",
    "read_proc_stat_busy",
]

Busy = tuple[int, dict[int, int]]


def _busy(fields: list[bytes]) -> int | None:
    """Busy ticks of one cpu line's fields (user + nice + system + irq + softirq); None where strict errs."""
    if len(fields) < 5:
        return None
    try:
        t = [int(v) for v in fields[1:9]]
    except ValueError:
        return None
    if min(t) < 0:
        return None
    t += [0] * (8 - len(t))
    return t[0] + t[1] + t[2] + t[5] + t[6]


def proc_stat_busy(data: bytes) -> Busy | None:
    """(aggregate busy ticks, busy ticks per CPU id) of /proc/stat, or None when the strict parser decides."""
    if not plain_ascii(data):
        return None
    total: int | None = None
    per_cpu: dict[int, int] = {}
    for line in data.split(b"\n"):
        head = line.lstrip()
        if not head.startswith(b"cpu"):
            continue
        fields = head.split()
        key = fields[0]
        busy = _busy(fields)
        if busy is None:
            return None
        if key == b"cpu":
            if total is not None:
                return None
            total = busy
            continue
        suffix = key[3:]
        if not suffix.isdigit():
            return None
        cpu = int(suffix)
        if cpu in per_cpu:
            return None
        per_cpu[cpu] = busy
    return None if total is None else (total, per_cpu)


def read_proc_stat_busy(path: str) -> Busy:
    """``proc_stat_busy`` of the file, else ``parse_proc_stat``'s (busy values, or its error)."""
    data = read_bytes(path)
    got = proc_stat_busy(data)
    if got is not None:
        return got
    stat = parse_proc_stat(data.decode(), path)
    return stat.total.busy, {cpu: t.busy for cpu, t in stat.per_cpu.items()}


def meminfo_values(data: bytes, keys: Sequence[bytes], prefix: bytes = b"") -> list[int] | None:
    """Bytes of each ``<prefix><key>: <value> [kB]`` line (the last one of a key), or None when one is
    missing or malformed (``kB`` values × 1024, unit-less ones as is, like ``parse_meminfo``)."""
    if not plain_ascii(data):
        return None
    out: list[int] = []
    body = b"\n" + data
    for key in keys:
        needle = b"\n" + prefix + key + b":"
        i = body.rfind(needle)
        if i < 0:
            return None
        j = body.find(b"\n", i + 1)
        fields = body[i + len(needle) : j if j >= 0 else len(body)].split()
        if not 1 <= len(fields) <= 2 or (len(fields) == 2 and fields[1] != b"kB"):
            return None
        try:
            value = int(fields[0])
        except ValueError:
            return None
        out.append(value * 1024 if len(fields) == 2 else value)
    return out


_PROC_KEYS = (b"MemTotal", b"MemAvailable")


def proc_meminfo_usage(path: str) -> int:
    """``meminfo_usage_bytes`` (MemTotal − MemAvailable) of /proc/meminfo, through the fast path."""
    data = read_bytes(path)
    got = meminfo_values(data, _PROC_KEYS)
    if got is not None:
        return got[0] - got[1]
    return meminfo_usage_bytes(parse_meminfo(data.decode(), path), path)


_NODE_KEYS = (b"MemTotal", b"MemFree", b"Active(file)", b"Inactive(file)", b"SReclaimable")


def node_meminfo_usage(path: str, node: int) -> int:
    """``numa_memory_usage_bytes`` of ``node<N>/meminfo`` (``Node N Key: value kB`` lines), fast first."""
    data = read_bytes(path)
    got = meminfo_values(data, _NODE_KEYS, b"Node %d " % node)
    if got is not None:
        total, free, active, inactive, reclaimable = got
        return max(total - (free + active + inactive + reclaimable), 0)
    return numa_memory_usage_bytes(parse_node_meminfo(data.decode(), path), path)
