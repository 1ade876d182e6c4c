"""The group quota manager of one quota tree: the quotas and their parent links, the pods charged to each
quota (docs/rules/scheduler-elasticquota.md#pod-accounting), the propagation of requests and used to the
ancestors (docs/rules/scheduler-elasticquota.md#propagation-to-ancestors), the cluster total from node
allocatable, and the runtime of every quota in the steady state
(docs/rules/scheduler-elasticquota.md#top-down-evaluation).

Pod events keep each quota's own sums up to date in O(resources); the tree's derived state (requests,
used, runtime) is recomputed in O(quotas × resources) on the first read after a change.
Imports: the standard library, apis (elasticquota, pod, quantity) and this package. Not thread-safe: the
plugin serialises calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apis.elasticquota import (
    DEFAULT_QUOTA,
    ROOT_QUOTA,
    SYSTEM_QUOTA,
    ElasticQuota,
    is_pod_non_preemptible,
    pod_quota_label,
)
from apis.pod import is_terminated, metadata, pod_key, pod_requests, spec
from apis.quantity import Quantity
from scheduler.plugins.elasticquota import resources as r
from scheduler.plugins.elasticquota.args import ElasticQuotaArgs
from scheduler.plugins.elasticquota.calculator import TreeNode, tree_runtime
from scheduler.plugins.elasticquota.resources import Res

SPECIAL_CHILDREN = (SYSTEM_QUOTA, DEFAULT_QUOTA)


def pod_charge(pod: Mapping[str, Any], names: Mapping[str, object]) -> Res:
    """The pod's effective request in core units, masked to ``names`` (a quota's max)."""
    return {n: r.to_int(n, q) for n, q in pod_requests(pod).items() if n in names}


def pod_request_quantities(pod: Mapping[str, Any], names: Mapping[str, object]) -> dict[str, Quantity]:
    return {n: q for n, q in pod_requests(pod).items() if n in names}


@dataclass(slots=True)
class PodEntry:
    pod: Mapping[str, Any]
    charge: Res
    non_preemptible: bool
    assigned: bool


@dataclass(slots=True)
class QuotaInfo:
    """One quota's state. ``self_*`` are the sums over its own pods; the others include descendants."""

    quota: ElasticQuota
    max: Res
    min: Res
    shared_weight: Res
    pods: dict[str, PodEntry] = field(default_factory=dict)
    self_request: Res = field(default_factory=dict)
    self_used: Res = field(default_factory=dict)
    self_np_request: Res = field(default_factory=dict)
    self_np_used: Res = field(default_factory=dict)
    request: Res = field(default_factory=dict)
    child_request: Res = field(default_factory=dict)
    used: Res = field(default_factory=dict)
    np_request: Res = field(default_factory=dict)
    np_used: Res = field(default_factory=dict)
    runtime: Res = field(default_factory=dict)
    auto_scale_min: Res = field(default_factory=dict)
    guaranteed: Res = field(default_factory=dict)
    allocated: Res = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.quota.name

    @property
    def parent(self) -> str:
        return self.quota.parent

    def limited_request(self) -> Res:
        return r.limited(self.request, self.max)

    def masked_runtime(self) -> Res:
        return r.mask(self.runtime, self.max)


def _info(quota: ElasticQuota) -> QuotaInfo:
    return QuotaInfo(
        quota,
        r.of_quantities(quota.max),
        r.of_quantities(quota.min),
        r.of_quantities(quota.effective_shared_weight),
    )


class GroupQuotaManager:
    def __init__(self, args: ElasticQuotaArgs, tree_id: str = "") -> None:
        self.args = args
        self.tree_id = tree_id
        root = ElasticQuota(ROOT_QUOTA, parent="", is_parent=True)
        self.quotas: dict[str, QuotaInfo] = {ROOT_QUOTA: _info(root)}
        if tree_id == "":
            self.quotas[SYSTEM_QUOTA] = _info(
                ElasticQuota(SYSTEM_QUOTA, max=dict(args.system_quota_group_max))
            )
            self.quotas[DEFAULT_QUOTA] = _info(
                ElasticQuota(DEFAULT_QUOTA, max=dict(args.default_quota_group_max))
            )
        self.cluster_total: Res = {}
        self.nodes: dict[str, Res] = {}
        self._dirty = True

    # --- quotas ------------------------------------------------------------------------------------------
    def upsert_quota(self, quota: ElasticQuota) -> None:
        """Adds or replaces a quota; its pods stay and are re-charged against the new max."""
        if quota.name == ROOT_QUOTA:
            return
        old = self.quotas.get(quota.name)
        info = _info(quota)
        if old is not None:
            for key, e in old.pods.items():
                self._charge(info, key, e.pod, e.assigned)
        self.quotas[quota.name] = info
        self._dirty = True

    def delete_quota(self, name: str) -> None:
        if name in (ROOT_QUOTA, SYSTEM_QUOTA, DEFAULT_QUOTA):
            return
        if self.quotas.pop(name, None) is not None:
            self._dirty = True

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
            self.nodes.pop(name, None)
        else:
            self.nodes[name] = r.of_quantities(allocatable)
        total: Res = {}
        for res in self.nodes.values():
            total = r.add(total, res)
        self.set_cluster_total(total)

    def set_cluster_total(self, total: Mapping[str, int]) -> None:
        self.cluster_total = dict(total)
        self._dirty = True

    # --- pods (docs/rules/scheduler-elasticquota.md#pod-accounting) ---------------------------------------
    def _apply(self, info: QuotaInfo, e: PodEntry, sign: int, request: bool, used: bool) -> None:
        delta = {n: sign * v for n, v in e.charge.items()}
        if request:
            info.self_request = r.clamp_non_negative(r.add(info.self_request, delta))
            if e.non_preemptible:
                info.self_np_request = r.clamp_non_negative(r.add(info.self_np_request, delta))
        if used:
            info.self_used = r.clamp_non_negative(r.add(info.self_used, delta))
            if e.non_preemptible:
                info.self_np_used = r.clamp_non_negative(r.add(info.self_np_used, delta))
        if request or self._dirty or info.name in SPECIAL_CHILDREN:
            self._dirty = True  # requests move the runtime; the special quotas' used the root total
            return
        # used alone does not move any runtime: it is added along the path, no recomputation
        for name in self.path_to_root(info.name):
            q = self.quotas[name]
            q.used = r.clamp_non_negative(r.add(q.used, delta))
            if e.non_preemptible:
                q.np_used = r.clamp_non_negative(r.add(q.np_used, delta))

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

    # --- the derived state --------------------------------------------------------------------------------
    def children(self) -> dict[str, list[str]]:
        kids: dict[str, list[str]] = {}
        for name in sorted(self.quotas):
            if name != ROOT_QUOTA:
                kids.setdefault(self.quotas[name].parent, []).append(name)
        return kids

    def refresh(self) -> None:
        """Recomputes requests, used and runtime of every quota when something changed since the last."""
        if not self._dirty:
            return
        kids = self.children()
        seen: set[str] = set()
        self._aggregate(ROOT_QUOTA, kids, seen)
        # quotas whose parent does not exist (yet): their subtrees count for themselves only
        for name in sorted(self.quotas):
            if name not in seen and self.quotas[name].parent not in self.quotas:
                self._aggregate(name, kids, seen)
        for name in sorted(self.quotas):  # what is left is a parent cycle
            if name not in seen:
                self._aggregate(name, kids, seen)
        root = self.quotas[ROOT_QUOTA]
        root.child_request = {}
        sharing = {p: [c for c in cs if c not in SPECIAL_CHILDREN] for p, cs in kids.items()}
        ordinary = [q for q in self.quotas.values() if q.name not in (ROOT_QUOTA, *SPECIAL_CHILDREN)]
        keys = sorted({n for q in ordinary for n in q.max})
        nodes = {
            q.name: TreeNode(
                q.name, q.max, q.min, q.shared_weight, q.limited_request(), q.quota.allow_lent_resource
            )
            for q in self.quotas.values()
        }
        scale = self.args.enable_min_quota_scale
        tree = tree_runtime(ROOT_QUOTA, self.root_total(), keys, sharing, nodes, scale)
        for q in self.quotas.values():
            if q.name in (ROOT_QUOTA, *SPECIAL_CHILDREN):
                continue
            q.runtime = tree.runtime.get(q.name, {})
            q.auto_scale_min = tree.auto_scale_min.get(q.name, dict(q.min))
        self._dirty = False

    def _aggregate(self, name: str, kids: Mapping[str, list[str]], seen: set[str]) -> None:
        """Post-order: a quota's request, child request and used from its pods and its children."""
        seen.add(name)
        q = self.quotas[name]
        child_request, used = dict(q.self_request), dict(q.self_used)
        np_request, np_used = dict(q.self_np_request), dict(q.self_np_used)
        limited_sum: Res = {}
        for c in kids.get(name, ()):
            if c in seen:  # a parent cycle: left out
                continue
            self._aggregate(c, kids, seen)
            child = self.quotas[c]
            limited_sum = r.add(limited_sum, child.limited_request())
            used, np_used = r.add(used, child.used), r.add(np_used, child.np_used)
            np_request = r.add(np_request, child.np_request)
        q.used, q.np_used, q.np_request = used, np_used, np_request
        if name == ROOT_QUOTA:
            q.request = limited_sum
            return
        q.child_request = r.add(child_request, limited_sum)
        request = dict(q.child_request)
        if not q.quota.allow_lent_resource:
            for n, m in q.min.items():
                request[n] = max(request.get(n, m), m)
        q.request = request

    def root_total(self) -> Res:
        """The cluster total less the used of the system and default quotas."""
        special: Res = {}
        for name in SPECIAL_CHILDREN:
            info = self.quotas.get(name)
            if info is not None:
                special = r.add(special, info.used)
        return r.subtract(self.cluster_total, special)

    def info(self, name: str) -> QuotaInfo | None:
        self.refresh()
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

    def path_to_root(self, name: str) -> list[str]:
        """The quota, its parent, … up to and including the root (stops at a missing link or a cycle)."""
        path: list[str] = []
        while name in self.quotas and name not in path:
            path.append(name)
            if name == ROOT_QUOTA:
                break
            name = self.quotas[name].parent
        return path


def _bound(pod: Mapping[str, Any]) -> bool:
    node = spec(pod).get("nodeName")
    return isinstance(node, str) and node != "" and not is_terminated(pod)
