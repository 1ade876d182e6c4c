"""PrioritySort: kube 1.20.2's Less (higher priority first, then the earlier queue timestamp), its heap
key, and the scheduling queue's activeQ popping in the same order."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.plugins.prioritysort import PrioritySort, less, priority, sort_key
from scheduler.queue import SchedulingQueue

from ._support import make_pod


@dataclass
class Queued:
    pod: Any
    timestamp: float


def pod(p: Any = None, name: str = "p") -> dict[str, Any]:
    return make_pod(name) if p is None else make_pod(name, priority=p)


def test_priority_defaults_to_zero() -> None:
    assert priority(pod()) == 0
    assert priority(pod(7)) == 7
    assert priority(pod(-3)) == -3
    assert priority(pod("high")) == 0  # not an integer: unset


def test_less() -> None:
    assert less(Queued(pod(10), 5.0), Queued(pod(1), 1.0))  # higher priority first, whatever the time
    assert not less(Queued(pod(1), 1.0), Queued(pod(10), 5.0))
    assert less(Queued(pod(1), 1.0), Queued(pod(1), 2.0))  # equal: earlier first
    assert not less(Queued(pod(1), 2.0), Queued(pod(1), 2.0))  # neither before the other
    assert less(Queued(pod(), 1.0), Queued(pod(-1), 0.0))  # unset is 0
    assert PrioritySort().less(Queued(pod(2), 9.0), Queued(pod(), 0.0))
    assert PrioritySort().name == "PrioritySort"


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.one_of(st.none(), st.integers(-5, 5)), st.integers(0, 4)), min_size=2, max_size=6)
)
def test_sort_key_orders_as_less(items: list[tuple[int | None, int]]) -> None:
    queued = [Queued(pod(p), float(t)) for p, t in items]
    for a, b in itertools.permutations(queued, 2):
        assert less(a, b) == (sort_key(a) < sort_key(b))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@settings(max_examples=50, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(-3, 3)), min_size=1, max_size=8))
def test_queue_pops_in_prioritysort_order(priorities: list[int | None]) -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock)
    try:
        added = []
        for k, p in enumerate(priorities):
            clock.now += 1
            item = pod(p, name=f"p{k}")
            q.add(item)
            added.append(Queued(item, clock.now))
        popped = [q.pop(timeout=0.1) for _ in priorities]
        names = [info.pod["metadata"]["name"] for info in popped if info is not None]
        # timestamps are distinct, so PrioritySort gives one order
        want = sorted(added, key=sort_key)
        assert names == [a.pod["metadata"]["name"] for a in want]
    finally:
        q.close()
