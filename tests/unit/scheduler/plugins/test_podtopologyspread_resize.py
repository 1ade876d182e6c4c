"""The spread plugins' views follow nodes removed and added in place (`resize`, then `refresh` of the
new rows): the pod index (slots, postings, kept counts per selector) and the node-value code columns.
After random row changes mixed with pod changes, PodTopologySpread and SelectorSpread still equal
their oracles on every row, and the views hold what views rebuilt from the same rows hold."""

from __future__ import annotations

import random
from typing import Any
from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from apis.labelselector import OP_DOES_NOT_EXIST, OP_EXISTS, OP_IN, Requirement
from scheduler.framework.listers import Requirements, map_requirements
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.podtopologyspread import PodTopologySpread, SpreadArgs, podindex
from scheduler.plugins.podtopologyspread.podindex import CodeColumn, PodIndex, pod_index
from scheduler.plugins.selectorspread import SelectorSpread
from tests.unit.scheduler._rowchange import move, new_node
from tests.unit.scheduler.plugins._support import add_pods
from tests.unit.scheduler.plugins.test_podtopologyspread_property import (
    args,
    check,
    clusters,
    incoming,
    node_labels,
    pod,
    pod_labels,
)

SELECTORS: list[Requirements] = [
    map_requirements({"app": "web"}),
    (Requirement("tier", OP_EXISTS),),
    (Requirement("app", OP_IN, ("web", "db")), Requirement("tier", OP_DOES_NOT_EXIST)),
    (),
]

Obj = dict[str, Any]


def index_summary(index: PodIndex) -> dict[str, object]:
    """The index by pod key and row (slot numbers differ between two indexes)."""
    slot_key = {s: k for row in index.rows for k, (s, _) in row.items() if s >= 0}
    return {
        "n": index.n,
        "rows": [{k: obj for k, (_, obj) in row.items()} for row in index.rows],
        "slot_rows": sorted((slot_key[s], int(index.slot_row[s])) for s in slot_key),
        "live": int((index.slot_row >= 0).sum()),
        "by_ns": {k: {slot_key[s] for s in v} for k, v in index.by_ns.items()},
        "by_key": {k: {slot_key[s] for s in v} for k, v in index.by_key.items()},
        "by_label": {k: {slot_key[s] for s in v} for k, v in index.by_label.items()},
    }


def check_views(snap: Snapshot, selector: Requirements) -> None:
    kept = pod_index(snap)
    fresh = PodIndex()
    fresh.rebuild(snap)
    assert index_summary(kept) == index_summary(fresh)
    for ns in ("ns", "other"):  # kept counts (patched through the resize) equal fresh ones
        assert kept.counts(ns, selector).tolist() == fresh.counts(ns, selector).tolist()
    for key, view in snap._views.items():
        if isinstance(view, CodeColumn):
            column = CodeColumn(view.fn)
            column.rebuild(snap)
            decode = lambda c: [c.values[x] if x >= 0 else None for x in c.codes.tolist()]  # noqa: E731
            assert decode(view) == decode(column), key


def node(name: str, labels: dict[str, str]) -> Obj:
    return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": {"cpu": "4"}}}


@settings(max_examples=200, deadline=None)
@given(clusters(), incoming, args, st.data())
def test_spread_views_follow_rows_moved_in_place(
    cluster: Any, p: Obj, a: SpreadArgs, data: st.DataObject
) -> None:
    nodes, pods, objects = cluster
    snap = Snapshot.build(nodes, pods)
    plugin, selector = PodTopologySpread(objects, a), SelectorSpread(objects)
    reqs = data.draw(st.sampled_from(SELECTORS))
    check(snap, p, plugin, selector, list(range(snap.n)))
    pod_index(snap).counts("ns", reqs)  # kept, then patched through every change
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    for step in range(data.draw(st.integers(1, 4))):
        if snap.n and data.draw(st.booleans()):  # a pod added on an existing node (refresh path)
            name = data.draw(st.sampled_from(snap.names))
            add_pods(snap, [pod(f"s{step}", "ns", data.draw(pod_labels), name)], step + 2)
        added = []
        for j in range(data.draw(st.integers(0, 2))):
            name = f"m{step}-{j}"
            on = []
            for k in range(data.draw(st.integers(0, 3))):
                q = pod(
                    f"{name}-{k}", data.draw(st.sampled_from(["ns", "other"])), data.draw(pod_labels), name
                )
                if data.draw(st.integers(0, 5)) == 0:
                    q["metadata"]["deletionTimestamp"] = "2020-01-01T00:00:00Z"
                on.append(q)
            added.append(new_node(node(name, data.draw(node_labels)), on, step + 2))
        move(snap, added, rng, data.draw(st.integers(0, 2)))
        check_views(snap, reqs)
        if snap.n:
            feasible = sorted(data.draw(st.sets(st.integers(0, snap.n - 1), min_size=1)))
            check(snap, p, plugin, selector, feasible)
    assert np.all(pod_index(snap).slot_row[pod_index(snap).slot_row >= 0] < max(snap.n, 1))


def test_kept_counts_of_many_stale_rows_come_from_the_posting_lists() -> None:
    """Past ROW_SCAN_LIMIT stale rows the kept counts are recomputed from the posting lists instead of
    scanning the rows' pods: the same counts either way (the property test above, every stale row
    through the posting lists)."""
    inner = test_spread_views_follow_rows_moved_in_place.hypothesis.inner_test  # type: ignore[attr-defined]
    with patch.object(podindex, "ROW_SCAN_LIMIT", 0):
        settings(max_examples=60, deadline=None)(given(clusters(), incoming, args, st.data())(inner))()
