"""RowWatch (resourcemath): the rows it reports moved since an epoch are exactly the rows whose
generation changed at some poll after that epoch (so every row that differs now), or it answers None
(re-read everything)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.snapshot import NodeInfo, Snapshot
from scheduler.plugins import resourcemath
from scheduler.plugins.resourcemath import watch

from ._support import make_node


def _snapshot(n: int) -> Snapshot:
    return Snapshot([NodeInfo.of(make_node(f"n{i}")) for i in range(n)])


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 8),
    st.lists(
        st.tuples(
            st.lists(st.tuples(st.integers(0, 7), st.integers(-3, 3)), max_size=4),  # rows set to values
            st.booleans(),  # bump the layout
            st.lists(st.integers(0, 40), max_size=3),  # epochs (back from now) asked about
        ),
        max_size=30,
    ),
)
def test_since_reports_exactly_the_rows_that_moved(
    n: int, steps: list[tuple[list[tuple[int, int]], bool, list[int]]]
) -> None:
    snap = _snapshot(n)
    w = watch(snap)
    assert watch(snap, w) is w
    states = {w.epoch: (snap.generation.copy(), snap.layout)}
    moved_at: dict[int, set[int]] = {}  # epoch -> rows that differ from the previous poll's
    for sets, relayout, asks in steps:
        before = snap.generation.copy()
        for i, g in sets:
            snap.generation[i % n] = g
        if relayout:
            snap.layout += 1
        previous = w.epoch
        assert watch(snap, w) is w
        if w.epoch != previous:
            moved_at[w.epoch] = set(np.flatnonzero(before != snap.generation).tolist())
            states[w.epoch] = (snap.generation.copy(), snap.layout)
        else:  # nothing moved: no new epoch
            assert np.array_equal(before, snap.generation) and not relayout
        for back in asks:
            epoch = w.epoch - back
            got = w.since(epoch)
            if epoch not in states:
                assert got is None
                continue
            if got is None:
                continue  # allowed: the caller re-reads every row
            then, layout = states[epoch]
            assert layout == snap.layout
            # every row that differs now is reported, and only rows that moved at a later poll
            want = set().union(*(moved_at[e] for e in range(epoch + 1, w.epoch + 1)))
            assert got == sorted(want)
            assert set(np.flatnonzero(then != snap.generation).tolist()) <= want


def test_reset_on_burst_and_long_history() -> None:
    snap = _snapshot(resourcemath.WATCH_LOG + 2)
    w = watch(snap)
    snap.generation[:] += 1  # more rows than WATCH_LOG moved at once
    watch(snap, w)
    assert w.since(w.epoch - 1) is None and w.since(w.epoch) == []
    start = w.epoch
    for k in range(3 * resourcemath.WATCH_LOG):
        snap.generation[k % 7] += 1
        watch(snap, w)
    assert w.since(start) is None  # forgotten
    assert w.since(w.epoch - 3) == [
        (k % 7) for k in range(3 * resourcemath.WATCH_LOG - 3, 3 * resourcemath.WATCH_LOG)
    ]


def test_one_watch_per_live_snapshot() -> None:
    a, b = _snapshot(3), _snapshot(3)
    wa, wb = watch(a), watch(b)
    assert wa is not wb and watch(a) is wa and watch(b, wa) is wb
