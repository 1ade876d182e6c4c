"""ImageLocality Score plugin of kube-scheduler v1.20: favours nodes that already have the pod's
container images, weighted by how widely each image is spread (docs/rules/scheduler-basic.md#imagelocality).

For each of ``spec.containers`` (init containers do not count) whose image, normalised as
``normalizedImageName`` (``:latest`` appended when the name has no tag after its last ``/``), is among
the names a node's ``status.images`` lists, the node adds ``int64(float64(size) * spread)`` with
``spread = float64(nodes listing the name) / float64(all nodes)``. The sum is clamped to
``[23MB, 1000MB × containers]`` (MB = 2^20) and scaled:
``100 * (sum - 23MB) / (1000MB × containers - 23MB)``, in int64 with Go's truncating division.

The size is the one the node itself reports (its first image listing the name); kube takes it from
the first node its cache saw with the name, and counts the nodes when a node was last added or
updated; koord counts them in the current snapshot, so every node sees the same, current spread.

Vectorised: a snapshot view indexes image name → rows and sizes; a pod costs a few numpy operations
per container over the rows that have its image.
Imports: standard library, numpy, apis.jsonfields, scheduler.framework,
scheduler.plugins.noderesources_scoring (Go's float-to-int conversion).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np

from apis.jsonfields import as_mapping
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import IntArray, Pod, uniform_scores
from scheduler.framework.rows import reindex_rows
from scheduler.framework.snapshot import RowChange, Snapshot
from scheduler.framework.status import MAX_NODE_SCORE
from scheduler.plugins.noderesources_scoring import go_int64_all
from scheduler.plugins.resourcemath import go_div_all

NAME: Final = "ImageLocality"
STATE_KEY: Final = "PreScore" + NAME
MB: Final = 1024 * 1024
MIN_THRESHOLD: Final = 23 * MB
MAX_CONTAINER_THRESHOLD: Final = 1000 * MB
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def normalized_image_name(name: str) -> str:
    """``normalizedImageName``: ``:latest`` appended when the last ``:`` is not after the last ``/``."""
    return name + ":latest" if name.rfind(":") <= name.rfind("/") else name


def node_images(node: Mapping[str, Any]) -> dict[str, int]:
    """Image name → size on the node, the first image listing a name deciding (``status.images``)."""
    out: dict[str, int] = {}
    images = as_mapping(node.get("status")).get("images")
    if not isinstance(images, list):
        return out
    for image in images:
        m = as_mapping(image)
        size = m.get("sizeBytes")
        size = size if isinstance(size, int) and not isinstance(size, bool) else 0
        size = size if INT64_MIN <= size <= INT64_MAX else 0
        names = m.get("names")
        for name in names if isinstance(names, list) else ():
            if isinstance(name, str) and name not in out:
                out[name] = size
    return out


def pod_images(pod: Pod) -> tuple[str, ...]:
    """The normalised image of each of ``spec.containers`` (a non-string image reads as "")."""
    containers = as_mapping(pod.get("spec")).get("containers")
    out = []
    for c in containers if isinstance(containers, list) else ():
        image = as_mapping(c).get("image")
        out.append(normalized_image_name(image if isinstance(image, str) else ""))
    return tuple(out)


def calculate_priority(sums: IntArray, containers: int) -> IntArray:
    """``calculatePriority``: the clamped sum scaled to 0..100 in int64."""
    max_threshold = MAX_CONTAINER_THRESHOLD * containers
    if max_threshold >= MIN_THRESHOLD:
        clamped = np.clip(sums, MIN_THRESHOLD, max_threshold)
    else:  # no containers: every sum (0) is below the minimum
        clamped = np.full(sums.shape, MIN_THRESHOLD, np.int64)
    return go_div_all(MAX_NODE_SCORE * (clamped - MIN_THRESHOLD), max_threshold - MIN_THRESHOLD)


class ImageIndex:
    """Per row its images, and per image name the rows listing it with their sizes (a snapshot view;
    Node objects only)."""

    reads_pods = False

    def __init__(self) -> None:
        self.rows: list[dict[str, int]] = []
        self.by_name: dict[str, dict[int, int]] = {}
        self._arrays: dict[str, tuple[IntArray, IntArray]] = {}

    def _index(self, i: int, images: Mapping[str, int], add: bool) -> None:
        for name, size in images.items():
            self._arrays.pop(name, None)
            rows = self.by_name.setdefault(name, {})
            if add:
                rows[i] = size
            else:
                rows.pop(i, None)
                if not rows:
                    del self.by_name[name]

    def rebuild(self, snapshot: Snapshot) -> None:
        self.by_name, self._arrays = {}, {}
        self.rows = [node_images(info.node) for info in snapshot.infos]
        for i, images in enumerate(self.rows):
            self._index(i, images, True)

    def refresh(self, snapshot: Snapshot, rows: Sequence[int]) -> None:
        for i in rows:
            new = node_images(snapshot.infos[i].node)
            if new != self.rows[i]:
                self._index(i, self.rows[i], False)
                self._index(i, new, True)
                self.rows[i] = new

    def resize(self, snapshot: Snapshot, change: RowChange) -> None:
        """Nodes joined or left (docs/scheduler-scale.md#node-list): the index forgets the removed
        rows and re-keys the moved ones (O(their images)); new rows are refreshed next."""
        reindex_rows(self.rows, change, self._index, {})

    def holders(self, name: str) -> tuple[IntArray, IntArray] | None:
        """The rows listing ``name`` and their sizes, or None."""
        found = self._arrays.get(name)
        if found is None:
            rows = self.by_name.get(name)
            if not rows:
                return None
            found = self._arrays[name] = (
                np.fromiter(rows.keys(), np.int64, len(rows)),
                np.fromiter(rows.values(), np.int64, len(rows)),
            )
        return found


class ImageLocality:
    """Score plugin; see the module docstring."""

    @property
    def name(self) -> str:
        return NAME

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        images = state.get(STATE_KEY)
        if not isinstance(images, tuple):
            images = pod_images(pod)
            state.write(STATE_KEY, images)
        view = snapshot.view((NAME, "images"), ImageIndex)
        held = [found for found in map(view.holders, images) if found is not None]
        if not held:  # no node lists any of the images: every sum is 0, clamped to the minimum: 0
            return uniform_scores(snapshot.n, 0)
        sums = np.zeros(snapshot.n, np.int64)
        for rows, sizes in held:
            spread = float(len(rows)) / float(snapshot.n)
            sums[rows] += go_int64_all(sizes.astype(np.float64) * spread)
        return calculate_priority(sums, len(images))
