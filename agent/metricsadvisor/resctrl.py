"""resctrl collector (docs/rules/koordlet.md#collectors, 10 s; only when resctrl is mounted): per group
LSR/LS/BE and L3 domain, ``llc_occupancy`` → ``resctrl_resource_llc{qos, cache_id}``.

The MB counters are read too but, as upstream (upstream quirk: its MB samples carry an extra ``resctrl_type``
label and are refused by the TSDB), they are not stored; the latest values are kept in ``last_mb`` for a
Prometheus exporter. Imports: standard library, agent.system.resctrl, agent.metriccache.cache,
agent.metricsadvisor.framework.
"""

from __future__ import annotations

from agent.metriccache.cache import Sample
from agent.metricsadvisor.framework import BaseCollector, CollectContext, ms
from agent.system.resctrl import ResctrlDomain, is_resctrl_mounted, read_resctrl

__all__ = ["ResctrlCollector", "llc_samples"]


def llc_samples(domains: list[ResctrlDomain], ts: int) -> list[Sample]:
    return [
        Sample("resctrl_resource_llc", {"qos": d.group, "cache_id": d.cache_id}, ts, float(d.llc_occupancy))
        for d in domains
    ]


class ResctrlCollector(BaseCollector):
    def __init__(self, interval_seconds: float = 10.0) -> None:
        super().__init__("resctrl", interval_seconds)
        self.last_mb: dict[tuple[str, str, str], int] = {}
        """(qos, cache_id, ``mbm_local``|``mbm_total``) → bytes, from the latest round."""

    def enabled(self, ctx: CollectContext) -> bool:
        return is_resctrl_mounted(ctx.resctrl_dir())

    def collect(self, ctx: CollectContext) -> list[Sample]:
        ts = ms(ctx.clock_ns())
        domains = read_resctrl(ctx.resctrl_dir())
        mb: dict[tuple[str, str, str], int] = {}
        for d in domains:
            mb[(d.group, d.cache_id, "mbm_local")] = d.mbm_local_bytes
            mb[(d.group, d.cache_id, "mbm_total")] = d.mbm_total_bytes
        self.last_mb = mb
        self.mark_started()
        return llc_samples(domains, ts)
