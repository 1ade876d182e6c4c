"""The quota tree's derived state (docs/rules/scheduler-elasticquota.md#performance): every quota's
requests and used summed over its descendants (docs/rules/scheduler-elasticquota.md#propagation-to-ancestors),
kept up to date by moving a change of a quota's own sums along its path to the root (O(depth)), and the
runtime (docs/rules/scheduler-elasticquota.md#top-down-evaluation), computed on demand along the path from
the root to the quota asked for: each parent on the way runs its calculator again only when one of its
children's limited requests, or its own amount, changed since it last ran.

A change of the tree's shape (a quota added, replaced with another spec or deleted) makes the state stale;
the next read sums the whole tree again, post-order, in the order the rules define for a tree whose parent
links are broken (docs/rules/scheduler-elasticquota.md#edge-cases), and forgets every calculator's result.
Imports: the standard library, apis (elasticquota) and this package. Not thread-safe (the manager's caller
serialises).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from apis.elasticquota import ROOT_QUOTA
from scheduler.plugins.elasticquota import resources as r
from scheduler.plugins.elasticquota.calculator import TreeNode, split
from scheduler.plugins.elasticquota.quotainfo import SPECIAL_CHILDREN, QuotaInfo
from scheduler.plugins.elasticquota.resources import Res


@dataclass(slots=True)
class _Split:
    """What one parent's calculator last ran on: its children's version and its amount's token."""

    version: int
    total: object


class QuotaTree:
    def __init__(self, quotas: dict[str, QuotaInfo], root_total: Callable[[], Res], scale_min: bool) -> None:
        """``quotas`` is the manager's own map (read, and the derived fields written); ``root_total`` gives
        the amount the root's children share."""
        self.quotas = quotas
        self.root_total = root_total
        self.scale_min = scale_min
        self.built = False
        self._agg_parent: dict[str, str] = {}  # quota → the quota its sums are added to (none: absent)
        self._sharing: dict[str, list[str]] = {}  # parent → its children taking part in its calculator
        self._keys: dict[str, list[str]] = {}  # parent → the resource names its calculator splits
        self._reachable: set[str] = set()  # the root and the quotas its calculators reach
        self._version: dict[str, int] = {}  # parent → bumped when a sharing child's limited request moves
        self._runtime_version: dict[str, int] = {}  # quota → bumped when its runtime changes
        self._splits: dict[str, _Split] = {}

    def invalidate(self) -> None:
        """The tree's shape (or a quota's own sums, set directly) changed: the next read rebuilds."""
        self.built = False

    # --- the shape and the sums ----------------------------------------------------------------------------
    def build(self) -> None:
        """Sums every quota's requests and used again and forgets the calculators' results, when stale."""
        if self.built:
            return
        kids: dict[str, list[str]] = {}
        for name in sorted(self.quotas):
            if name != ROOT_QUOTA:
                kids.setdefault(self.quotas[name].parent, []).append(name)
        seen: set[str] = set()
        self._agg_parent = {}
        post: list[str] = []
        self._visit(ROOT_QUOTA, kids, seen, post)
        # quotas whose parent does not exist (yet): their subtrees count for themselves only
        for name in sorted(self.quotas):
            if name not in seen and self.quotas[name].parent not in self.quotas:
                self._visit(name, kids, seen, post)
        for name in sorted(self.quotas):  # what is left is a parent cycle
            if name not in seen:
                self._visit(name, kids, seen, post)
        agg_kids: dict[str, list[str]] = {}
        for child, parent in self._agg_parent.items():
            agg_kids.setdefault(parent, []).append(child)
        for name in post:  # children before their parent
            self._sum(name, agg_kids.get(name, ()))
        self._sharing = {p: [c for c in cs if c not in SPECIAL_CHILDREN] for p, cs in kids.items()}
        ordinary = [q for q in self.quotas.values() if q.name not in (ROOT_QUOTA, *SPECIAL_CHILDREN)]
        self._keys = {p: sorted(self.quotas[p].max) for p in self._sharing if p in self.quotas}
        self._keys[ROOT_QUOTA] = sorted({n for q in ordinary for n in q.max})
        self._reachable = {ROOT_QUOTA}
        frontier = [ROOT_QUOTA]
        while frontier:
            frontier = [c for p in frontier for c in self._sharing.get(p, ())]
            self._reachable.update(frontier)
        for q in ordinary:
            if q.name not in self._reachable:  # no calculator ever splits for it
                q.runtime, q.auto_scale_min = {}, dict(q.min)
        self._version, self._runtime_version, self._splits = {}, {}, {}
        self.built = True

    def _visit(self, start: str, kids: dict[str, list[str]], seen: set[str], post: list[str]) -> None:
        """Depth-first from ``start`` over the children in name order; a child already seen (a parent
        cycle, or a subtree visited earlier on its own) is left out of its parent's sums."""
        seen.add(start)
        stack: list[tuple[str, Iterator[str]]] = [(start, iter(kids.get(start, ())))]
        while stack:
            name, it = stack[-1]
            for c in it:
                if c not in seen:
                    seen.add(c)
                    self._agg_parent[c] = name
                    stack.append((c, iter(kids.get(c, ()))))
                    break
            else:
                stack.pop()
                post.append(name)

    def _sum(self, name: str, children: list[str] | tuple[()]) -> None:
        q = self.quotas[name]
        child_request, used = dict(q.self_request), dict(q.self_used)
        np_request, np_used = dict(q.self_np_request), dict(q.self_np_used)
        limited_sum: Res = {}
        for c in children:
            child = self.quotas[c]
            limited_sum = r.add(limited_sum, child.limited_request())
            used, np_used = r.add(used, child.used), r.add(np_used, child.np_used)
            np_request = r.add(np_request, child.np_request)
        q.used, q.np_used, q.np_request = used, np_used, np_request
        if name == ROOT_QUOTA:  # the root's request is its children's; its own pods do not count
            q.request, q.child_request = limited_sum, {}
            return
        q.child_request = r.add(child_request, limited_sum)
        q.request = dict(q.child_request)
        if not q.quota.allow_lent_resource:
            for n, m in q.min.items():
                q.request[n] = max(q.request.get(n, m), m)

    # --- a quota's own sums moved -------------------------------------------------------------------------
    def moved(self, name: str, what: str, change: Res) -> None:
        """Quota ``name``'s own ``self_<what>`` changed by ``change`` (a new name listed, even at 0):
        the ancestors' sums follow along the path (nothing to do while the tree is stale)."""
        if not self.built:
            return
        if what == "request":
            self._request_moved(name, change)
            return
        x: str | None = name
        while x is not None:
            target: Res = getattr(self.quotas[x], what)
            change = {k: v for k, v in change.items() if v or k not in target}
            if not change:  # an ancestor's names include its descendants'
                return
            for k, v in change.items():
                target[k] = target.get(k, 0) + v
            x = self._agg_parent.get(x)

    def _request_moved(self, name: str, change: Res) -> None:
        """The own request moved: the child request and request of the quota, then its limited request's
        change into its parent's child request, level by level while something still moves. A sharing
        child's limited request moving makes its parent's calculator stale."""
        x, d = name, change
        if x == ROOT_QUOTA:
            return
        while True:
            q = self.quotas[x]
            before = {k: q.request.get(k) for k in d}
            lend = q.quota.allow_lent_resource
            for k, v in d.items():
                cr = q.child_request.get(k, 0) + v
                q.child_request[k] = cr
                q.request[k] = cr if lend or k not in q.min else max(cr, q.min[k])
            parent = self._agg_parent.get(x)
            if parent is None:
                return
            pq = self.quotas[parent]
            target = pq.request if parent == ROOT_QUOTA else pq.child_request
            up: Res = {}
            for k in d:
                old = before[k]
                delta = _limited(q, k, q.request[k]) - (0 if old is None else _limited(q, k, old))
                if delta or k not in target:
                    up[k] = delta
            if not up:
                return
            if x not in SPECIAL_CHILDREN:
                self._version[parent] = self._version.get(parent, 0) + 1
            if parent == ROOT_QUOTA:
                for k, v in up.items():
                    target[k] = target.get(k, 0) + v
                return
            x, d = parent, up

    # --- the runtime, on demand ---------------------------------------------------------------------------
    def refresh_path(self, name: str) -> None:
        """Brings the runtime and scaled min of ``name`` up to date: the calculators of its ancestors run
        top-down from the root, each only when stale."""
        self.build()
        if name not in self._reachable or name == ROOT_QUOTA:
            return
        chain: list[str] = []
        x = name
        while x != ROOT_QUOTA:
            x = self.quotas[x].parent
            chain.append(x)
        for parent in reversed(chain):
            self._split(parent)

    def refresh_all(self) -> None:
        """Every quota's runtime up to date (the status loop, the metrics and the revoke read them all)."""
        self.build()
        frontier = [ROOT_QUOTA]
        while frontier:
            for parent in frontier:
                self._split(parent)
            frontier = [c for p in frontier for c in self._sharing.get(p, ()) if c in self._sharing]

    def _split(self, parent: str) -> None:
        kids = self._sharing.get(parent)
        if not kids:
            return
        # the root's amount is compared by value; any other parent's by its runtime's version, so that a
        # runtime set from outside (a scenario's override) is split only once its own parent moves it
        if parent == ROOT_QUOTA:
            total = self.root_total()
            token: object = total
        else:
            total, token = self.quotas[parent].runtime, self._runtime_version.get(parent, 0)
        version = self._version.get(parent, 0)
        done = self._splits.get(parent)
        if done is not None and done.version == version and done.total == token:
            return
        nodes = [
            TreeNode(c, q.max, q.min, q.shared_weight, q.limited_request(), q.quota.allow_lent_resource)
            for c, q in ((c, self.quotas[c]) for c in kids)
        ]
        runtime, mins = split(total, self._keys[parent], nodes, self.scale_min)
        for c in kids:
            q = self.quotas[c]
            if q.runtime != runtime[c]:
                q.runtime = runtime[c]
                self._runtime_version[c] = self._runtime_version.get(c, 0) + 1
            q.auto_scale_min = mins[c]
        self._splits[parent] = _Split(version, token)


def _limited(q: QuotaInfo, name: str, value: int) -> int:
    """``limited(q)`` of one resource (docs/rules/scheduler-elasticquota.md#propagation-to-ancestors)."""
    return min(value, q.max[name]) if name in q.max else value
