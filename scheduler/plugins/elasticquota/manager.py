"""The group quota manager of one quota tree: the quotas and their parent links, the pods charged to each
quota (docs/rules/scheduler-elasticquota.md#pod-accounting), the cluster total from node allocatable, and
the reads of the tree's derived state (scheduler.plugins.elasticquota.tree): requests and used summed
along the paths (docs/rules/scheduler-elasticquota.md#propagation-to-ancestors) and the runtime, refreshed
along the path of the quota read (docs/rules/scheduler-elasticquota.md#top-down-evaluation).

A pod event moves its quota's own sums in O(resources) and the ancestors' in O(depth × resources); a read
runs the stale calculators on its quota's path only (docs/rules/scheduler-elasticquota.md#performance).
Imports: the standard library, apis (elasticquota, pod, quantity) and this package. Not thread-safe: the
plugin serialises calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apis.elasticquota import (
    DEFAULT_QUOTA,
    ROOT_QUOTA,
    SYSTEM_QUOTA,
    ElasticQuota,
    is_pod_non_preemptible,
    pod_quota_label,
)
from apis.pod import is_terminated, metadata, pod_key, spec
from apis.quantity import Quantity
from scheduler.plugins.elasticquota import resources as r
from scheduler.plugins.elasticquota.args import ElasticQuotaArgs
from scheduler.plugins.elasticquota.quotainfo import (
    SPECIAL_CHILDREN,
    PodEntry,
    QuotaInfo,
    pod_charge,
    quota_info,
)
from scheduler.plugins.elasticquota.resources import Res
from scheduler.plugins.elasticquota.tree import QuotaTree

__all__ = ["GroupQuotaManager"]


class GroupQuotaManager:
    def __init__(self, args: ElasticQuotaArgs, tree_id: str = "") -> None:
        self.args = args
        self.tree_id = tree_id
        root = ElasticQuota(ROOT_QUOTA, parent="", is_parent=True)
        self.quotas: dict[str, QuotaInfo] = {ROOT_QUOTA: quota_info(root)}
        if tree_id == "":
            self.quotas[SYSTEM_QUOTA] = quota_info(
                ElasticQuota(SYSTEM_QUOTA, max=dict(args.system_quota_group_max))
            )
            self.quotas[DEFAULT_QUOTA] = quota_info(
                ElasticQuota(DEFAULT_QUOTA, max=dict(args.default_quota_group_max))
            )
        self.cluster_total: Res = {}
        self.nodes: dict[str, Res] = {}
        self.tree = QuotaTree(self.quotas, self.root_total, args.enable_min_quota_scale)

    # --- quotas ------------------------------------------------------------------------------------------
    def upsert_quota(self, quota: ElasticQuota) -> bool:
        """Adds or replaces a quota; its pods stay and are re-charged against the new max. False when
        nothing the rules read changed (an update of the status annotations): the object is kept, the
        tree's state too."""
        if quota.name == ROOT_QUOTA:
            return False
        old = self.quotas.get(quota.name)
        if old is not None and old.quota == quota:
            old.quota = quota  # equal amounts; the reasons print the spec as now written
            return False
        self.tree.invalidate()
        info = quota_info(quota)
        if old is not None:
            for key, e in old.pods.items():
                self._charge(info, key, e.pod, e.assigned)
        self.quotas[quota.name] = info
        return True

    def delete_quota(self, name: str) -> None:
        if name in (ROOT_QUOTA, SYSTEM_QUOTA, DEFAULT_QUOTA):
            return
        if self.quotas.pop(name, None) is not None:
            self.tree.invalidate()

    def known(self, name: str) -> bool:
        return name in self.quotas

    def resolve(self, pod: Mapping[str, Any]) -> str:
        """The pod's quota (docs/rules/scheduler-elasticquota.md#which-quota-a-pod-belongs-to): its label,
        else a quota named like its namespace in that namespace (a quota read without a namespace matches
        any), else the first quota listing the namespace, else the default quota; an unknown name is the
        default quota."""
        name = pod_quota_label(pod)
        if not name:
            ns = metadata(pod).get("namespace") or ""
            same = self.quotas.get(ns) if isinstance(ns, str) and ns else None
            if same is not None and same.quota.namespace in (ns, ""):  # "": a scenario's quota without one
                name = ns
            else:
                listing = [q.name for q in self.quotas.values() if ns in q.quota.namespaces]
                name = listing[0] if listing else DEFAULT_QUOTA
        return name if name in self.quotas else DEFAULT_QUOTA

    # --- nodes (docs/rules/scheduler-elasticquota.md#the-cluster-total) -----------------------------------
    def set_node(self, name: str, allocatable: Mapping[str, Quantity] | None) -> None:
        """A node's allocatable (None: the node is gone or being deleted)."""
        if allocatable is None:
            if self.nodes.pop(name, None) is None:
                return
        else:
            res = r.of_quantities(allocatable)
            if self.nodes.get(name) == res:  # a status update that left the allocatable alone
                return
            self.nodes[name] = res
        total: Res = {}
        for res in self.nodes.values():
            total = r.add(total, res)
        self.set_cluster_total(total)

    def set_cluster_total(self, total: Mapping[str, int]) -> None:
        self.cluster_total = dict(total)  # the root's calculator compares the root total it last split

    # --- pods (docs/rules/scheduler-elasticquota.md#pod-accounting) ---------------------------------------
    def _apply(self, info: QuotaInfo, e: PodEntry, sign: int, request: bool, used: bool) -> None:
        delta = {n: sign * v for n, v in e.charge.items()}
        if request:
            self._move(info, "request", delta)
            if e.non_preemptible:
                self._move(info, "np_request", delta)
        if used:
            self._move(info, "used", delta)
            if e.non_preemptible:
                self._move(info, "np_used", delta)

    def _move(self, info: QuotaInfo, what: str, delta: Res) -> None:
        """The own sum ``self_<what>`` moves by ``delta`` (clamped at 0); the tree gets the actual change."""
        old: Res = getattr(info, "self_" + what)
        new = r.clamp_non_negative(r.add(old, delta))
        setattr(info, "self_" + what, new)
        self.tree.moved(info.name, what, {n: new[n] - old.get(n, 0) for n in delta})

    def _charge(self, info: QuotaInfo, key: str, pod: Mapping[str, Any], assigned: bool) -> PodEntry:
        e = PodEntry(pod, pod_charge(pod, info.max), is_pod_non_preemptible(pod), assigned)
        info.pods[key] = e
        self._apply(info, e, 1, True, assigned)
        return e

    def on_pod_add(self, quota: str, pod: Mapping[str, Any]) -> None:
        info = self.quotas.get(quota)
        if info is None or pod_key(pod) in info.pods:
            return
        self._charge(info, pod_key(pod), pod, _bound(pod))

    def on_pod_update(
        self, old_quota: str, new_quota: str, old: Mapping[str, Any], new: Mapping[str, Any]
    ) -> None:
        if old_quota != new_quota:
            self.on_pod_delete(old_quota, old)
            self.on_pod_add(new_quota, new)
            return
        info = self.quotas.get(new_quota)
        if info is None:
            return
        key = pod_key(new)
        e = info.pods.get(key)
        if e is None:
            self._charge(info, key, new, _bound(new))
            return
        assign = e.assigned or _bound(new)  # a terminated assigned pod keeps its used until deleted
        if pod_charge(new, info.max) == e.charge and is_pod_non_preemptible(new) == e.non_preemptible:
            e.pod = new  # the usual update (bound, status): at most the used moves
            if assign and not e.assigned:
                e.assigned = True
                self._apply(info, e, 1, False, True)
            return
        self._apply(info, e, -1, True, e.assigned)
        self._charge(info, key, new, assign)

    def on_pod_delete(self, quota: str, pod: Mapping[str, Any]) -> None:
        info = self.quotas.get(quota)
        e = None if info is None else info.pods.pop(pod_key(pod), None)
        if info is not None and e is not None:
            self._apply(info, e, -1, True, e.assigned)

    def reserve(self, quota: str, pod: Mapping[str, Any]) -> None:
        info = self.quotas.get(quota)
        e = None if info is None else info.pods.get(pod_key(pod))
        if info is None or e is None or e.assigned:
            return
        e.assigned = True
        self._apply(info, e, 1, False, True)

    def unreserve(self, quota: str, pod: Mapping[str, Any]) -> None:
        info = self.quotas.get(quota)
        e = None if info is None else info.pods.get(pod_key(pod))
        if info is None or e is None or not e.assigned:
            return
        e.assigned = False
        self._apply(info, e, -1, False, True)

    # --- the derived state (scheduler.plugins.elasticquota.tree) -------------------------------------------
    def invalidate(self) -> None:
        """Own sums were set directly (koord simulate's ``runtime``): the next read sums the tree again."""
        self.tree.invalidate()

    def refresh(self) -> None:
        """Every quota's derived state up to date (the status loop, the metrics and the revoke read all)."""
        self.tree.refresh_all()

    def root_total(self) -> Res:
        """The cluster total less the used of the system and default quotas."""
        self.tree.build()
        special: Res = {}
        for name in SPECIAL_CHILDREN:
            info = self.quotas.get(name)
            if info is not None:
                special = r.add(special, info.used)
        return r.subtract(self.cluster_total, special)

    def info(self, name: str) -> QuotaInfo | None:
        """The quota with its path's runtime refreshed (None: unknown)."""
        self.tree.refresh_path(name)
        return self.quotas.get(name)

    def refresh_runtime(self, name: str) -> Res | None:
        """``RefreshRuntime``: the runtime masked to the quota's max; the root's total for the root; the
        max for the system and default quotas; None for an unknown quota."""
        info = self.info(name)
        if info is None:
            return None
        if name == ROOT_QUOTA:
            return self.root_total()
        if name in SPECIAL_CHILDREN:
            return dict(info.max)
        return info.masked_runtime()


def _bound(pod: Mapping[str, Any]) -> bool:
    node = spec(pod).get("nodeName")
    return isinstance(node, str) and node != "" and not is_terminated(pod)
