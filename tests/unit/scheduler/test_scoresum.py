"""The weighted sum of the Score plugins (scheduler/framework/scoresum.py,
docs/architecture.md#uniform-scores): a plugin's shared uniform array is added as one integer —
normalised on one element only when its normaliser declares `normalizes_by_range` — and the totals
equal those of the same scores handed over as ordinary arrays, for random plugins, weights,
normalisers and feasible rows."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import IntArray, uniform_scores, uniform_value
from scheduler.framework.scoresum import weighted_total
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.normalizescore import default_normalize_score

POD: dict[str, Any] = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": []}}


def snapshot(n: int) -> Snapshot:
    return Snapshot.build(
        [{"metadata": {"name": f"n{i}"}, "status": {"allocatable": {"cpu": "4"}}} for i in range(n)]
    )


class Fixed:
    """Scores every row from a list (`picked`: only the feasible rows, in their order); `shared` hands a
    uniform list over as the shared array."""

    def __init__(self, name: str, scores: list[int], shared: bool, picked: bool) -> None:
        self._name, self.values, self.shared, self.picked = name, scores, shared, picked

    @property
    def name(self) -> str:
        return self._name

    def score_all(self, state: CycleState, pod: Any, snap: Snapshot, feasible: IntArray) -> IntArray:
        if self.shared and len(set(self.values)) == 1:
            return uniform_scores(snap.n, self.values[0])
        return (
            np.array(self.values, np.int64).take(feasible) if self.picked else np.array(self.values, np.int64)
        )


class ByRange(Fixed):
    """DefaultNormalizeScore (reverse): depends on the value and the maximum only."""

    normalizes_by_range = True

    def normalize_scores(self, state: CycleState, pod: Any, scores: IntArray) -> None:
        default_normalize_score(scores, reverse=True)


class ByPosition(Fixed):
    """A normaliser that does not declare `normalizes_by_range`: adds each score's position, so
    equal scores do not stay equal."""

    def normalize_scores(self, state: CycleState, pod: Any, scores: IntArray) -> None:
        scores += np.arange(len(scores), dtype=np.int64)


KINDS = (Fixed, ByRange, ByPosition)


@st.composite
def cases(draw: st.DrawFn) -> tuple[int, list[tuple[int, int, int, bool, bool]], list[int]]:
    n = draw(st.integers(2, 7))
    plugins = []
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.integers(0, len(KINDS) - 1))
        value = draw(st.integers(0, 100))
        plugins.append((kind, value, draw(st.integers(1, 10_000)), draw(st.booleans()), draw(st.booleans())))
    feasible = sorted(draw(st.sets(st.integers(0, n - 1), min_size=1)))
    return n, plugins, feasible


def total(
    n: int,
    plugins: list[tuple[int, int, int, bool, bool]],
    feasible: list[int],
    shared: bool,
    normalised: dict[tuple[int, int], int] | None = None,
) -> list[int]:
    snap = snapshot(n)
    made: list[Fixed] = []
    for k, (kind, value, _, uniform, picked) in enumerate(plugins):
        values = [value] * n if uniform else [(value + 7 * i) % 101 for i in range(n)]
        made.append(KINDS[kind](f"p{k}", values, shared, picked))
    weights = [p[2] for p in plugins]
    norms = [p if isinstance(p, (ByRange, ByPosition)) else None for p in made]
    rows = np.array(feasible, np.int64)
    out = weighted_total(made, weights, norms, made, None, CycleState(0), POD, snap, rows, normalised)  # type: ignore[arg-type]
    return [int(x) for x in out]


@settings(max_examples=60, deadline=None)
@given(cases())
def test_shared_uniform_scores_give_the_same_totals(case: tuple[int, list[Any], list[int]]) -> None:
    n, plugins, feasible = case
    expected = total(n, plugins, feasible, shared=False)
    assert total(n, plugins, feasible, shared=True) == expected
    # the normalised uniform scores one call remembers serve the next, whatever its scores
    normalised: dict[tuple[int, int], int] = {}
    other = [(kind, (value * 3 + 1) % 101, *rest) for kind, value, *rest in plugins]
    for case_plugins in (plugins, other, plugins, other):
        want = total(n, case_plugins, feasible, shared=False)
        assert total(n, case_plugins, feasible, shared=True, normalised=normalised) == want


def test_a_positional_normaliser_still_sees_every_row() -> None:
    # One uniform plugin with a normaliser that is not by range: rows must differ after it.
    assert total(3, [(2, 5, 1, True, False)], [0, 1, 2], shared=True) == [5, 6, 7]
    # By range (reverse DefaultNormalizeScore of all-5: 100 - 100 = 0), weight 3: one integer.
    assert total(3, [(1, 5, 3, True, False)], [0, 2], shared=True) == [0, 0]
    # All 0, reversed: every row 100.
    assert total(3, [(1, 0, 2, True, False)], [1], shared=True) == [200]
    # Every row and feasible rows only, weighted: [1, 8, 15] * 2 at rows 0 and 2, plus [1, 15] * 3.
    mixed = [(0, 1, 2, False, False), (0, 1, 3, False, True)]
    assert total(3, mixed, [0, 2], shared=True) == [1 * 2 + 1 * 3, 15 * 2 + 15 * 3]


def test_uniform_value_names_only_the_kept_arrays() -> None:
    kept = uniform_scores(4, 100)
    assert uniform_value(kept) == 100
    assert uniform_scores(4, 100) is kept
    assert uniform_value(kept.copy()) is None
    assert uniform_value(np.full(4, 100, np.int64)) is None
    assert not kept.flags.writeable
    for v in range(40):  # past the cache's size: the first arrays are dropped, and no longer named
        uniform_scores(3, v)
    assert uniform_value(kept) is None
