"""BEResourceCollector (docs/rules/koordlet.md#collectors, 1 s, milli-cores): ``node_be`` request /
real-limit / usage sharing one timestamp. Request = Σ batch-cpu requests of raw-QoS-BE pods (containers +
sidecar init containers, negatives → 0). Real limit = min(smallest cpuset among the besteffort QoS cgroup and
its container dirs × 1000, quota × 1000 // period unless quota is −1). Usage = int64(float64(Δns // 1e6) /
float64(Δwall ms) × 1000), 0 on the first round. Any read error aborts the round, except a container
whose cgroup vanished (its BE pod deleted since the pod set was listed): that container is left out of the
cpuset minimum, quietly (docs/rules/koordlet.md#collectors).

Container dirs come from PodSource (pods of Kubernetes class BestEffort), not from a tree walk, so sandbox
(pause) dirs that kubelet does not report are not part of the cpuset minimum.
The request and the cpuset files follow the pod set (recomputed when it changes); the cpusets are read in
one loop (agent.system.readers).
Imports: standard library, apis.{constants,kubeobjects,pod,qos}, agent.system.{cgroup,podcgroup,readers},
agent.metriccache.cache, agent.metricsadvisor.framework.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from agent.metriccache.cache import SampleBatch, SeriesRef
from agent.metricsadvisor.framework import BaseCollector, CollectContext, ms, udelta
from agent.podmeta import PodMeta
from agent.system import cgroup as cg
from agent.system.podcgroup import KubeQOS, qos_cgroup_dir
from agent.system.readers import decoder, read_bytes, read_files, reader
from apis.constants import BATCH_CPU
from apis.kubeobjects import Pod
from apis.pod import container_requests, containers, init_containers, is_restartable_init_container
from apis.qos import QoSClass, qos_class_raw

__all__ = ["BEResourceCollector", "be_real_limit_milli", "be_request_milli", "be_usage_milli"]

T = TypeVar("T")

log = logging.getLogger(__name__)

# errnos of a cgroup removed under us: the path is gone, or the kernel is tearing the cgroup down
_VANISHED = (errno.ENOENT, errno.ENODEV)

_LABELS = {
    alloc: {"be_resource": "cpu", "be_allocation": alloc} for alloc in ("request", "real-limit", "usage")
}


def be_request_milli(pods: Sequence[Pod]) -> int:
    """Σ over raw-QoS-BE pods of their containers' (and sidecar init containers') batch-cpu requests."""
    total = 0
    for pod in pods:
        if qos_class_raw(pod) is not QoSClass.BE:
            continue
        members = containers(pod) + [c for c in init_containers(pod) if is_restartable_init_container(c)]
        for container in members:
            q = container_requests(container, (BATCH_CPU,)).get(BATCH_CPU)
            if q is not None:
                total += max(q.value(), 0)
    return total


def be_real_limit_milli(cpuset_sizes: Sequence[int], quota_us: int, period_us: int) -> int:
    """min(smallest cpuset × 1000, quota × 1000 // period unless quota is −1); int64 division truncates."""
    limit = min(cpuset_sizes) * 1000
    if quota_us != -1:
        if quota_us <= 0 or period_us <= 0:
            raise ValueError(f"bad CFS quota/period {quota_us}/{period_us}")
        limit = min(limit, quota_us * 1000 // period_us)
    return limit


def be_usage_milli(cur_ns: int, last_ns: int, delta_wall_ns: int) -> int:
    """``int64(float64((cur − last) / 1e6) / float64(Δwall.Milliseconds()) × 1000)`` (unsigned ns delta)."""
    wall_ms = delta_wall_ns // 1_000_000
    if wall_ms <= 0:
        return 0
    return int(float(udelta(cur_ns, last_ns) // 1_000_000) / float(wall_ms) * 1000)


def _vanished(exc: OSError, path: str) -> bool:
    """The cgroup holding ``path`` is gone (or going): ENODEV, or ENOENT with its directory gone too. A
    missing file in a cgroup that still exists is a broken hierarchy, not churn, and stays an error."""
    if exc.errno == errno.ENODEV:
        return True
    return exc.errno == errno.ENOENT and not os.path.isdir(os.path.dirname(path))


class _Round:
    """What a pod set fixes: the BE request and the cpuset files to read (the besteffort dir first)."""

    __slots__ = ("cpuset_paths", "key", "request")

    def __init__(self, key: tuple[PodMeta, ...], request: int, cpuset_paths: list[str]) -> None:
        self.key, self.request, self.cpuset_paths = key, request, cpuset_paths


class BEResourceCollector(BaseCollector):
    def __init__(self, interval_seconds: float = 1.0) -> None:
        super().__init__("be_resource", interval_seconds)
        self._last: tuple[int, int] | None = None  # (cpu ns, wall ns)
        # uid → (the pod object the request was computed from, request); compared by identity
        self._request_cache: dict[str, tuple[Mapping[str, Any], int]] = {}
        self._be_paths: dict[str, str] = {}  # the besteffort dir's quota/period/usage files
        self._readers: dict[tuple[str, str], Callable[[str], Any]] = {}
        self._round: _Round | None = None
        self._cpuset_decoders: dict[cg.CgroupVersion, Callable[[bytes, str], list[int]]] = {}
        self._refs = {alloc: SeriesRef("node_be", labels) for alloc, labels in _LABELS.items()}

    def _read(self, ctx: CollectContext, spec: cg.CgroupFile[T], cgroup_dir: str) -> T:
        key = spec.name + "\0" + cgroup_dir
        path = self._be_paths.get(key)
        if path is None:
            root, version = ctx.paths.cgroup_root, ctx.cgroup_version
            path = self._be_paths[key] = str(cg.cgroup_file_path(root, version, spec, cgroup_dir))
        value: T = self._reader(ctx, spec)(path)
        return value

    def _reader(self, ctx: CollectContext, spec: cg.CgroupFile[T]) -> Callable[[str], T]:
        rkey = (spec.name, ctx.cgroup_version.value)
        read = self._readers.get(rkey)
        if read is None:
            read = self._readers[rkey] = reader(spec, ctx.cgroup_version)
        return read

    def _cpuset_sizes(self, ctx: CollectContext, paths: list[str]) -> list[int]:
        """``len`` of each cpuset (read in one loop; ``OSError``/``ValueError`` as a single reader's). A
        container (every path but the first, the besteffort dir's) whose cgroup vanished is left out."""
        version = ctx.cgroup_version
        decode = self._cpuset_decoders.get(version)
        if decode is None:
            decode = self._cpuset_decoders[version] = decoder("cpuset", version)
        sizes: list[int] = []
        for i, (path, data) in enumerate(zip(paths, read_files(paths), strict=True)):
            if data is None:
                try:
                    read_bytes(path)  # raises the single reader's own OSError
                except OSError as exc:
                    if i == 0 or not _vanished(exc, path):
                        raise
                    # a BE pod deleted mid-round: normal under churn; the pod set is re-read next round
                    log.debug("be_resource: container cgroup vanished, skipped: %s (%s)", path, exc.strerror)
                    continue
                raise OSError(f"{path}: unreadable")  # (it became readable in between: still a failed round)
            sizes.append(len(decode(data, path)))
        return sizes

    def _request(self, pods: Sequence[PodMeta]) -> int:
        cache: dict[str, tuple[Mapping[str, Any], int]] = {}
        total = 0
        for meta in pods:
            hit = self._request_cache.get(meta.uid)
            if hit is None or hit[0] is not meta.pod:
                hit = (meta.pod, be_request_milli((meta.pod,)))
            cache[meta.uid] = hit
            total += hit[1]
        self._request_cache = cache
        return total

    def _order(self, ctx: CollectContext, be_dir: str) -> _Round:
        """The request and cpuset paths of the current pod set (recomputed only when it changes)."""
        key = tuple(ctx.pods.pods())
        if self._round is not None and self._round.key == key and self._round.cpuset_paths:
            return self._round
        dirs = [be_dir]
        for meta in key:
            if meta.kube_qos is KubeQOS.BESTEFFORT:
                dirs.extend(c.cgroup_dir for c in meta.containers)
        root, version = ctx.paths.cgroup_root, ctx.cgroup_version
        paths = [str(cg.cgroup_file_path(root, version, cg.CPUSET_CPUS, d)) for d in dirs]
        self._round = _Round(key, self._request(key), paths)
        return self._round

    def collect(self, ctx: CollectContext) -> SampleBatch:
        be_dir = qos_cgroup_dir(ctx.cgroup_driver, KubeQOS.BESTEFFORT)
        order = self._order(ctx, be_dir)
        sizes = self._cpuset_sizes(ctx, order.cpuset_paths)
        quota = self._read(ctx, cg.CPU_QUOTA, be_dir)
        period = self._read(ctx, cg.CPU_PERIOD, be_dir)
        limit = be_real_limit_milli(sizes, quota, period)
        wall = ctx.clock_ns()
        cur = self._read(ctx, cg.CPU_USAGE, be_dir)
        last, self._last = self._last, (cur, wall)
        usage = 0 if last is None else be_usage_milli(cur, last[0], wall - last[1])
        ts = ms(wall)
        self.mark_started()
        batch = SampleBatch()
        batch.add(self._refs["request"], ts, float(order.request))
        batch.add(self._refs["real-limit"], ts, float(limit))
        batch.add(self._refs["usage"], ts, float(usage))
        return batch
