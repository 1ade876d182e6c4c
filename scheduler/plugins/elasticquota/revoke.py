"""Overuse revoke (docs/rules/scheduler-elasticquota.md#overuse-revoke): a quota whose used has stayed above
its runtime for longer than delayEvictTime gives back pods, least important first, until it fits; the pods it
can take back without going over again are spared.
``revoke_list`` is the pure choice for one quota; ``OveruseMonitor`` remembers, per quota, when used last
fitted and answers which quotas are due at ``now``.
Imports: the standard library, apis (elasticquota, pod) and this package. Pure (the clock is the caller's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from apis.elasticquota import ROOT_QUOTA, SYSTEM_QUOTA, is_pod_non_preemptible
from apis.pod import pod_requests
from scheduler.plugins.elasticquota import resources as r
from scheduler.plugins.elasticquota.manager import GroupQuotaManager
from scheduler.plugins.elasticquota.preemption import priority, start_time

Pod = Mapping[str, Any]


def least_important_first(pods: Sequence[Pod]) -> list[Pod]:
    """Lower priority first, then the later start first (a pod without a start time started now)."""
    return sorted(pods, key=lambda p: (priority(p), -start_time(p)))


def _request(pod: Pod) -> dict[str, int]:
    return {n: r.to_int(n, q) for n, q in pod_requests(pod).items()}


def revoke_list(used: Mapping[str, int], runtime: Mapping[str, int], pods: Sequence[Pod]) -> list[Pod]:
    """The pods to evict so that ``used`` fits ``runtime`` (``pods``: the quota's assigned pods)."""
    current = dict(used)
    tried: list[Pod] = []
    for pod in least_important_first(pods):
        if r.less_than_or_equal(current, runtime)[0]:
            break
        if is_pod_non_preemptible(pod):
            continue
        req = _request(pod)
        current = r.mask(r.subtract(current, req), req)  # masked to the pod's names, as upstream does
        tried.append(pod)
    if not r.less_than_or_equal(current, runtime)[0]:
        return tried
    revoked: list[Pod] = []
    for pod in reversed(tried):
        req = _request(pod)
        current = r.mask(r.add(current, req), req)
        if not r.less_than_or_equal(current, runtime)[0]:
            current = r.subtract(current, req)
            revoked.append(pod)
    return revoked


class OveruseMonitor:
    """Per quota, the last time its used fitted its runtime (every quota but the root and the system
    quota; parents and the default quota included)."""

    def __init__(self, delay_evict_ns: int) -> None:
        self.delay_evict_ns = delay_evict_ns
        self.last_fit: dict[str, int] = {}

    def due(self, mgr: GroupQuotaManager, now_ns: int) -> dict[str, list[Pod]]:
        """The pods to evict now, per quota that has been over its runtime for longer than the delay."""
        mgr.refresh()
        out: dict[str, list[Pod]] = {}
        for name, info in sorted(mgr.quotas.items()):
            if name in (ROOT_QUOTA, SYSTEM_QUOTA):
                continue
            if r.less_than_or_equal(info.used, info.runtime)[0]:
                self.last_fit[name] = now_ns
                continue
            since = self.last_fit.setdefault(name, now_ns)
            if now_ns - since <= self.delay_evict_ns:
                continue
            assigned = [e.pod for e in info.pods.values() if e.assigned]
            victims = revoke_list(info.used, info.runtime, assigned)
            if victims:
                out[name] = victims
        for name in list(self.last_fit):
            if name not in mgr.quotas:
                del self.last_fit[name]
        return out
