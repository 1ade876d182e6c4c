"""InterPodAffinity's pod index follows nodes removed and added in place (`PodIndex.resize`, then
`refresh` of the new rows): after random row changes mixed with pod changes, the plugin still equals
its oracle on every row, and the index holds what one rebuilt from the same rows holds."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.interpodaffinity import InterPodAffinity
from scheduler.plugins.interpodaffinity.podindex import PodIndex
from scheduler.plugins.interpodaffinity.prefilter import pod_index
from tests.unit.scheduler._rowchange import move, new_node
from tests.unit.scheduler.plugins._support import add_pods, make_node
from tests.unit.scheduler.plugins.test_interpodaffinity import pod
from tests.unit.scheduler.plugins.test_interpodaffinity_property import (
    affinities,
    compare,
    node_labels,
    pod_labels,
    pods,
)


def summary(index: PodIndex) -> dict[str, object]:
    """What the index holds, by pod key (entries are rebuilt objects in a fresh index)."""
    return {
        "rows": [{k: (e.pod, e.row, i) for k, e in row.items()} for i, row in enumerate(index.rows)],
        "by_ns": {k: set(d) for k, d in index.by_ns.items()},
        "by_key": {k: set(d) for k, d in index.by_key.items()},
        "by_label": {k: set(d) for k, d in index.by_label.items()},
        "groups": {g: set(m) for g, m in index.groups.items()},
        "anti": set(index.anti_groups),
        "score": set(index.score_groups),
        "group_rows": {g: sorted(index.group_rows(g).tolist()) for g in index.groups},
    }


def check_index(snap: Snapshot) -> None:
    fresh = PodIndex()
    fresh.rebuild(snap)
    kept = pod_index(snap)
    assert summary(kept) == summary(fresh)
    assert all(e.row == i for i, row in enumerate(kept.rows) for e in row.values())


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_pod_index_follows_rows_moved_in_place(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 6))
    nodes = [make_node(f"n{i}", labels=data.draw(node_labels)) for i in range(n)]
    shared = [None, *data.draw(st.lists(affinities(), min_size=1, max_size=3))]
    existing = [data.draw(pods(f"e{k}", [f"n{i}" for i in range(n)], shared)) for k in range(2 * n + 2)]
    snap = Snapshot.build(nodes, existing)
    plugin = InterPodAffinity()
    incoming = pod("in", ns="ns", labels=data.draw(pod_labels))
    incoming["spec"]["affinity"] = data.draw(affinities())
    compare(incoming, snap, plugin)
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    for step in range(data.draw(st.integers(1, 4))):
        if snap.n and data.draw(st.booleans()):  # pods change on an existing node (refresh path)
            name = data.draw(st.sampled_from(snap.names))
            add_pods(snap, [data.draw(pods(f"s{step}", [name], shared))], step + 2)
        added = []
        for j in range(data.draw(st.integers(0, 2))):
            name = f"m{step}-{j}"
            node_pods = [
                data.draw(pods(f"{name}-p{k}", [name], shared)) for k in range(data.draw(st.integers(0, 3)))
            ]
            added.append(new_node(make_node(name, labels=data.draw(node_labels)), node_pods, step + 2))
        move(snap, added, rng, data.draw(st.integers(0, 2)))
        check_index(snap)
        compare(incoming, snap, plugin)
