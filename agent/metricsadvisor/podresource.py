"""PodResourceCollector (docs/rules/koordlet.md#collectors, 1 s): pod and container CPU (``cpuacct.usage`` /
v2 ``cpu.stat`` ``usage_usec``) and anon-only memory (``memory.stat``) for the pods PodSource gives, with the
pods' NUMA memory (``memory.numa_stat``) once the NUMA topology is known. First observation of a pod/container
is skipped (state kept 20 × interval); a skipped or unreadable pod contributes nothing to the published
totals. State of pods that disappeared is forgotten.

The CPU-rate rule has one implementation here, shared with the host-application collector: a set of cgroups
is a ``UsageRound`` (paths and series refs made once per cgroup, not per tick; the CPU state as numpy
columns), rebuilt only when the set changes; ``UsageReader`` reads a round's files in one loop
(``read_pairs``), decodes them in one call each (``agent.system.readers.BatchDecoder``) and computes every
cgroup's rate, freshness and anon memory as columns (``UsageRound.advance`` → ``Rates``). Each collector
builds its own output from the ``Rates``: here ``_round``, one ``SampleBatch`` and the pods' totals.

Imports: standard library, numpy, agent.system.{cgroup,readers},
agent.metriccache.{cache,kv}, agent.metricsadvisor.framework.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Mapping, Sequence
from itertools import compress
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from agent.metriccache.cache import SampleBatch, SeriesRef
from agent.metriccache.kv import NODE_CPU_INFO
from agent.metricsadvisor.framework import PODS, BaseCollector, CollectContext, Totals
from agent.system import cgroup as cg
from agent.system.cgroup import CgroupVersion
from agent.system.readers import BatchDecoder, decoder, read_files, read_pairs

__all__ = ["CgroupUsage", "PodResourceCollector", "Rates", "UsageReader", "UsageRound", "usage_cores"]

_POD_KINDS = ("pod_cpu_usage", "pod_memory_usage")
_CONTAINER_KINDS = ("container_cpu_usage", "container_memory_usage")
_U64 = 1 << 64


def usage_cores(delta_ns: int, delta_wall_ns: int) -> float:
    """``float64(Δns) / float64(Δwall_ns)`` (cgroup CPU, docs/rules/koordlet.md#collectors): the rule for one
    cgroup, as the tests state it; the collectors compute it over a round's columns
    (``UsageRound.advance``)."""
    return float(delta_ns) / float(delta_wall_ns)


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
    """One cgroup's file paths, labels and series refs. Its CPU state lives in the columns of the round that
    reads it (``UsageRound``), not here."""

    __slots__ = ("cgroup_dir", "cpu_path", "cpu_ref", "labels", "mem_path", "mem_ref", "numa_path")

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
        self.cpu_ref = SeriesRef(kinds[0], labels)
        self.mem_ref = SeriesRef(kinds[1], labels)


class Rates(NamedTuple):
    """One round's result per cgroup, in the round's order."""

    counted: npt.NDArray[np.bool_]  # CPU and anon read, and the last counter fresh: the cgroup yields samples
    cpu: npt.NDArray[np.float64]  # cores where counted, 0 elsewhere
    anon: npt.NDArray[np.float64]  # anon bytes as float64, NaN where not read
    anon_bytes: Sequence[int | None]  # anon bytes, exact (None: not read)
    wall: npt.NDArray[np.int64]  # ns, read just before the cgroup's files


class UsageRound:
    """The cgroups of one set (a pod set: each pod, then its containers; or the host applications) in read
    order: their paths and series refs, and their CPU state as columns: whether a counter was seen
    (``has_last``), the last counter (mod 2**64) and the wall clock it was read at. A new set's round takes
    over the state of every cgroup it keeps (the same ``CgroupUsage`` object: same name, same dir)."""

    __slots__ = ("cgroups", "cpu_paths", "has_last", "key", "last_ns", "last_wall", "mem_paths", "refs")

    def __init__(self, key: Hashable, cgroups: list[CgroupUsage], before: UsageRound | None) -> None:
        self.key, self.cgroups = key, cgroups
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

    def advance(
        self, walls: Sequence[int], curs: Sequence[int | None], anons: Sequence[int | None], max_age: int
    ) -> Rates:
        """The rule (docs/rules/koordlet.md#collectors) over the columns: ``walls`` (ns, read just before each
        cgroup's files), the CPU counters and anon bytes (None: unreadable or bad).

        A cgroup whose CPU counter was read moves its state on (even when its memory was not); it is counted
        when its memory was read too and its last counter is fresh: seen, older than this read and at most
        ``max_age`` old. CPU is ``usage_cores(udelta(cur, last), Δwall)``: uint64 subtraction wraps as
        ``udelta`` (so the counter is kept mod 2**64), and numpy's float64 conversions and division round
        as Python's.
        """
        have_cpu = np.array([c is not None for c in curs], dtype=bool)
        cur = np.array([0 if c is None else c % _U64 for c in curs], dtype=np.uint64)
        anon = np.array(anons, dtype=np.float64)  # float(anon) each, NaN where it was not read
        wall = np.array(walls, dtype=np.int64)
        last_wall = self.last_wall
        span = wall - last_wall
        counted = have_cpu & ~np.isnan(anon) & self.has_last & (last_wall < wall) & (span <= max_age)
        cpu = np.zeros(cur.shape[0], dtype=np.float64)
        np.divide((cur - self.last_ns).astype(np.float64), span.astype(np.float64), out=cpu, where=counted)
        self.last_ns = np.where(have_cpu, cur, self.last_ns)
        self.last_wall = np.where(have_cpu, wall, last_wall)
        self.has_last |= have_cpu
        return Rates(counted, cpu, anon, anons, wall)


class UsageReader:
    """A round's read: every cgroup's CPU counter and ``memory.stat`` in one loop (``read_pairs``, the wall
    clock read just before each cgroup's files), decoded in one call each (``BatchDecoder``), then
    ``UsageRound.advance``."""

    __slots__ = ("_decoders",)

    def __init__(self) -> None:
        self._decoders: tuple[CgroupVersion, BatchDecoder, BatchDecoder] | None = None

    def __call__(self, ctx: CollectContext, order: UsageRound, max_age: int) -> Rates:
        version = ctx.cgroup_version
        if self._decoders is None or self._decoders[0] is not version:
            self._decoders = (version, BatchDecoder("usage", version), BatchDecoder("anon", version))
        walls, cpu_raw, mem_raw = read_pairs(order.cpu_paths, order.mem_paths, ctx.clock_ns)
        curs = self._decoders[1](cpu_raw, order.cpu_paths)
        anons = self._decoders[2](mem_raw, order.mem_paths)
        return order.advance(walls, curs, anons, max_age)


class PodResourceCollector(BaseCollector):
    def __init__(self, interval_seconds: float = 1.0) -> None:
        super().__init__("pod_resource", interval_seconds)
        self._pods: dict[str, CgroupUsage] = {}
        self._containers: dict[str, CgroupUsage] = {}
        self._round: UsageRound | None = None
        self._is_pod: npt.NDArray[np.bool_] = np.zeros(0, dtype=bool)
        self._read = UsageReader()

    def _order(self, ctx: CollectContext) -> UsageRound:
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
        self._round = UsageRound(key, cgroups, self._round)
        self._is_pod = np.array(is_pod, dtype=bool)
        return self._round

    def collect(self, ctx: CollectContext) -> SampleBatch:
        max_age = int(20 * self.interval_seconds * 1e9)
        order = self._order(ctx)
        rates = self._read(ctx, order, max_age)
        batch, total_cpu, total_mem, numa_paths = _round(order, self._is_pod, rates)
        numa_pages: dict[int, int] = {}
        if ctx.kv.get(NODE_CPU_INFO) is not None:  # the counted pods' NUMA memory, read in one loop too
            version = ctx.cgroup_version
            for path, data in zip(numa_paths, read_files(numa_paths), strict=True):
                pages = {} if data is None else _numa_pages(version, data, path)
                for node, n in pages.items():
                    numa_pages[node] = numa_pages.get(node, 0) + n
        numa_bytes = {node: float(n * ctx.page_size) for node, n in numa_pages.items()}
        ctx.shared.publish(PODS, Totals(total_cpu, float(total_mem), ctx.clock_ns(), {}, numa_bytes))
        self.mark_started()
        return batch


def _round(
    order: UsageRound, is_pod: npt.NDArray[np.bool_], rates: Rates
) -> tuple[SampleBatch, float, int, list[str]]:
    """A pod round's output from its ``rates``: the counted cgroups' samples (CPU, then memory, in order),
    the counted pods' CPU and memory totals and those pods' ``memory.numa_stat`` paths. The totals add the
    counted pods in order (``cumsum``: the same sum as a loop), memory in exact integers."""
    counted, cpu, anon, wall = rates.counted, rates.cpu, rates.anon, rates.wall
    if counted.all():
        refs, ms = list(order.refs), wall // 1_000_000
    else:
        idx = np.flatnonzero(counted)
        refs = [ref for i in idx.tolist() for ref in (order.refs[2 * i], order.refs[2 * i + 1])]
        cpu, anon, ms = cpu[idx], anon[idx], wall[idx] // 1_000_000
    values = np.empty(2 * cpu.shape[0], dtype=np.float64)
    values[0::2], values[1::2] = cpu, anon
    batch = SampleBatch.from_arrays(refs, np.repeat(ms, 2), values)
    pods = counted & is_pod
    total_cpu = float(np.cumsum(cpu[is_pod[counted]])[-1]) if pods.any() else 0.0
    total_mem: int = sum(compress(rates.anon_bytes, pods.tolist()))  # type: ignore[arg-type]
    return batch, total_cpu, total_mem, [order.cgroups[i].numa_path for i in np.flatnonzero(pods).tolist()]
