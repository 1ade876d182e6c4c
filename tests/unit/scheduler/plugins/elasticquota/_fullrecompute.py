"""Brute-force oracle of the quota tree's derived state: every quota's requests, used and runtime computed
from scratch from the manager's quotas, their own sums and the cluster total, in one pass — the full-tree
recomputation koord did before the lazy refresh (docs/rules/scheduler-elasticquota.md#top-down-evaluation,
docs/rules/scheduler-elasticquota.md#propagation-to-ancestors), kept here to compare the incremental state
with. Reads the manager, changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from apis.elasticquota import DEFAULT_QUOTA, ROOT_QUOTA, SYSTEM_QUOTA
from scheduler.plugins.elasticquota import resources as r
from scheduler.plugins.elasticquota.calculator import Share, redistribute, scaled_mins
from scheduler.plugins.elasticquota.manager import GroupQuotaManager
from scheduler.plugins.elasticquota.quotainfo import QuotaInfo
from scheduler.plugins.elasticquota.resources import Res

SPECIAL = (SYSTEM_QUOTA, DEFAULT_QUOTA)


@dataclass
class Derived:
    request: Res = field(default_factory=dict)
    child_request: Res = field(default_factory=dict)
    used: Res = field(default_factory=dict)
    np_request: Res = field(default_factory=dict)
    np_used: Res = field(default_factory=dict)
    runtime: Res = field(default_factory=dict)
    auto_scale_min: Res = field(default_factory=dict)


def _limited(d: Derived, q: QuotaInfo) -> Res:
    return r.limited(d.request, q.max)


def full_recompute(mgr: GroupQuotaManager) -> tuple[dict[str, Derived], Res]:
    """(every quota's derived state, the root total)."""
    quotas = mgr.quotas
    out = {name: Derived() for name in quotas}
    kids: dict[str, list[str]] = {}
    for name in sorted(quotas):
        if name != ROOT_QUOTA:
            kids.setdefault(quotas[name].parent, []).append(name)
    seen: set[str] = set()

    def aggregate(name: str) -> None:
        seen.add(name)
        q, d = quotas[name], out[name]
        child_request, used = dict(q.self_request), dict(q.self_used)
        np_request, np_used = dict(q.self_np_request), dict(q.self_np_used)
        limited_sum: Res = {}
        for c in kids.get(name, ()):
            if c in seen:
                continue
            aggregate(c)
            limited_sum = r.add(limited_sum, _limited(out[c], quotas[c]))
            used, np_used = r.add(used, out[c].used), r.add(np_used, out[c].np_used)
            np_request = r.add(np_request, out[c].np_request)
        d.used, d.np_used, d.np_request = used, np_used, np_request
        if name == ROOT_QUOTA:
            d.request = limited_sum
            return
        d.child_request = r.add(child_request, limited_sum)
        request = dict(d.child_request)
        if not q.quota.allow_lent_resource:
            for n, m in q.min.items():
                request[n] = max(request.get(n, m), m)
        d.request = request

    aggregate(ROOT_QUOTA)
    for name in sorted(quotas):
        if name not in seen and quotas[name].parent not in quotas:
            aggregate(name)
    for name in sorted(quotas):
        if name not in seen:
            aggregate(name)
    special: Res = {}
    for name in SPECIAL:
        if name in quotas:
            special = r.add(special, out[name].used)
    root_total = r.subtract(mgr.cluster_total, special)
    ordinary = [n for n in quotas if n not in (ROOT_QUOTA, *SPECIAL)]
    for n in ordinary:
        out[n].auto_scale_min = dict(quotas[n].min)
    root_keys = sorted({k for n in ordinary for k in quotas[n].max})
    stack: list[tuple[str, Mapping[str, int], Sequence[str]]] = [(ROOT_QUOTA, root_total, root_keys)]
    while stack:
        parent, total, keys = stack.pop()
        children = [c for c in kids.get(parent, ()) if c not in SPECIAL]
        if not children:
            continue
        if mgr.args.enable_min_quota_scale:
            mins = scaled_mins(total, {c: quotas[c].min for c in children})
        else:
            mins = {c: dict(quotas[c].min) for c in children}
        for c in children:
            out[c].auto_scale_min = mins[c]
            out[c].runtime = {}
        for key in keys:
            shares = [
                Share(
                    c,
                    quotas[c].shared_weight.get(key, 0),
                    _limited(out[c], quotas[c]).get(key, 0),
                    mins[c].get(key, 0),
                    0,
                    quotas[c].quota.allow_lent_resource,
                )
                for c in children
            ]
            for name, value in redistribute(total.get(key, 0), shares).items():
                out[name].runtime[key] = value
        for c in children:
            stack.append((c, out[c].runtime, sorted(quotas[c].max)))
    return out, root_total


def derived_of(info: QuotaInfo) -> Derived:
    """The manager's derived state of one quota, in the oracle's shape."""
    return Derived(
        dict(info.request),
        dict(info.child_request),
        dict(info.used),
        dict(info.np_request),
        dict(info.np_used),
        dict(info.runtime),
        dict(info.auto_scale_min),
    )
