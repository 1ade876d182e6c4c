"""PodResourceCollector (docs/rules/koordlet.md#collectors, 1 s): pod and container CPU (``cpuacct.usage`` /
v2 ``cpu.stat`` ``usage_usec``) and anon-only memory (``memory.stat``) for the pods PodSource gives, with the
pods' NUMA memory (``memory.numa_stat``) once the NUMA topology is known. First observation of a pod/container
is skipped (state kept 20 × interval); a skipped or unreadable pod contributes nothing to the published
totals. State of pods that disappeared is forgotten. Paths and the series refs (``SeriesRef``) are made once
per cgroup, not per tick, and the read order only when the pod set changes; a round's files are read in one
loop and decoded in one call (``agent.system.cgbatch``: the values of the single fast readers) and the round
is one ``SampleBatch``.

Imports: standard library, agent.podmeta, agent.system.{cgbatch,cgroup,fastread},
agent.metriccache.{cache,kv}, agent.metricsadvisor.framework.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from agent.metriccache.cache import SampleBatch, SeriesRef
from agent.metriccache.kv import NODE_CPU_INFO
from agent.metricsadvisor.framework import PODS, BaseCollector, CollectContext, Totals, udelta
from agent.podmeta import PodMeta
from agent.system import cgroup as cg
from agent.system.cgbatch import BatchDecoder, read_files, read_pairs
from agent.system.cgroup import CgroupVersion
from agent.system.fastread import anon_reader, decoder, reader

__all__ = ["CgroupUsage", "PodResourceCollector", "usage_cores"]

VECTORISE = True
"""Rounds where every file was read and parsed are computed in numpy (tests turn it off to compare)."""

_POD_KINDS = ("pod_cpu_usage", "pod_memory_usage")
_CONTAINER_KINDS = ("container_cpu_usage", "container_memory_usage")
_U64 = 1 << 64


def usage_cores(delta_ns: int, delta_wall_ns: int) -> float:
    """``float64(Δns) / float64(Δwall_ns)`` (pod/container CPU, docs/rules/koordlet.md#collectors)."""
    return float(delta_ns) / float(delta_wall_ns)


@functools.cache
def _readers(version: CgroupVersion) -> tuple[Callable[[str], int], Callable[[str], int]]:
    """The single readers of CPU usage (ns) and anon memory (``memory.stat``), for ``CgroupUsage.read``."""
    return reader(cg.CPU_USAGE, version), anon_reader(version)


def _numa_pages(version: CgroupVersion, data: bytes, path: str) -> dict[int, int]:
    """Pages per NUMA node of one ``memory.numa_stat`` (as its reader; {} when the file is bad)."""
    try:
        pages: dict[int, int] = _numa_decoder(version)(data, path)
    except ValueError:
        return {}
    return pages


@functools.cache
def _numa_decoder(version: CgroupVersion) -> Callable[[bytes, str], Any]:
    return decoder("numa", version)


class CgroupUsage:
    """Per-cgroup read state: precomputed file paths, labels, series refs and the last CPU counter."""

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
        """Read CPU then memory; returns (cores, anon bytes), or None on the first observation.

        ``OSError``/``ValueError`` on a read or parse failure (CPU state is updated before memory is read).
        ``version`` is the one the state was made for (kept for callers).
        """
        cur = self.read_usage(self.cpu_path)
        last_ns, last_wall = self.last_ns, self.last_wall
        self.last_ns, self.last_wall = cur, wall
        anon = self.read_mem(self.mem_path)
        if last_ns < 0 or last_wall >= wall or wall - last_wall > max_age_ns:
            return None
        return usage_cores(udelta(cur, last_ns), wall - last_wall), anon


class _Round:
    """The cgroups of one pod set in read order (each pod, then its containers): their states and paths,
    and the CPU state as arrays for the vectorised round (``arrays``: the arrays, not the ``CgroupUsage``
    objects, hold the latest state; ``to_objects``/``from_objects`` move it across)."""

    __slots__ = (
        "arrays",
        "cpu_paths",
        "has_last",
        "is_pod",
        "key",
        "last_ns",
        "last_wall",
        "mem_paths",
        "pod_flags",
        "refs",
        "states",
    )

    def __init__(self, key: tuple[PodMeta, ...]) -> None:
        self.key = key
        self.states: list[CgroupUsage] = []
        self.pod_flags: list[bool] = []
        self.cpu_paths: list[str] = []
        self.mem_paths: list[str] = []
        self.refs: list[SeriesRef] = []  # cpu, memory of each cgroup in order: a round where all are fresh
        self.arrays = False
        self.is_pod = np.zeros(0, dtype=bool)
        self.has_last = np.zeros(0, dtype=bool)
        self.last_ns = np.zeros(0, dtype=np.uint64)
        self.last_wall = np.zeros(0, dtype=np.int64)

    def add(self, state: CgroupUsage, is_pod: bool) -> None:
        self.states.append(state)
        self.pod_flags.append(is_pod)
        self.cpu_paths.append(state.cpu_path)
        self.mem_paths.append(state.mem_path)
        self.refs += (state.cpu_ref, state.mem_ref)

    def from_objects(self) -> None:
        self.is_pod = np.array(self.pod_flags, dtype=bool)
        self.has_last = np.array([s.last_ns >= 0 for s in self.states], dtype=bool)
        self.last_ns = np.array([max(s.last_ns, 0) for s in self.states], dtype=np.uint64)
        self.last_wall = np.array([s.last_wall for s in self.states], dtype=np.int64)
        self.arrays = True

    def to_objects(self) -> None:
        if self.arrays:
            walls, has = self.last_wall.tolist(), self.has_last.tolist()
            for state, ns, wall, known in zip(self.states, self.last_ns.tolist(), walls, has, strict=True):
                state.last_ns, state.last_wall = (ns if known else -1), wall
            self.arrays = False


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
        if self._round is not None:
            self._round.to_objects()
        old_pods, old_containers = self._pods, self._containers
        self._pods, self._containers = {}, {}
        order = _Round(key)
        for pod in key:
            state = old_pods.get(pod.uid)
            if state is None or state.cgroup_dir != pod.cgroup_dir:
                state = CgroupUsage(ctx, pod.cgroup_dir, {"pod_uid": pod.uid})
            self._pods[pod.uid] = state
            order.add(state, True)
            for container in pod.containers:
                cid = container.container_id
                cs = old_containers.get(cid)
                if cs is None or cs.cgroup_dir != container.cgroup_dir:
                    cs = CgroupUsage(ctx, container.cgroup_dir, {"container_id": cid}, _CONTAINER_KINDS)
                self._containers[cid] = cs
                order.add(cs, False)
        self._round = order
        return order

    def collect(self, ctx: CollectContext) -> SampleBatch:
        version = ctx.cgroup_version
        max_age = int(20 * self.interval_seconds * 1e9)
        if self._decoders is None or self._decoders[0] is not version:
            self._decoders = (version, BatchDecoder("usage", version), BatchDecoder("anon", version))
        order = self._order(ctx)
        # Every file of the round in one loop, then decoded in one call each (agent.system.cgbatch).
        walls, cpu_raw, mem_raw = read_pairs(order.cpu_paths, order.mem_paths, ctx.clock_ns)
        curs = self._decoders[1](cpu_raw, order.cpu_paths)
        anons = self._decoders[2](mem_raw, order.mem_paths)
        done = _vectorised(order, walls, curs, anons, max_age) if VECTORISE else None
        if done is None:  # a file missing or bad, or a value beyond 64 bits: cgroup by cgroup
            order.to_objects()
            done = _one_by_one(order, walls, curs, anons, max_age)
        batch, total_cpu, total_mem, numa_paths = done
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


_Done = tuple[SampleBatch, float, int, list[str]]
"""The round's batch, the counted pods' CPU and memory totals, and those pods' numa_stat paths."""


def _vectorised(
    order: _Round, walls: list[int], curs: list[int | None], anons: list[int | None], max_age: int
) -> _Done | None:
    """The round in numpy when every file was read and parsed; None (nothing changed) otherwise. The same
    values as ``_one_by_one``: u64 wrap-around by uint64 arithmetic, float64 conversions and division
    correctly rounded as Python's, the totals summed in pod order (``cumsum``)."""
    if None in curs or None in anons:
        return None
    try:
        cur = np.array(curs, dtype=np.uint64)
        anon = np.array(anons, dtype=np.int64)
    except OverflowError:
        return None
    if not order.arrays:
        order.from_objects()
    wall = np.array(walls, dtype=np.int64)
    last_wall = order.last_wall
    span = wall - last_wall
    fresh = order.has_last & (last_wall < wall) & (span <= max_age)
    cpu = np.zeros(cur.shape[0], dtype=np.float64)
    np.divide((cur - order.last_ns).astype(np.float64), span.astype(np.float64), out=cpu, where=fresh)
    order.last_ns, order.last_wall = cur, wall
    order.has_last = np.ones(cur.shape[0], dtype=bool)
    ms = wall // 1_000_000
    if fresh.all():
        refs = list(order.refs)
        idx = None
    else:
        idx = np.flatnonzero(fresh)
        refs = [ref for i in idx.tolist() for ref in (order.refs[2 * i], order.refs[2 * i + 1])]
        cpu, anon, ms = cpu[idx], anon[idx], ms[idx]
    values = np.empty(2 * cpu.shape[0], dtype=np.float64)
    values[0::2], values[1::2] = cpu, anon.astype(np.float64)
    batch = SampleBatch.from_arrays(refs, np.repeat(ms, 2), values)
    pods = order.is_pod if idx is None else order.is_pod[idx]
    total_cpu = float(np.cumsum(cpu[pods])[-1]) if pods.any() else 0.0
    total_mem = int(anon[pods].sum())
    counted = np.flatnonzero(fresh & order.is_pod).tolist()
    return batch, total_cpu, total_mem, [order.states[i].numa_path for i in counted]


def _one_by_one(
    order: _Round, walls: list[int], curs: list[int | None], anons: list[int | None], max_age: int
) -> _Done:
    """The round cgroup by cgroup on the ``CgroupUsage`` objects (any round ``_vectorised`` declines)."""
    batch = SampleBatch()
    add_ref, add_ts, add_value = batch.refs.append, batch.timestamps.append, batch.values.append
    total_cpu = 0.0
    total_mem = 0
    numa_paths: list[str] = []
    for state, is_pod, wall, cur, anon in zip(order.states, order.pod_flags, walls, curs, anons, strict=True):
        if cur is None:
            continue  # CPU unreadable: the state stays as it was
        last_ns, last_wall = state.last_ns, state.last_wall
        state.last_ns, state.last_wall = cur, wall
        if anon is None or last_ns < 0 or last_wall >= wall or wall - last_wall > max_age:
            continue  # memory unreadable, or a first (or stale) observation
        cpu = float((cur - last_ns) % _U64) / float(wall - last_wall)  # usage_cores(udelta(…))
        ts = wall // 1_000_000
        add_ref(state.cpu_ref)
        add_ref(state.mem_ref)
        add_ts(ts)
        add_ts(ts)
        add_value(cpu)
        add_value(float(anon))
        if is_pod:
            total_cpu += cpu
            total_mem += anon
            numa_paths.append(state.numa_path)
    return batch, total_cpu, total_mem, numa_paths
