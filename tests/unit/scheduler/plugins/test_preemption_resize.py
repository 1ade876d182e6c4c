"""Preemption pruning's FreeableView follows nodes removed and added in place (`resize`, then `refresh`
of the new rows; docs/rules/scheduler-preemption.md#pruning): after random row changes mixed with pod
changes, every row's freeable requests per priority equal brute force where the view says it is exact
and bound them from above elsewhere, with at most `max_levels` levels — the semantics a rebuilt view
has too."""

from __future__ import annotations

import random
from typing import cast

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.kubeobjects import Pod
from scheduler.framework.snapshot import NodeInfo, PodInfo, Snapshot
from scheduler.plugins.defaultpreemption.freeable import VIEW_KEY, FreeableView
from tests.unit.scheduler._rowchange import move, new_node
from tests.unit.scheduler.plugins._preemption_support import node, pod
from tests.unit.scheduler.plugins.test_preemption_pruning import FPGA, GPU, PRIOS, _check_view, requests

ALLOC = {"cpu": "4", "memory": "4000", GPU: "2", FPGA: "1"}
pods_on = st.lists(st.tuples(st.sampled_from(PRIOS), requests), max_size=4)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([1, 2, 3, 32]), st.lists(pods_on, min_size=1, max_size=5), st.data())
def test_freeable_view_follows_rows_moved_in_place(
    max_levels: int, initial: list[list[tuple[int, dict[str, str]]]], data: st.DataObject
) -> None:
    def make(name: str, specs: list[tuple[int, dict[str, str]]], generation: int) -> NodeInfo:
        on = [pod(f"{name}-{k}", node=name, priority=q, req=r) for k, (q, r) in enumerate(specs)]
        return new_node(node(name, ALLOC), on, generation)

    snap = Snapshot([make(f"n{i}", specs, 0) for i, specs in enumerate(initial)])
    view = snap.view(VIEW_KEY, lambda: FreeableView(max_levels))
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    for step in range(data.draw(st.integers(1, 5))):
        if snap.n and data.draw(st.booleans()):  # a pod added or removed on a node (refresh path)
            info = snap.infos[data.draw(st.integers(0, snap.n - 1))]
            if info.pods and data.draw(st.booleans()):
                info.remove_pod(next(iter(info.pods)), step + 1)
            else:
                q, r = data.draw(st.tuples(st.sampled_from(PRIOS), requests))
                info.add_pod(
                    PodInfo.of(cast(Pod, pod(f"s{step}", node=info.name, priority=q, req=r))), step + 1
                )
            snap.refresh([info])
        added = [
            make(f"m{step}-{j}", data.draw(pods_on), step + 1) for j in range(data.draw(st.integers(0, 2)))
        ]
        move(snap, added, rng, data.draw(st.integers(0, 2)))
        assert snap.view(VIEW_KEY, FreeableView) is view
        _check_view(snap, view)
        assert view.sums.shape == (len(snap.resources) + 1, len(view.bounds), snap.n)
        assert len(view.bounds) <= max_levels and len(view._counted) == len(view._ids) == snap.n
        fresh = FreeableView(max_levels)
        fresh.rebuild(snap)
        _check_view(snap, fresh)
