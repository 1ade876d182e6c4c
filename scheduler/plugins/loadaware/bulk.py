"""``RowTable``'s full rebuild in numpy: the same values as ``RowTable._row`` for every row at once, so a
new snapshot layout (startup, a node added or removed) costs milliseconds rather than a Python pass of
arithmetic per node. Rows it does not cover (no NodeMetric, no ``status.nodeMetric``, irregular node,
values near the int64 limits) are returned for the scalar ``_row``; tests compare both forms.
Imports: the standard library, numpy, scheduler.plugins.loadaware (exact, node_static, nodemetric_cache,
reference).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import numpy as np
import numpy.typing as npt

from scheduler.plugins.loadaware.exact import expiry_instant
from scheduler.plugins.loadaware.node_static import SCORE_EXACT_LIMIT, NodeStatic
from scheduler.plugins.loadaware.nodemetric_cache import MetricEntry
from scheduler.plugins.loadaware.reference import NodeSums

if TYPE_CHECKING:
    from scheduler.plugins.loadaware.table import RowTable

I64 = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
#: Inputs below this magnitude cannot overflow int64 in the sums and differences below.
_SAFE: Final = 1 << 61
_NEVER: Final = (1 << 63) - 1


def _matrix(rows: Sequence[Sequence[int]]) -> I64 | None:
    """An (n, R) int64 matrix, or None when some value is beyond ``_SAFE``."""
    try:
        m = np.array(rows, np.int64)
    except OverflowError:
        return None
    if m.size and int(np.abs(m).max()) >= _SAFE:  # abs(INT64_MIN) wraps negative: >= 2**63 - 1 > _SAFE
        return None
    if m.size and int(m.min()) <= -_SAFE:
        return None
    return m


def _existing(bases: list[tuple[int, ...] | None], ne: I64, nd: I64, zero: tuple[int, ...]) -> I64 | None:
    """``existing_usage`` outside prod mode: ``base + nodeDelta``, or ``nodeEstimated`` without a base."""
    base = _matrix([zero if b is None else b for b in bases])
    if base is None:
        return None
    missing = np.array([b is None for b in bases], np.bool_)[:, None]
    out: I64 = np.where(missing, ne, base + nd)
    return out


def _static_table(
    statics: list[NodeStatic],
) -> tuple[list[int], list[NodeStatic]]:
    """Each row's index into the list of distinct records (records are shared by identical nodes)."""
    index: dict[int, int] = {}
    distinct: list[NodeStatic] = []
    which: list[int] = []
    for st in statics:
        k = index.get(id(st))
        if k is None:
            k = index[id(st)] = len(distinct)
            distinct.append(st)
        which.append(k)
    return which, distinct


def bulk_rows(
    table: RowTable, statics: list[NodeStatic], entries: list[MetricEntry | None], sums: list[NodeSums]
) -> list[int]:
    """Fill ``table.heads``/``floats``/``irregular`` for every row it covers; returns the rows left."""
    n, r = len(statics), table.r
    covered = [
        e is not None and e.has_node_metric and st.regular for e, st in zip(entries, statics, strict=True)
    ]
    rows = [i for i in range(n) if covered[i]]
    if not rows:
        return list(range(n))
    which, distinct = _static_table([statics[i] for i in rows])
    en_rows: list[MetricEntry] = [e for i in rows if (e := entries[i]) is not None]
    zero = (0,) * r
    # per distinct record: capacity, bounds (0 where absent), presence and flags, then gathered per row
    per = _matrix(
        [
            st.capacity + tuple(0 if b is None else b for b in (*st.np_bounds, *st.pp_bounds))
            for st in distinct
        ]
    )
    s_all = _matrix(
        [(s := sums[i]).node_estimated + s.node_delta + s.prod_usage + s.prod_delta for i in rows]
    )
    if per is None or s_all is None:
        return list(range(n))
    flags = np.array(
        [
            (
                *(b is not None for b in (*st.np_bounds, *st.pp_bounds)),
                st.np_active,
                st.pp_active,
                st.profile.prod_set,
            )
            for st in distinct
        ],
        np.bool_,
    )
    w = np.array(which, np.intp)
    per, flags, capf = per[w], flags[w], np.array([st.capacity_f for st in distinct], np.float64)[w]
    cap, np_bound, pp_bound = per[:, :r], per[:, r : 2 * r], per[:, 2 * r :]
    np_present, pp_present = flags[:, :r], flags[:, r : 2 * r]
    np_active, pp_active, prod_set = (
        flags[:, 2 * r : 2 * r + 1],
        flags[:, 2 * r + 1 : 2 * r + 2],
        flags[:, 2 * r + 2 :],
    )
    ne, nd, pu, pd = (s_all[:, k * r : (k + 1) * r] for k in range(4))
    e_np = _existing(
        [
            e.usage_base(st.profile.agg_type, st.profile.agg_duration)
            for e, st in zip(en_rows, [distinct[k] for k in which], strict=True)
        ],
        ne,
        nd,
        zero,
    )
    agg_s = table.score_agg
    e_sc = (
        e_np
        if agg_s == ("", 0) and all(not st.profile.agg_type for st in distinct)
        else _existing([e.usage_base(*agg_s) for e in en_rows], ne, nd, zero)
    )
    if e_np is None or e_sc is None:
        return list(range(n))
    e_pr = pu + pd
    heads_np = np.where(np_active & np_present, np_bound - e_np, _NEVER)
    # a set prod vector has a non-zero value: always checked
    heads_pp = np.where(prod_set, np.where(pp_present, pp_bound - e_pr, _NEVER), heads_np)
    ok = (e_sc >= 0) & (e_sc <= SCORE_EXACT_LIMIT) & (e_pr >= 0) & (e_pr <= SCORE_EXACT_LIMIT)
    in_range: Bools = np.all(ok, axis=1)
    regular = in_range[:, None]
    expiration = table.expiration
    t = np.array(
        [-math.inf if (ut := e.update_time) is None else expiry_instant(ut, expiration) for e in en_rows],
        np.float64,
    )
    idx = np.array(rows, np.intp)
    table.heads[:r, idx] = heads_np.T
    table.heads[r:, idx] = heads_pp.T
    f = table.floats
    f[:r, idx] = np.where(regular, (cap - e_sc) * 100, 0).astype(np.float64).T
    f[r : 2 * r, idx] = np.where(regular, (cap - e_pr) * 100, 0).astype(np.float64).T
    f[2 * r : 3 * r, idx] = capf.T
    f[3 * r, idx] = np.where(np_active[:, 0], t, math.nan)
    f[3 * r + 1, idx] = np.where(pp_active[:, 0], t, math.nan)
    f[3 * r + 2, idx] = np.where(in_range, t, -math.inf)
    table.irregular.update(int(rows[k]) for k in np.flatnonzero(~in_range))
    return [i for i in range(n) if not covered[i]]
