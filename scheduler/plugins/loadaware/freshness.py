"""The NodeMetric expiry rule of LoadAwareScheduling (docs/rules/scheduler.md#filter, #score) over every
row, and its masks kept across cycles.

A row's metric is expired at ``now`` when it has no ``updateTime`` or ``now − updateTime ≥
nodeMetricExpirationSeconds`` (``expired_rows``, the one statement of the rule). Filter's expiry rule
reads ``active[k] & expired`` (``gone[k]``), Score's freshness rule ``~has_node_metric | expired``
(``stale``). Computing them anew every cycle is a few passes over every row; ``Freshness`` keeps them
instead and re-evaluates the rule only where the result can have changed:

- rows rewritten since (``changed``): just those rows, by the same rule;
- ``now`` moving forward: a double subtraction rounds monotonically, so ``now − t`` grows with ``now``
  and shrinks as ``t`` grows; an expired row stays expired, and no live row can expire while the
  live row with the smallest ``updateTime`` (``soonest``) has not: while the rule says ``soonest`` is not
  expired at ``now``, every mask is unchanged. Otherwise (and when ``now`` moves back, or the expiration
  changes) every row is evaluated again. By the same argument a rewritten row whose ``updateTime`` is
  at least ``soonest`` is not expired: when it was fresh before and has a node metric, its masks stay.

Every mask therefore equals a fresh evaluation at every ``now``.
Imports: the standard library, numpy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

Bools = npt.NDArray[np.bool_]
Floats = npt.NDArray[np.float64]
_NONE: Bools = np.zeros(1, np.bool_)


def expired_rows(update_time: Floats, no_update_time: Bools, seconds: int, now: float) -> Bools:
    """Per row: ``updateTime`` unset, or ``now − updateTime ≥ seconds`` (the difference is a double,
    compared with the integer ``seconds`` exactly, as Python's float-int comparison does)."""
    age = now - update_time
    if float(seconds) == seconds:
        over = age >= float(seconds)
    else:  # not a double: compare exactly
        over = np.array([a >= seconds for a in age.tolist()], np.bool_).reshape(len(age))
    out: Bools = no_update_time | over
    return out


class Freshness:
    """The masks of one block at the ``now`` last asked for (see the module docstring). The block calls
    ``changed`` for each row it rewrites and ``reset`` when its rows move."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.seconds: int | None = None  # None: nothing kept
        self.now = math.nan
        self.rows: list[int] = []
        self.soonest = math.inf  # smallest updateTime of the rows not expired at ``now``
        self.expired: Bools = _NONE
        self.gone: list[Bools] = [_NONE, _NONE]
        self.stale: Bools = _NONE
        self.count_gone = [0, 0]
        self.count_stale = 0

    def changed(self, rows: Iterable[int]) -> None:
        if self.seconds is not None:
            self.rows.extend(rows)

    def at(
        self,
        update_time: Floats,
        no_update_time: Bools,
        active: list[Bools],
        has_node_metric: Bools,
        seconds: int,
        now: float,
    ) -> Freshness:
        """The masks at ``now`` over the block's current arrays (the same arrays every call)."""
        if self.seconds != seconds or not now >= self.now:
            full = True
        else:
            full = now != self.now and self._soonest_expires(seconds, now)
        if full:
            self._evaluate(None, update_time, no_update_time, active, has_node_metric, seconds, now)
        elif self.rows:
            # A row that was fresh (not stale) and still has a node metric and an updateTime no older
            # than ``soonest`` is not expired either (see the module docstring): its masks stand.
            soonest, stale = self.soonest, self.stale
            pending = [
                i
                for i in (self.rows if len(self.rows) == 1 else set(self.rows))
                if stale[i] or not has_node_metric[i] or not update_time[i] >= soonest
            ]
            self.rows = []
            rows: slice | npt.NDArray[np.intp]
            if len(pending) == 1:  # (a slice: basic indexing, cheaper than a gather)
                rows = slice(pending[0], pending[0] + 1)
            elif pending:
                rows = np.array(sorted(pending), np.intp)
            if pending:
                self._evaluate(rows, update_time, no_update_time, active, has_node_metric, seconds, now)
        self.now = now
        return self

    def _soonest_expires(self, seconds: int, now: float) -> bool:
        soonest = np.array([self.soonest], np.float64)
        return bool(expired_rows(soonest, _NONE, seconds, now)[0])

    def _evaluate(
        self,
        rows: slice | npt.NDArray[np.intp] | None,
        update_time: Floats,
        no_update_time: Bools,
        active: list[Bools],
        has_node_metric: Bools,
        seconds: int,
        now: float,
    ) -> None:
        """Every row (``rows`` None) or just ``rows``: the rule, then the masks that read it."""
        self.rows = []
        if rows is None:
            times = update_time
            expired = expired_rows(update_time, no_update_time, seconds, now)
            self.expired, self.seconds, self.soonest = expired, seconds, math.inf
            self.gone = [active[0] & expired, active[1] & expired]
            stale = ~has_node_metric
            stale |= expired
            self.stale = stale
        else:
            times = update_time[rows]
            expired = expired_rows(times, no_update_time[rows], seconds, now)
            self.expired[rows] = expired
            self.gone[0][rows] = active[0][rows] & expired
            self.gone[1][rows] = active[1][rows] & expired
            self.stale[rows] = ~has_node_metric[rows] | expired
        live = times[~expired]  # (rows without updateTime are expired)
        if live.size:
            self.soonest = min(self.soonest, float(live.min()))
        self.count_gone = [int(np.count_nonzero(self.gone[0])), int(np.count_nonzero(self.gone[1]))]
        self.count_stale = int(np.count_nonzero(self.stale))
