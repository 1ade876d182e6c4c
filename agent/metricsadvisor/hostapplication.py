"""HostApplicationCollector (docs/rules/koordlet.md#collectors, docs/configuration.md#host-application-config,
1 s): CPU and memory of the NodeSLO ``hostApplications`` cgroups, read exactly like a pod (first observation
skipped). Writes ``host_application_cpu_usage``, ``host_application_memory_usage`` (anon-only) and
``host_application_memory_usage_with_page_cache`` (``memory.usage_in_bytes`` / v2 ``memory.current``), and
publishes the host-app total for the system collector (memory per ``nodeMemoryCollectPolicy``). Does nothing –
and never starts – without a NodeSLO.

Imports: standard library, apis.nodeslo, agent.system.{cgroup,podcgroup,readers}, agent.metriccache.cache,
agent.metricsadvisor.{framework,podresource}.
"""

from __future__ import annotations

from agent.metriccache.cache import Sample
from agent.metricsadvisor.framework import HOST_APPS, BaseCollector, CollectContext, Totals, ms
from agent.metricsadvisor.podresource import CgroupUsage
from agent.system import cgroup as cg
from agent.system.podcgroup import CgroupDriver, KubeQOS, qos_cgroup_dir
from agent.system.readers import read_text
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

    def collect(self, ctx: CollectContext) -> list[Sample]:
        apps = ctx.host_apps()
        if apps is None:
            return []  # no NodeSLO yet: nothing collected, nothing published
        version = ctx.cgroup_version
        max_age = int(20 * self.interval_seconds * 1e9)
        with_page_cache = ctx.node_memory_policy() == USAGE_WITH_PAGE_CACHE
        out: list[Sample] = []
        total_cpu = 0.0
        total_mem = 0
        seen: set[str] = set()
        for app in apps:
            name = app.name or ""
            seen.add(name)
            cgroup_dir = host_app_cgroup_dir(app, ctx.cgroup_driver)
            state = self._states.get(name)
            if state is None or state.cgroup_dir != cgroup_dir:
                state = self._states[name] = CgroupUsage(ctx, cgroup_dir, {"host_app_name": name}, _KINDS)
            wall = ctx.clock_ns()
            try:
                got = state.read(version, wall, max_age)
                if got is None:
                    continue
                usage_path = str(
                    cg.cgroup_file_path(ctx.paths.cgroup_root, version, cg.MEMORY_USAGE, cgroup_dir)
                )
                usage = cg.convert_cgroup(cg.MEMORY_USAGE, version, read_text(usage_path), usage_path)
            except (OSError, ValueError):
                continue
            cpu, anon = got
            ts = ms(wall)
            out.append(Sample("host_application_cpu_usage", state.labels, ts, cpu))
            out.append(Sample("host_application_memory_usage", state.labels, ts, float(anon)))
            out.append(
                Sample("host_application_memory_usage_with_page_cache", state.labels, ts, float(usage))
            )
            total_cpu += cpu
            total_mem += usage if with_page_cache else anon
        self._states = {k: v for k, v in self._states.items() if k in seen}
        ctx.shared.publish(HOST_APPS, Totals(total_cpu, float(total_mem), ctx.clock_ns()))
        self.mark_started()
        return out
