"""The weighted sum of a cycle's Score plugins (docs/architecture.md#uniform-scores): each plugin's scores,
normalised when it has NormalizeScore, times its weight, summed over the feasible rows.

A plugin that gives every row the same score returns `uniform_scores(n, v)`; its share is then one integer
(normalised on one element when its normaliser `normalizes_by_range`) added to the total once, not an
array pass per step — the totals are the same. Split from scheduler.framework.runtime.
Imports: standard library, numpy, scheduler.framework (interfaces, cycle_state, points, snapshot).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import cast

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import (
    IntArray,
    NormalizeScorePlugin,
    Pod,
    ScoreAllPlugin,
    ScorePlugin,
    uniform_value,
)
from scheduler.framework.points import score_rows
from scheduler.framework.snapshot import Snapshot

_NORMALISED_LIMIT = 4096  # remembered normalised uniform scores per framework


def weighted_total(
    scores: Sequence[ScorePlugin | ScoreAllPlugin],
    weights: Sequence[int],
    normalizers: Sequence[NormalizeScorePlugin | None],
    vectorised: Sequence[ScoreAllPlugin | None],
    observer: Callable[[str, str, float], None] | None,
    state: CycleState,
    pod: Pod,
    snapshot: Snapshot,
    feasible: IntArray,
    normalised: dict[tuple[int, int], int] | None = None,
) -> IntArray:
    """The weighted sum of the plugins' scores of the feasible rows (in `feasible`'s order).
    `normalised` (the caller's, kept across cycles): (plugin position, uniform score) → its normalised
    value — by `normalizes_by_range` a function of the score alone."""
    n, every = snapshot.n, len(feasible) == snapshot.n
    rows: IntArray | None = None  # the sum of the plugins that scored every row
    picked: IntArray | None = None  # the sum of those that scored the feasible rows (feasible's order)
    offset = 0  # the uniform plugins' share, the same for every row
    for j, (p, w, norm, v) in enumerate(zip(scores, weights, normalizers, vectorised, strict=True)):
        t0 = time.perf_counter()
        if v is not None:
            s = np.asarray(v.score_all(state, pod, snapshot, feasible), np.int64)
        else:
            s = score_rows(cast(ScorePlugin, p), state, pod, snapshot, feasible)
        if observer is not None:
            observer(p.name, "Score", time.perf_counter() - t0)
        same = uniform_value(s)
        if same is not None and (norm is None or getattr(norm, "normalizes_by_range", False)):
            if norm is not None:
                got = None if normalised is None else normalised.get((j, same))
                if got is None:
                    one = np.array([same], np.int64)
                    norm.normalize_scores(state, pod, one)
                    got = int(one[0])
                    if normalised is not None and len(normalised) < _NORMALISED_LIMIT:
                        normalised[j, same] = got
                same = got
            offset += same * w
            continue
        full = len(s) == n
        owned = False  # (plugins keep their arrays: only a copy made here is written)
        if norm is not None:  # normalises the feasible rows' scores, in a copy
            s, owned = (s.take(feasible) if full and not every else s.copy()), True
            norm.normalize_scores(state, pod, s)
            full = every
        if w != 1:
            s, owned = (np.multiply(s, w, out=s) if owned else s * w), True
        if full:
            if rows is None:
                rows = s if owned else s.copy()
            else:
                rows += s
        elif picked is None:
            picked = s if owned else s.copy()
        else:
            picked += s
    if rows is None:
        out = picked if picked is not None else np.zeros(len(feasible), np.int64)
    else:
        out = rows if every else rows.take(feasible)
        if picked is not None:
            out += picked
    if offset:
        out += offset
    return out
