"""RowResults follow rows moved in place (`resize`): kept entries, and rows reported changed before the
resize but not yet recomputed, give after it exactly what the rule gives evaluated afresh over the
new rows. The row changes come from tests/unit/scheduler/_rowchange.py's independent simulation."""

from __future__ import annotations

import random
from unittest.mock import patch

import numpy as np
import numpy.typing as npt
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework import rowresults
from scheduler.framework.rowresults import RowResults, Rows
from scheduler.framework.rows import RowChange
from scheduler.framework.snapshot import NodeInfo
from tests.unit.scheduler._rowchange import simulate


def info(name: str) -> NodeInfo:
    return NodeInfo.of({"metadata": {"name": name}, "status": {"allocatable": {}}})  # type: ignore[typeddict-item]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 8), st.data())
def test_kept_results_follow_rows_moved_in_place(n: int, data: st.DataObject) -> None:
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    infos = [info(f"n{i}") for i in range(n)]
    values = {x.name: rng.randint(-50, 50) for x in infos}  # each node's datum
    results = RowResults(n, budget=data.draw(st.sampled_from([1, 40, 4_000_000])))
    keys = [0, 1, 2, 3, 4, 5]

    def rule_for(key: int) -> object:
        def rule(rows: Rows | None) -> npt.NDArray[np.int64]:
            pick = range(len(infos)) if rows is None else rows.tolist()
            return np.array([[values[infos[i].name] * key, key] for i in pick], np.int64).reshape(-1, 2).T

        return rule

    def check() -> None:
        for key in data.draw(st.lists(st.sampled_from(keys), max_size=4)):
            got = results.get(key, rule_for(key))  # type: ignore[arg-type]
            want = rule_for(key)(None)  # type: ignore[operator]
            assert got.shape == want.shape and got.tolist() == want.tolist()

    check()
    # pending rows renumbered in Python, or with numpy (the form for long logs)
    threshold = data.draw(st.sampled_from([0, rowresults._PYTHON_REMAP]))
    for step in range(data.draw(st.integers(1, 5))):
        if infos and data.draw(st.booleans()):  # a row rewritten, reported, not yet read
            i = data.draw(st.integers(0, len(infos) - 1))
            values[infos[i].name] = rng.randint(-50, 50)
            results.changed((i,))
        gone = rng.sample([x.name for x in infos], min(data.draw(st.integers(0, 2)), len(infos)))
        new = [info(f"m{step}-{j}") for j in range(data.draw(st.integers(0, 2)))]
        for x in new:
            values[x.name] = rng.randint(-50, 50)
        infos, change = simulate(infos, gone, new, rng)
        with patch.object(rowresults, "_PYTHON_REMAP", threshold):
            results.resize(change)
        results.changed(change.added)  # the owner's refresh of the new rows
        check()


def taken(old: npt.NDArray[np.int64], change: RowChange, fill: int) -> npt.NDArray[np.int64]:
    """The readable form of a change on an array: new row i is old row ``take[i]``, or `fill`."""
    out = (
        old.take(np.maximum(change.take, 0), axis=-1)
        if old.shape[-1]
        else np.zeros((*old.shape[:-1], change.n), old.dtype)
    )
    out[..., [i for i, t in enumerate(change.take.tolist()) if t < 0]] = fill
    return out


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 12), st.sampled_from([(), (3,), (2, 4)]), st.data())
def test_row_change_array_equals_the_take_in_place_when_there_is_room(
    n: int, shape: tuple[int, ...], data: st.DataObject
) -> None:
    """`RowChange.array` gives the values of `take` through a sequence of changes, reusing the array's
    buffer while it has room (the result is then a view of the same memory)."""
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    infos = [info(f"n{i}") for i in range(n)]
    arr = np.arange(int(np.prod(shape, dtype=np.int64)) * n, dtype=np.int64).reshape(*shape, n).copy()
    want = arr.copy()
    for step in range(data.draw(st.integers(1, 6))):
        gone = rng.sample([x.name for x in infos], min(data.draw(st.integers(0, 3)), len(infos)))
        new = [info(f"m{step}-{j}") for j in range(data.draw(st.integers(0, 3)))]
        infos, change = simulate(infos, gone, new, rng)
        room = arr.base if arr.base is not None else arr
        before = room.shape[-1]
        want = taken(want, change, -7)
        arr = change.array(arr, -7)
        assert arr.shape == want.shape and arr.tolist() == want.tolist()
        if change.n <= before and arr.size:
            assert np.shares_memory(arr, room)
        for i in change.added:  # the owner writes new rows afterwards, through the view
            arr[..., i] = want[..., i] = 100 + step


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 60), max_size=120), st.integers(0, 130))
def test_rows_to_recompute_are_the_distinct_pending_ones_ascending(log: list[int], start: int) -> None:
    """Both ways of listing the pending rows (a few in Python, many sorted in C) give the same rows,
    and an entry read after the changes is patched on exactly those rows."""
    start = min(start, len(log))
    want = sorted(set(log[start:]))
    if not want:
        return
    assert rowresults._distinct(log, start).tolist() == want
    results, calls = RowResults(61), []
    results.get("k", lambda rows: np.zeros(61, np.int64) if rows is None else np.ones(len(rows), np.int64))
    results.changed(log[start:])

    def rule(rows: Rows | None) -> npt.NDArray[np.int64]:
        assert rows is not None
        calls.append(rows.tolist())
        return np.ones(len(rows), np.int64)

    got = results.get("k", rule)
    assert calls == [want] and np.flatnonzero(got).tolist() == want
