"""PSI collector (the PSI part of upstream's PerformanceCollector, docs/rules/koordlet.md#collectors, 10 s):
avg10 ``some``/``full`` of the cpu, memory and io pressure files of every pod and container (cgroup v2, or
Anolis v1 with the files in cpuacct), plus ``pod/container_psi_cpu_full_supported``; and, as a koord addition,
the node-level ``/proc/pressure/*`` as ``node_psi``. Enabled when either the kubepods cgroup has
``cpu.pressure`` or /proc/pressure exists. An unreadable pressure file is skipped.

Imports: standard library, agent.system.{cgroup,procfs,podcgroup,readers}, agent.metriccache.cache,
agent.metricsadvisor.framework.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent.metriccache.cache import Sample
from agent.metricsadvisor.framework import BaseCollector, CollectContext, ms
from agent.system import cgroup as cg
from agent.system.podcgroup import KubeQOS, qos_cgroup_dir
from agent.system.procfs import PressureStats, parse_pressure
from agent.system.readers import read_text

__all__ = ["PSICollector", "psi_samples"]

_FILES = (("cpu", cg.CPU_PRESSURE), ("mem", cg.MEMORY_PRESSURE), ("io", cg.IO_PRESSURE))
_PROC_FILES = (("cpu", "cpu"), ("mem", "memory"), ("io", "io"))


def psi_samples(
    kind: str, base: Mapping[str, str], resource: str, stats: PressureStats, ts: int
) -> list[Sample]:
    """Pure: the avg10 some (and full, when present) samples of one pressure file."""
    out = [
        Sample(
            kind,
            {**base, "psi_resource": resource, "psi_precision": "10", "psi_degree": "some"},
            ts,
            stats.some.avg10,
        )
    ]
    if stats.full is not None:
        labels = {**base, "psi_resource": resource, "psi_precision": "10", "psi_degree": "full"}
        out.append(Sample(kind, labels, ts, stats.full.avg10))
    return out


class PSICollector(BaseCollector):
    def __init__(self, interval_seconds: float = 10.0) -> None:
        super().__init__("psi", interval_seconds)
        self._cgroup_psi: bool | None = None

    def _has_cgroup_psi(self, ctx: CollectContext) -> bool:
        if self._cgroup_psi is None:
            root, version = ctx.paths.cgroup_root, ctx.cgroup_version
            kubepods = qos_cgroup_dir(ctx.cgroup_driver, KubeQOS.GUARANTEED)
            self._cgroup_psi = cg.cgroup_file_path(root, version, cg.CPU_PRESSURE, kubepods).is_file()
        return self._cgroup_psi

    def enabled(self, ctx: CollectContext) -> bool:
        return self._has_cgroup_psi(ctx) or (ctx.paths.proc / "pressure" / "cpu").is_file()

    def _cgroup(
        self,
        ctx: CollectContext,
        kind: str,
        full_kind: str,
        base: Mapping[str, str],
        cgroup_dir: str,
        ts: int,
    ) -> list[Sample]:
        out: list[Sample] = []
        root, version = ctx.paths.cgroup_root, ctx.cgroup_version
        for resource, spec in _FILES:
            path = str(cg.cgroup_file_path(root, version, spec, cgroup_dir))
            try:
                stats = cg.convert_cgroup(spec, version, read_text(path), path)
            except (OSError, ValueError):
                continue
            out.extend(psi_samples(kind, base, resource, stats, ts))
            if resource == "cpu":
                out.append(Sample(full_kind, base, ts, 1.0 if stats.full is not None else 0.0))
        return out

    def collect(self, ctx: CollectContext) -> list[Sample]:
        ts = ms(ctx.clock_ns())
        out: list[Sample] = []
        for resource, file in _PROC_FILES:
            path = str(ctx.paths.proc / "pressure" / file)
            try:
                stats = parse_pressure(read_text(path), path)
            except (OSError, ValueError):
                continue
            out.extend(psi_samples("node_psi", {}, resource, stats, ts))
        pods = ctx.pods.pods() if self._has_cgroup_psi(ctx) else ()
        for pod in pods:
            base = {"pod_uid": pod.uid}
            out.extend(self._cgroup(ctx, "pod_psi", "pod_psi_cpu_full_supported", base, pod.cgroup_dir, ts))
            for c in pod.containers:
                cbase = {"pod_uid": pod.uid, "container_id": c.container_id}
                out.extend(
                    self._cgroup(
                        ctx, "container_psi", "container_psi_cpu_full_supported", cbase, c.cgroup_dir, ts
                    )
                )
        self.mark_started()
        return out
