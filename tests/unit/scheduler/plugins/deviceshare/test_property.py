"""Properties of the allocator (docs/rules/scheduler-deviceshare.md#allocation) over generated nodes:
Filter (no scorer) and Reserve (a scorer) agree on whether a pod fits — each device either covers the
per-instance request or not, whatever the order; an allocation takes distinct devices, exactly the
wanted count, never more than a device has free; and what it takes, added to the used, still fits."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.plugins.deviceshare.allocator import allocate, free_devices, instance_request
from scheduler.plugins.deviceshare.scoring import LEAST_ALLOCATED, MOST_ALLOCATED, ScoringStrategy

CORE, MEM, RATIO = "koordinator.sh/gpu-core", "koordinator.sh/gpu-memory", "koordinator.sh/gpu-memory-ratio"
GIB = 1 << 30


@st.composite
def worlds(draw: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, dict[str, int]]]:
    minors = draw(st.lists(st.integers(0, 7), min_size=1, max_size=5, unique=True))
    totals: dict[int, dict[str, int]] = {}
    used: dict[int, dict[str, int]] = {}
    for m in minors:
        healthy = draw(st.booleans()) or draw(st.booleans())
        totals[m] = {CORE: 100, MEM: 16 * GIB, RATIO: 100} if healthy else {}
        pct = draw(st.sampled_from([0, 0, 25, 50, 75, 100]))
        if pct:
            used[m] = {CORE: pct, RATIO: pct, MEM: pct * 16 * GIB // 100}
    request = draw(
        st.sampled_from([
            {CORE: 50, RATIO: 50}, {CORE: 100, RATIO: 100}, {CORE: 200, RATIO: 200}, {MEM: 4 * GIB},
            {"koordinator.sh/gpu.shared": 2, CORE: 100, RATIO: 100}, {RATIO: 30}, {CORE: 25, RATIO: 75},
        ])
    )  # fmt: skip
    return {"gpu": totals}, {"gpu": used}, {"gpu": request}


@settings(max_examples=60, deadline=None)
@given(worlds(), st.sampled_from([LEAST_ALLOCATED, MOST_ALLOCATED]))
def test_filter_and_reserve_agree_and_allocations_fit(world: Any, kind: str) -> None:
    totals, used, requests = world
    without = allocate(totals, used, requests)
    scored = allocate(totals, used, requests, None, ScoringStrategy(kind))
    assert (without.allocations is None) == (scored.allocations is None)
    assert without.reason == scored.reason
    if scored.allocations is None:
        assert scored.reason == "Insufficient gpu devices"
        return
    per, count = instance_request("gpu", requests["gpu"])
    free = free_devices(totals["gpu"], used["gpu"])
    chosen = scored.allocations["gpu"]
    assert len(chosen) == count and len({e.minor for e in chosen}) == count
    for e in chosen:
        for name, value in per.items():
            assert e.resources[name] == value <= free[e.minor].get(name, 0)
        # filled in with both memory names, within the card
        assert 0 <= e.resources[MEM] <= totals["gpu"][e.minor][MEM]
        assert 0 <= e.resources[RATIO] <= 100
