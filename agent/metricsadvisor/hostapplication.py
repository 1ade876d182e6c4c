"""HostApplicationCollector (docs/rules/koordlet.md#collectors, docs/configuration.md#host-application-config,
1 s): CPU and memory of the NodeSLO ``hostApplications`` cgroups, read exactly like a pod: the apps are a
``UsageRound`` read by the pods' ``UsageReader`` (``agent.metricsadvisor.podresource``, the one
implementation of the CPU-rate rule; first observation skipped), and the apps it counts then read
``memory.usage_in_bytes`` (v2 ``memory.current``). An app whose usage file also reads writes
``host_application_cpu_usage``, ``host_application_memory_usage`` (anon-only) and
``host_application_memory_usage_with_page_cache`` (the usage file), and counts in the host-app total
published for the system collector (memory per ``nodeMemoryCollectPolicy``). Apps no longer listed are
forgotten. Does nothing – and never starts – without a NodeSLO.

Imports: standard library, numpy, apis.nodeslo, agent.system.{cgroup,podcgroup,readers},
agent.metriccache.cache, agent.metricsadvisor.{framework,podresource}.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from agent.metriccache.cache import Sample
from agent.metricsadvisor.framework import HOST_APPS, BaseCollector, CollectContext, Totals, ms
from agent.metricsadvisor.podresource import CgroupUsage, UsageReader, UsageRound
from agent.system import cgroup as cg
from agent.system.podcgroup import CgroupDriver, KubeQOS, qos_cgroup_dir
from agent.system.readers import read_files
from apis.nodeslo import HostApplicationSpec

__all__ = ["HostApplicationCollector", "host_app_cgroup_dir"]

USAGE_WITH_PAGE_CACHE = "usageWithPageCache"
_KINDS = ("host_application_cpu_usage", "host_application_memory_usage")


def host_app_cgroup_dir(app: HostApplicationSpec, driver: CgroupDriver) -> str:
    """docs/configuration.md#host-application-config: ``<base dir>/<parentDir>/<relativePath>`` or, without
    ``cgroupPath``, by QoS."""
    name = app.name or ""
    path = app.cgroup_path
    if path is None:
        if app.qos in ("LSE", "LSR", "LS"):
            return f"host-latency-sensitive/{name}/"
        if app.qos == "BE":
            return f"host-best-effort/{name}/"
        return f"{name}/"
    base = {
        "Kubepods": qos_cgroup_dir(driver, KubeQOS.GUARANTEED),
        "KubepodsBurstable": qos_cgroup_dir(driver, KubeQOS.BURSTABLE),
        "KubepodsBesteffort": qos_cgroup_dir(driver, KubeQOS.BESTEFFORT),
    }.get(path.base or "", "")
    parts = [p.strip("/") for p in (base, path.parent_dir or "", path.relative_path or "") if p.strip("/")]
    return "/".join(parts) + "/"


class HostApplicationCollector(BaseCollector):
    def __init__(self, interval_seconds: float = 1.0) -> None:
        super().__init__("host_application", interval_seconds)
        self._states: dict[str, CgroupUsage] = {}
        self._round: UsageRound | None = None
        self._usage_paths: list[str] = []  # memory.usage_in_bytes / memory.current, in the round's order
        self._read = UsageReader()

    def _order(self, ctx: CollectContext, apps: Sequence[HostApplicationSpec]) -> UsageRound:
        """This round's cgroups, one per listed app; rebuilt only when the (name, dir) list changed, keeping
        the state of every app still listed with the same dir and forgetting the rest."""
        key = tuple((app.name or "", host_app_cgroup_dir(app, ctx.cgroup_driver)) for app in apps)
        if self._round is not None and self._round.key == key:
            return self._round
        old, self._states = self._states, {}
        cgroups: list[CgroupUsage] = []
        for name, cgroup_dir in key:
            state = old.get(name)
            if state is None or state.cgroup_dir != cgroup_dir:
                state = CgroupUsage(ctx, cgroup_dir, {"host_app_name": name}, _KINDS)
            self._states[name] = state
            cgroups.append(state)
        root, version = ctx.paths.cgroup_root, ctx.cgroup_version
        self._usage_paths = [
            str(cg.cgroup_file_path(root, version, cg.MEMORY_USAGE, c.cgroup_dir)) for c in cgroups
        ]
        self._round = UsageRound(key, cgroups, self._round)
        return self._round

    def collect(self, ctx: CollectContext) -> list[Sample]:
        apps = ctx.host_apps()
        if apps is None:
            return []  # no NodeSLO yet: nothing collected, nothing published
        version = ctx.cgroup_version
        max_age = int(20 * self.interval_seconds * 1e9)
        with_page_cache = ctx.node_memory_policy() == USAGE_WITH_PAGE_CACHE
        order = self._order(ctx, apps)
        rates = self._read(ctx, order, max_age)
        # An app yields samples only when its memory usage reads too: read for the counted apps alone.
        counted = np.flatnonzero(rates.counted).tolist()
        paths = [self._usage_paths[i] for i in counted]
        cpus, walls = rates.cpu.tolist(), rates.wall.tolist()
        out: list[Sample] = []
        total_cpu = 0.0
        total_mem = 0
        for i, path, data in zip(counted, paths, read_files(paths), strict=True):
            if data is None:
                continue
            try:
                usage = cg.convert_cgroup(cg.MEMORY_USAGE, version, data.decode(), path)
            except ValueError:
                continue
            cpu, anon, labels, ts = cpus[i], rates.anon_bytes[i], order.cgroups[i].labels, ms(walls[i])
            assert anon is not None  # counted: its memory was read
            out.append(Sample("host_application_cpu_usage", labels, ts, cpu))
            out.append(Sample("host_application_memory_usage", labels, ts, float(anon)))
            out.append(Sample("host_application_memory_usage_with_page_cache", labels, ts, float(usage)))
            total_cpu += cpu
            total_mem += usage if with_page_cache else anon
        ctx.shared.publish(HOST_APPS, Totals(total_cpu, float(total_mem), ctx.clock_ns()))
        self.mark_started()
        return out
