"""`record_rejections` (scheduler/framework/results.py) against a readable per-row oracle: every row's
status is that of the first Filter plugin in profile order that rejects it, whatever the order the
statuses were appended in, and rows no plugin rejects stay -1."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.interfaces import FilterResult
from scheduler.framework.results import record_rejections
from scheduler.framework.status import Status

# one plugin: how many statuses, and per row -1 (passes) or an index below that count
_plugin = st.integers(0, 4).flatmap(
    lambda k: st.tuples(
        st.just(k), st.lists(st.integers(-1, k - 1) if k else st.just(-1), min_size=12, max_size=12)
    )
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_plugin, min_size=1, max_size=6))
def test_each_row_gets_the_first_rejecting_plugins_status(plugins: list[tuple[int, list[int]]]) -> None:
    n = 12
    results = [
        (
            f"P{pos}",
            FilterResult(
                np.array(which, np.int32),
                tuple(Status.unschedulable(f"reason {pos}.{j}") for j in range(k)),
            ),
        )
        for pos, (k, which) in enumerate(plugins)
    ]
    rejected_by = np.full(n, -1, np.int32)
    found: list[Status] = []
    for name, res in results:
        record_rejections(res, name, rejected_by, found)

    for i in range(n):  # the oracle: plugins in order, the first with a status for row i decides
        expected = next(
            (res.statuses[int(res.which[i])].with_plugin(name) for name, res in results if res.which[i] >= 0),
            None,
        )
        got = None if rejected_by[i] < 0 else found[int(rejected_by[i])]
        assert got == expected, (i, got, expected)


def test_an_int64_result_is_read_as_the_same_indices() -> None:
    # a plugin handing over int64 indices must not be reinterpreted bytewise
    res = FilterResult(
        np.array([-1, 1, 0, -1], np.int64), (Status.unschedulable("a"), Status.unschedulable("b"))
    )
    rejected_by = np.array([-1, -1, 5, -1], np.int32)
    found = [Status.unschedulable(str(j)) for j in range(6)]
    record_rejections(res, "X", rejected_by, found)
    assert rejected_by.tolist() == [-1, 7, 5, -1]
    assert found[7] == Status.unschedulable("b", plugin="X")
