"""Helpers shared by the volume plugins (docs/rules/scheduler-volumes.md#lookups): the pod's volumes,
claim lookups with kube's lister error strings, and a snapshot view of the volumes of each row's pods.
Imports: apis.jsonfields, scheduler.framework.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, TypeVar, cast

from apis.jsonfields import as_mapping
from scheduler.framework.rows import RowChange
from scheduler.framework.snapshot import Snapshot

Obj = Mapping[str, Any]
T = TypeVar("T")


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def pod_volumes(pod: Obj) -> list[Obj]:
    return [as_mapping(v) for v in as_list(as_mapping(pod.get("spec")).get("volumes"))]


def pod_namespace(pod: Obj) -> str:
    return str(as_mapping(pod.get("metadata")).get("namespace") or "")


def claim_name(volume: Obj) -> str | None:
    """``persistentVolumeClaim.claimName`` of a PVC volume ("" when empty), None for other volumes."""
    src = volume.get("persistentVolumeClaim")
    if not isinstance(src, Mapping):
        return None
    return str(src.get("claimName") or "")


def not_found(resource: str, name: str) -> str:
    """The message of a lister's NotFound error (errors.NewNotFound(v1.Resource(resource), name))."""
    return f'{resource} "{name}" not found'


def labels_of(obj: Obj) -> dict[str, str]:
    raw = as_mapping(as_mapping(obj.get("metadata")).get("labels"))
    return {str(k): v if isinstance(v, str) else "" for k, v in raw.items()}


class PodVolumesView:
    """Per row, the (namespace, volume) pairs of its pods that have volumes, and the rows that have
    any: a plugin resolves only those rows against the store (other rows have no volumes)."""

    reads_pods = True

    def __init__(self) -> None:
        self.rows: list[list[tuple[str, Obj]]] = []
        self.with_volumes: set[int] = set()
        # per row, what plugins derived from its volumes: tag -> (the store's versions it read, value)
        self.derived: list[dict[Hashable, tuple[Hashable, Any]]] = []

    def derive(self, i: int, tag: Hashable, token: Hashable, make: Callable[[], T]) -> T:
        """`make()` for row i, kept until the row's pods change or `token` (the versions of the store
        objects `make` reads) does."""
        found = self.derived[i].get(tag)
        if found is not None and found[0] == token:
            return cast(T, found[1])
        value = make()
        self.derived[i][tag] = (token, value)
        return value

    def _row(self, snapshot: Snapshot, i: int) -> None:
        vols = [
            (pod_namespace(p.pod), v) for p in snapshot.infos[i].pods.values() for v in pod_volumes(p.pod)
        ]
        self.rows[i] = vols
        self.derived[i] = {}
        if vols:
            self.with_volumes.add(i)
        else:
            self.with_volumes.discard(i)

    def rebuild(self, snapshot: Snapshot) -> None:
        self.rows = [[] for _ in range(snapshot.n)]
        self.derived = [{} for _ in range(snapshot.n)]
        self.with_volumes = set()
        for i in range(snapshot.n):
            self._row(snapshot, i)

    def refresh(self, snapshot: Snapshot, rows: Sequence[int]) -> None:
        for i in rows:
            self._row(snapshot, i)

    def resize(self, snapshot: Snapshot, change: RowChange) -> None:
        """Rows follow nodes joining and leaving (O(moved rows)); new rows come by `refresh`."""
        with_volumes = self.with_volumes
        moved_in = [new for old, new in change.moves if old in with_volumes]
        with_volumes.difference_update(change.removed)
        with_volumes.difference_update(old for old, _ in change.moves)
        with_volumes.update(moved_in)
        with_volumes.difference_update(change.added)
        change.list(self.rows)
        change.list(self.derived)
        for i in change.added:
            self.rows[i], self.derived[i] = [], {}


def pod_volumes_view(snapshot: Snapshot) -> PodVolumesView:
    return snapshot.view(("volume", "pod-volumes"), PodVolumesView)
