"""PodResourceCollector (docs/rules/koordlet.md#collectors, 1 s): pod and container CPU (``cpuacct.usage`` /
v2 ``cpu.stat`` ``usage_usec``) and anon-only memory (``memory.stat``) for the pods PodSource gives, with the
pods' NUMA memory (``memory.numa_stat``) once the NUMA topology is known. First observation of a pod/container
is skipped (state kept 20 × interval); a skipped or unreadable pod contributes nothing to the published
totals. State of pods that disappeared is forgotten. Paths and the series refs (``SeriesRef``) are made once
per cgroup, not per tick, and the read order only when the pod set changes; a round's files are read in one
loop and decoded in one call (``agent.system.readers.BatchDecoder``), the rates, freshness and totals are
computed over the round's cgroups as numpy columns (``_round``), and the round is one ``SampleBatch``.
``CgroupUsage.read`` is the same rule for one cgroup at a time (the host-application collector's few).

Imports: standard library, numpy, agent.podmeta, agent.system.{cgroup,readers},
agent.metriccache.{cache,kv}, agent.metricsadvisor.framework.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from itertools import compress
from typing import Any

import numpy as np

from agent.metriccache.cache import SampleBatch, SeriesRef
from agent.metriccache.kv import NODE_CPU_INFO
from agent.metricsadvisor.framework import PODS, BaseCollector, CollectContext, Totals, udelta
from agent.podmeta import PodMeta
from agent.system import cgroup as cg
from agent.system.cgroup import CgroupVersion
from agent.system.readers import BatchDecoder, decoder, read_files, read_pairs, reader

__all__ = ["CgroupUsage", "PodResourceCollector", "usage_cores"]

_POD_KINDS = ("pod_cpu_usage", "pod_memory_usage")
_CONTAINER_KINDS = ("container_cpu_usage", "container_memory_usage")
_U64 = 1 << 64


def usage_cores(delta_ns: int, delta_wall_ns: int) -> float:
    """``float64(Δns) / float64(Δwall_ns)`` (pod/container CPU, docs/rules/koordlet.md#collectors)."""
    return float(delta_ns) / float(delta_wall_ns)


@functools.cache
def _readers(version: CgroupVersion) -> tuple[Callable[[str], int], Callable[[str], cg.MemoryStat]]:
    """The single readers of CPU usage (ns) and ``memory.stat``, for ``CgroupUsage.read``."""
    return reader(cg.CPU_USAGE, version), reader(cg.MEMORY_STAT, version)


def _numa_pages(version: CgroupVersion, data: bytes, path: str) -> dict[int, int]:
    """Pages per NUMA node of one ``memory.numa_stat`` ({} when the file is bad)."""
    try:
        pages: dict[int, int] = _numa_decoder(version)(data, path)
    except ValueError:
        return {}
    return pages


@functools.cache
def _numa_decoder(version: CgroupVersion) -> Callable[[bytes, str], Any]:
    return decoder("numa", version)


class CgroupUsage:
    """One cgroup's file paths, labels and series refs, and (for ``read``) its last CPU counter. A pod round
    keeps the CPU state of its cgroups in its own columns (``_Round``), not here."""

    __slots__ = (
        "cgroup_dir",
        "cpu_path",
        "cpu_ref",
        "labels",
        "last_ns",
        "last_wall",
        "mem_path",
        "mem_ref",
        "numa_path",
        "read_mem",
        "read_usage",
    )

    def __init__(
        self,
        ctx: CollectContext,
        cgroup_dir: str,
        labels: Mapping[str, str],
        kinds: tuple[str, str] = _POD_KINDS,
    ) -> None:
        root, version = ctx.paths.cgroup_root, ctx.cgroup_version
        self.cgroup_dir = cgroup_dir
        self.labels = labels
        self.cpu_path = str(cg.cgroup_file_path(root, version, cg.CPU_USAGE, cgroup_dir))
        self.mem_path = str(cg.cgroup_file_path(root, version, cg.MEMORY_STAT, cgroup_dir))
        self.numa_path = str(cg.cgroup_file_path(root, version, cg.MEMORY_NUMA_STAT, cgroup_dir))
        self.read_usage, self.read_mem = _readers(version)
        self.cpu_ref = SeriesRef(kinds[0], labels)
        self.mem_ref = SeriesRef(kinds[1], labels)
        self.last_ns = -1
        self.last_wall = 0

    def read(self, version: CgroupVersion, wall: int, max_age_ns: int) -> tuple[float, int] | None:
        """Read CPU then memory; returns (cores, anon bytes), or None on the first (or a stale) observation.

        ``OSError``/``ValueError`` on a read or parse failure (CPU state is updated before memory is read).
        ``version`` is the one the state was made for (kept for callers).
        """
        cur = self.read_usage(self.cpu_path)
        last_ns, last_wall = self.last_ns, self.last_wall
        self.last_ns, self.last_wall = cur, wall
        anon = self.read_mem(self.mem_path).usage_anon
        if last_ns < 0 or last_wall >= wall or wall - last_wall > max_age_ns:
            return None
        return usage_cores(udelta(cur, last_ns), wall - last_wall), anon


class _Round:
    """The cgroups of one pod set in read order (each pod, then its containers): their paths and series refs,
    and their CPU state as columns: whether a counter was seen (``has_last``), the last counter (mod 2**64)
    and the wall clock it was read at. A new pod set's round takes over the state of every cgroup it keeps
    (the same ``CgroupUsage`` object: same pod or container, same dir)."""

    __slots__ = (
        "cgroups",
        "cpu_paths",
        "has_last",
        "is_pod",
        "key",
        "last_ns",
        "last_wall",
        "mem_paths",
        "refs",
    )

    def __init__(
        self, key: tuple[PodMeta, ...], cgroups: list[CgroupUsage], is_pod: list[bool], before: _Round | None
    ) -> None:
        self.key, self.cgroups = key, cgroups
        self.is_pod = np.array(is_pod, dtype=bool)
        self.cpu_paths = [c.cpu_path for c in cgroups]
        self.mem_paths = [c.mem_path for c in cgroups]
        self.refs = [ref for c in cgroups for ref in (c.cpu_ref, c.mem_ref)]  # cpu, memory of each in order
        n = len(cgroups)
        self.has_last = np.zeros(n, dtype=bool)
        self.last_ns = np.zeros(n, dtype=np.uint64)
        self.last_wall = np.zeros(n, dtype=np.int64)
        if before is not None and before.cgroups:
            where = {id(c): i for i, c in enumerate(before.cgroups)}
            take = np.array([where.get(id(c), -1) for c in cgroups], dtype=np.int64)
            kept = take >= 0
            self.has_last[kept] = before.has_last[take[kept]]
            self.last_ns[kept] = before.last_ns[take[kept]]
            self.last_wall[kept] = before.last_wall[take[kept]]


class PodResourceCollector(BaseCollector):
    def __init__(self, interval_seconds: float = 1.0) -> None:
        super().__init__("pod_resource", interval_seconds)
        self._pods: dict[str, CgroupUsage] = {}
        self._containers: dict[str, CgroupUsage] = {}
        self._round: _Round | None = None
        self._decoders: tuple[CgroupVersion, BatchDecoder, BatchDecoder] | None = None

    def _order(self, ctx: CollectContext) -> _Round:
        """This round's cgroups; rebuilt (keeping the state of every cgroup still there with the same
        dir, forgetting the rest) only when the pod set changed."""
        key = tuple(ctx.pods.pods())
        if self._round is not None and self._round.key == key:
            return self._round
        old_pods, old_containers = self._pods, self._containers
        self._pods, self._containers = {}, {}
        cgroups: list[CgroupUsage] = []
        is_pod: list[bool] = []
        for pod in key:
            state = old_pods.get(pod.uid)
            if state is None or state.cgroup_dir != pod.cgroup_dir:
                state = CgroupUsage(ctx, pod.cgroup_dir, {"pod_uid": pod.uid})
            self._pods[pod.uid] = state
            cgroups.append(state)
            is_pod.append(True)
            for container in pod.containers:
                cid = container.container_id
                cs = old_containers.get(cid)
                if cs is None or cs.cgroup_dir != container.cgroup_dir:
                    cs = CgroupUsage(ctx, container.cgroup_dir, {"container_id": cid}, _CONTAINER_KINDS)
                self._containers[cid] = cs
                cgroups.append(cs)
                is_pod.append(False)
        self._round = _Round(key, cgroups, is_pod, self._round)
        return self._round

    def collect(self, ctx: CollectContext) -> SampleBatch:
        version = ctx.cgroup_version
        max_age = int(20 * self.interval_seconds * 1e9)
        if self._decoders is None or self._decoders[0] is not version:
            self._decoders = (version, BatchDecoder("usage", version), BatchDecoder("anon", version))
        order = self._order(ctx)
        # Every file of the round in one loop, then decoded in one call each.
        walls, cpu_raw, mem_raw = read_pairs(order.cpu_paths, order.mem_paths, ctx.clock_ns)
        curs = self._decoders[1](cpu_raw, order.cpu_paths)
        anons = self._decoders[2](mem_raw, order.mem_paths)
        batch, total_cpu, total_mem, numa_paths = _round(order, walls, curs, anons, max_age)
        numa_pages: dict[int, int] = {}
        if ctx.kv.get(NODE_CPU_INFO) is not None:  # the counted pods' NUMA memory, read in one loop too
            for path, data in zip(numa_paths, read_files(numa_paths), strict=True):
                pages = {} if data is None else _numa_pages(version, data, path)
                for node, n in pages.items():
                    numa_pages[node] = numa_pages.get(node, 0) + n
        numa_bytes = {node: float(n * ctx.page_size) for node, n in numa_pages.items()}
        ctx.shared.publish(PODS, Totals(total_cpu, float(total_mem), ctx.clock_ns(), {}, numa_bytes))
        self.mark_started()
        return batch


def _round(
    order: _Round,
    walls: Sequence[int],
    curs: Sequence[int | None],
    anons: Sequence[int | None],
    max_age: int,
) -> tuple[SampleBatch, float, int, list[str]]:
    """One round over the cgroup columns: ``walls`` (ns, read just before each cgroup's files), the CPU
    counters and anon bytes (None: unreadable or bad). Returns the round's samples, the counted pods' CPU
    and memory totals and those pods' ``memory.numa_stat`` paths.

    A cgroup whose CPU counter was read moves its state on; it yields samples (CPU, then memory) when its
    memory was read too and its last counter is fresh: seen, older than this read and at most ``max_age``
    old. CPU is ``usage_cores(udelta(cur, last), Δwall)``: uint64 subtraction wraps as ``udelta`` (so the
    counter is kept mod 2**64), and numpy's float64 conversions and division round as Python's. The totals
    add the counted pods in order (``cumsum``: the same sum as a loop), memory in exact integers.
    """
    have_cpu = np.array([c is not None for c in curs], dtype=bool)
    cur = np.array([0 if c is None else c % _U64 for c in curs], dtype=np.uint64)
    anon = np.array(anons, dtype=np.float64)  # float(anon) each, NaN where it was not read
    wall = np.array(walls, dtype=np.int64)
    last_wall = order.last_wall
    span = wall - last_wall
    counted = have_cpu & ~np.isnan(anon) & order.has_last & (last_wall < wall) & (span <= max_age)
    cpu = np.zeros(cur.shape[0], dtype=np.float64)
    np.divide((cur - order.last_ns).astype(np.float64), span.astype(np.float64), out=cpu, where=counted)
    order.last_ns = np.where(have_cpu, cur, order.last_ns)
    order.last_wall = np.where(have_cpu, wall, last_wall)
    order.has_last |= have_cpu
    if counted.all():
        refs, ms = list(order.refs), wall // 1_000_000
    else:
        idx = np.flatnonzero(counted)
        refs = [ref for i in idx.tolist() for ref in (order.refs[2 * i], order.refs[2 * i + 1])]
        cpu, anon, ms = cpu[idx], anon[idx], wall[idx] // 1_000_000
    values = np.empty(2 * cpu.shape[0], dtype=np.float64)
    values[0::2], values[1::2] = cpu, anon
    batch = SampleBatch.from_arrays(refs, np.repeat(ms, 2), values)
    pods = counted & order.is_pod
    total_cpu = float(np.cumsum(cpu[order.is_pod[counted]])[-1]) if pods.any() else 0.0
    total_mem: int = sum(compress(anons, pods.tolist()))  # type: ignore[arg-type]
    return batch, total_cpu, total_mem, [order.cgroups[i].numa_path for i in np.flatnonzero(pods).tolist()]
