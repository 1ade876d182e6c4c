"""The scheduling snapshot: every node of the cluster, one per row (row i is node i in every array),
its pods, and int64 matrices of allocatable and requested resources, so plugins can filter and score a
pod against all nodes in one numpy pass. The matrices are resource-major, ``(resources, nodes)``:
``allocatable[col["cpu"]]`` is one contiguous array over every node.

Rows are a uniformly random permutation of the nodes, kept so in O(1) per node joining or leaving
(`apply_nodes`, scheduler.framework.rows, docs/scheduler-scale.md#node-list): the matrices are views
of length n into buffers with spare capacity, and every view follows a `RowChange`. `build` (scenario
files, tests) orders rows by node name; `Snapshot(infos)` and `rebuild` keep the order they are given.

Resource values are in snapshot units (scheduler.framework.units). Every row also carries its pods'
non-zero cpu and memory requests (`nonzero`, scheduler.framework.nonzero). A new resource name adds a
column (a rare full rebuild of the matrices).

Plugins keep what they derive from Node objects as row-aligned data owned by the snapshot
(`column` for one value per node, `view` for anything richer): the snapshot re-derives exactly the
rows it re-copies, so no plugin tracks which nodes changed.
Imports: the standard library, numpy, apis (gonum, kubeobjects, quantity, pod), scheduler.framework
(nodecolumn, nonzero, rows, units).
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

import numpy as np
import numpy.typing as npt

from apis.gonum import wrap_int64
from apis.kubeobjects import Node, Pod
from apis.pod import pod_key, pod_requests
from apis.quantity import parse_resource_list
from scheduler.framework.nodecolumn import NodeColumn as NodeColumn  # re-exported
from scheduler.framework.nonzero import nonzero_requests
from scheduler.framework.rows import RowChange as RowChange  # re-exported: views import it from here
from scheduler.framework.rows import move_rows
from scheduler.framework.units import to_values

I64 = npt.NDArray[np.int64]
BASE_RESOURCES: tuple[str, ...] = ("cpu", "memory")


@dataclass(slots=True)
class PodInfo:
    """A pod as the scheduler keeps it: the object, its effective requests in snapshot units and its
    non-zero (cpu, memory) requests."""

    key: str
    pod: Pod
    requests: dict[str, int]
    nonzero: tuple[int, int]

    @classmethod
    def of(cls, pod: Pod) -> PodInfo:
        requests = to_values(pod_requests(pod))
        return cls(pod_key(pod), pod, requests, nonzero_requests(pod, requests))

    @property
    def node_name(self) -> str:
        return str(self.pod.get("spec", {}).get("nodeName") or "")


@dataclass(slots=True)
class NodeInfo:
    """One node and the pods on it (bound and assumed): their requests summed (`requested`) and their
    non-zero cpu and memory requests summed (`nonzero`). `generation` grows on every change."""

    name: str
    node: Node
    allocatable: dict[str, int] = field(default_factory=dict)
    pods: dict[str, PodInfo] = field(default_factory=dict)
    requested: dict[str, int] = field(default_factory=dict)
    generation: int = 0
    nonzero: tuple[int, int] = (0, 0)

    def copy(self) -> NodeInfo:
        """A NodeInfo whose pods either can gain or lose without the other seeing it (PodInfos, the
        pod/node dicts and `allocatable` are shared: replaced — `set_node` — never mutated)."""
        return NodeInfo(
            self.name, self.node, self.allocatable, self.pods.copy(), self.requested.copy(),
            self.generation, self.nonzero,
        )  # fmt: skip

    @classmethod
    def of(cls, node: Node, generation: int = 0) -> NodeInfo:
        alloc = parse_resource_list(node.get("status", {}).get("allocatable") or {})
        return cls(node["metadata"]["name"], node, to_values(alloc), generation=generation)

    def set_node(self, node: Node, generation: int) -> None:
        self.node = node
        self.allocatable = to_values(parse_resource_list(node.get("status", {}).get("allocatable") or {}))
        self.generation = generation

    def add_pod(self, info: PodInfo, generation: int) -> None:
        if info.key in self.pods:
            self.remove_pod(info.key, generation)
        self.pods[info.key] = info
        for r, v in info.requests.items():
            self.requested[r] = wrap_int64(self.requested.get(r, 0) + v)
        nz = self.nonzero
        self.nonzero = (wrap_int64(nz[0] + info.nonzero[0]), wrap_int64(nz[1] + info.nonzero[1]))
        self.generation = generation

    def remove_pod(self, key: str, generation: int) -> PodInfo | None:
        info = self.pods.pop(key, None)
        if info is not None:
            for r, v in info.requests.items():
                self.requested[r] = wrap_int64(self.requested.get(r, 0) - v)
            nz = self.nonzero
            self.nonzero = (wrap_int64(nz[0] - info.nonzero[0]), wrap_int64(nz[1] - info.nonzero[1]))
            self.generation = generation
        return info


class RowView(Protocol):
    """Data a plugin keeps aligned to a snapshot's rows (registered with `Snapshot.view`).
    `reads_pods`: whether the data depends on the rows' pods too; when not, `refresh` gets only the
    rows whose Node object was replaced."""

    reads_pods: bool

    def rebuild(self, snapshot: Snapshot) -> None:
        """Every row (new rows or columns)."""
        ...

    def refresh(self, snapshot: Snapshot, rows: Sequence[int]) -> None:
        """Only `rows` (same layout): their NodeInfos were re-copied."""
        ...


class ResizableRowView(RowView, Protocol):
    """A `RowView` that follows nodes added and removed in place. `resize` puts the view's row-aligned
    data in the new layout (`change.array`/`change.list` do the moving) and drops what the removed rows
    contributed; the snapshot then calls `refresh` with `change.added` (joined, in one call with the
    rows re-copied in the same update, ascending). A view without `resize` is rebuilt instead
    (correct, O(n)). docs/scheduler-scale.md#node-list"""

    def resize(self, snapshot: Snapshot, change: RowChange) -> None: ...


V = TypeVar("V", bound=RowView)


class Snapshot:
    """Columnar view of the nodes for scheduling cycles. `layout` changes whenever rows or columns
    change; the views registered with `view` follow every change themselves. `rng` (seeded by `seed`,
    so runs repeat) places the nodes that join (docs/scheduler-scale.md#node-list)."""

    def __init__(
        self, infos: Iterable[NodeInfo] = (), resources: Iterable[str] = BASE_RESOURCES, seed: int = 0
    ) -> None:
        self.rng = random.Random(seed)
        self.layout = 0
        self.infos: list[NodeInfo] = []
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        # each row's node name's rank in name order: ties between nodes are broken in name order
        # whatever the rows' order (docs/architecture.md#ties-between-nodes)
        self.name_rank: I64 = np.zeros(0, np.int64)
        self._sorted_names: list[str] = []
        self.resources: tuple[str, ...] = ()
        self.col: dict[str, int] = {}
        # The first n rows of buffers with spare rows (`_allocate`, `RowChange.array`).
        self.allocatable: I64 = np.zeros((0, 0), np.int64)  # (resources, nodes)
        self.requested: I64 = np.zeros((0, 0), np.int64)  # (resources, nodes)
        self.pod_count: I64 = np.zeros(0, np.int64)
        self.nonzero: I64 = np.zeros((2, 0), np.int64)  # the pods' non-zero cpu (row 0) and memory (row 1)
        self.nodes: list[Node] = []  # the Node object each row was last copied from
        self._views: dict[Hashable, RowView] = {}
        # During `refresh`'s calls of the views: each re-copied row's NodeInfo before it (what the views
        # hold), and the pod changes computed from it (`pod_changes`).
        self._prior: dict[int, NodeInfo] = {}
        self._changes: dict[int, tuple[list[str], list[str]]] = {}
        self.rebuild(list(infos), resources)

    @property
    def n(self) -> int:
        return len(self.infos)

    @classmethod
    def build(cls, nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]] = ()) -> Snapshot:
        """A snapshot of nodes and the pods assigned to them (pods on unknown nodes are ignored), rows in
        node name order.

        Takes the objects as a scenario file or a test writes them (any JSON object; typed ones pass):
        this is their boundary, as the informers are the cluster's."""
        infos = {n["metadata"]["name"]: NodeInfo.of(cast(Node, n)) for n in nodes}
        for p in pods:
            info = PodInfo.of(cast(Pod, p))
            node = infos.get(info.node_name)
            if node is not None:
                node.add_pod(info, 0)
        return cls(sorted(infos.values(), key=lambda i: i.name))

    def rebuild(self, infos: list[NodeInfo], resources: Iterable[str] = BASE_RESOURCES) -> None:
        """New rows (in the order given) and columns; copies every row and rebuilds every view."""
        self.infos = list(infos)
        self.names = [i.name for i in self.infos]
        self.index = {name: i for i, name in enumerate(self.names)}
        self._sorted_names = sorted(self.names)
        rank_of = {name: r for r, name in enumerate(self._sorted_names)}
        self.name_rank = np.fromiter((rank_of[x] for x in self.names), np.int64, len(self.names))
        names = {*resources, *BASE_RESOURCES}  # cpu and memory always have a column
        for info in self.infos:
            names.update(info.allocatable)
            names.update(info.requested)
        self.resources = tuple(sorted(names))
        self.col = {r: j for j, r in enumerate(self.resources)}
        n = len(self.infos)
        self._allocate(len(self.resources), n)
        self.nodes = [info.node for info in self.infos]
        self._copy_rows(list(range(n)))
        self.layout += 1
        for v in self._views.values():
            v.rebuild(self)

    def _allocate(self, r: int, n: int) -> None:
        """Zeroed matrices of `n` rows, views of buffers with spare rows past the end, so nodes joining
        later are written in place (`RowChange.array`)."""
        capacity = n + max(16, n // 8)
        self.allocatable = np.zeros((r, capacity), np.int64)[:, :n]
        self.requested = np.zeros((r, capacity), np.int64)[:, :n]
        self.pod_count = np.zeros(capacity, np.int64)[:n]
        self.nonzero = np.zeros((2, capacity), np.int64)[:, :n]

    def _copy_rows(self, rows: list[int], alloc: list[int] | None = None) -> None:
        """`rows` from their NodeInfos through the public matrices (views of the buffers), a column per
        call (a cycle re-copies a few rows: numpy's per-call cost rules); allocatable only `alloc`'s."""
        infos, resources, zeros = self.infos, self.resources, [0] * len(self.resources)
        # One numpy assignment per matrix for all the rows (rows are distinct), not one per row
        some = rows if alloc is None else alloc
        if some:
            self.allocatable[:, some] = np.array(
                [list(map(infos[i].allocatable.get, resources, zeros)) for i in some], np.int64
            ).T
        if not rows:
            return
        held = [infos[i] for i in rows]
        self.requested[:, rows] = np.array(
            [list(map(info.requested.get, resources, zeros)) for info in held], np.int64
        ).T
        self.pod_count[rows] = [len(info.pods) for info in held]
        self.nonzero[:, rows] = np.array([info.nonzero for info in held], np.int64).T
        nodes = self.nodes
        for i, info in zip(rows, held, strict=True):
            nodes[i] = info.node

    def _has_columns(self, infos: Iterable[NodeInfo]) -> bool:
        col = self.col.keys()
        return all(info.allocatable.keys() <= col and info.requested.keys() <= col for info in infos)

    def refresh(self, changed: Iterable[NodeInfo]) -> None:
        """Re-copies the rows of changed NodeInfos already in the snapshot (same node set). A resource
        name without a column triggers one full rebuild that includes every changed row."""
        infos = list(changed)
        held, index, prior = self.infos, self.index, self._prior
        rows: list[int] = []
        for info in infos:
            i = index[info.name]
            if i not in prior:  # a row named twice: its first NodeInfo is what the views hold
                prior[i] = held[i]
                rows.append(i)
            held[i] = info
        try:
            if not self._has_columns(infos):
                self.rebuild(held, self.resources)
                return
            replaced = self._recopy(rows, prior)
            for v in self._views.values():
                if v.reads_pods:
                    v.refresh(self, rows)
                elif replaced:
                    v.refresh(self, replaced)
        finally:
            prior.clear()
            self._changes.clear()

    def pod_changes(self, i: int, held: Iterable[str]) -> tuple[Iterable[str], Iterable[str]]:
        """While views refresh re-copied row `i` (`refresh`, `apply_nodes`): the keys of its pods gone or
        replaced (a new PodInfo) since the NodeInfo the views hold, and of those new or replaced, so a
        view touches only them. Otherwise, or when the NodeInfo is the same, every candidate: the keys
        the view `held` and the row's pods' (the view compares each)."""
        found = self._changes.get(i)
        if found is None:
            old, new = self._prior.get(i), self.infos[i]
            if old is None or old is new:
                return list(held), new.pods
            a, b = old.pods, new.pods
            a_get, b_get = a.get, b.get  # (bound once: two lookups saved per pod of the row)
            found = self._changes[i] = (
                [k for k, pi in a.items() if b_get(k) is not pi],
                [k for k, pi in b.items() if a_get(k) is not pi],
            )
        return found

    def _recopy(self, rows: list[int], prior: dict[int, NodeInfo] | None = None) -> list[int]:
        """Re-copies `rows`; returns those whose Node object is new. Given each row's `prior` NodeInfo,
        allocatable only where its dict is new (they are replaced, never mutated: set_node)."""
        infos, alloc = self.infos, None
        replaced = [i for i in rows if infos[i].node is not self.nodes[i]]
        if prior is not None:
            alloc = [
                i for i in rows if (a := prior[i]) is (b := infos[i]) or a.allocatable is not b.allocatable
            ]
        self._copy_rows(rows, alloc)
        return replaced

    def _rerank(self, removed: Sequence[str], change: RowChange) -> None:
        """`name_rank` after `removed` left and `change.added` joined: O(n) in C per node, no sort."""
        ordered, rank = self._sorted_names, self.name_rank
        for name in removed:
            r = bisect.bisect_left(ordered, name)
            del ordered[r]
            rank[rank > r] -= 1  # (the removed row keeps its rank: `change` drops the row)
        rank = change.array(rank, -1)
        for i in change.added:
            name = self.names[i]
            r = bisect.bisect_left(ordered, name)
            ordered.insert(r, name)
            rank[rank >= r] += 1  # (new rows not ranked yet hold -1)
            rank[i] = r
        self.name_rank = rank

    def apply_nodes(
        self, added: Sequence[NodeInfo], removed: Iterable[str] = (), changed: Sequence[NodeInfo] = ()
    ) -> RowChange:
        """Nodes joined (`added`), left (`removed`, by name) or changed, in place: O(1) rows moved per
        node (scheduler.framework.rows.move_rows: the rows stay a uniformly random permutation), then
        each view's `resize` (or `rebuild`, for a view without one) and `refresh` of the new and
        changed rows. An added node already present counts as changed (a removed one is new again);
        changed nodes not in the snapshot are ignored. A resource name without a
        column rebuilds everything, rows kept in their new order (docs/scheduler-scale.md#node-list)."""
        removed = list(dict.fromkeys(name for name in removed if name in self.index))
        gone = set(removed)
        fresh = {info.name: info for info in added if info.name not in self.index or info.name in gone}
        known = [*changed, *(info for info in added if info.name not in fresh)]
        changed = [info for info in known if info.name in self.index and info.name not in gone]
        if not fresh and not removed:
            self.refresh(changed)
            return RowChange(np.arange(self.n, dtype=np.int64), (), (), (), self.n, self.n)
        change = move_rows(self.names, self.index, removed, list(fresh), self.rng)
        self._rerank(removed, change)
        change.list(self.infos)
        change.list(self.nodes)
        for i in change.added:
            self.infos[i] = fresh[self.names[i]]
        prior = self._prior  # a changed row's NodeInfo before, which its moved view rows hold
        for info in changed:
            i = self.index[info.name]
            prior.setdefault(i, self.infos[i])
            self.infos[i] = info
        try:
            if not self._has_columns([*fresh.values(), *changed]):
                self.rebuild(self.infos, self.resources)
                return change
            self.allocatable, self.requested = change.array(self.allocatable), change.array(self.requested)
            self.pod_count, self.nonzero = change.array(self.pod_count), change.array(self.nonzero)
            rows = list(prior)
            replaced = self._recopy(rows, prior)
            self._copy_rows(list(change.added))
            self.layout += 1
            for v in self._views.values():
                resize = getattr(v, "resize", None)
                if resize is None:
                    v.rebuild(self)  # a view that cannot follow: correct, O(n)
                    continue
                resize(self, change)
                some = sorted({*change.added, *(rows if v.reads_pods else replaced)})
                if some:
                    v.refresh(self, some)
            return change
        finally:
            prior.clear()
            self._changes.clear()

    def view(self, key: Hashable, make: Callable[[], V]) -> V:
        """The view registered under `key`, made (and built) on first use; kept up to date with every
        later `rebuild`/`refresh`/`apply_nodes`. Keys name the plugin and what it keeps."""
        found = self._views.get(key)
        if found is None:
            made = make()
            made.rebuild(self)
            self._views[key] = made
            return made
        return cast(V, found)

    def column(self, key: Hashable, fn: Callable[[Node], Any], dtype: type[Any]) -> npt.NDArray[Any]:
        """`fn(Node object)` of every row as an array (a `NodeColumn` view under `key`)."""
        return self.view(key, lambda: NodeColumn(fn, dtype)).values

    def vector(self, values: Mapping[str, int]) -> I64:
        """A resource vector in column order; resources without a column are dropped."""
        v = np.zeros(len(self.resources), np.int64)
        for r, x in values.items():
            j = self.col.get(r)
            if j is not None:
                v[j] = x
        return v
