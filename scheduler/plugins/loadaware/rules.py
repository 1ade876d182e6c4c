"""LoadAwareScheduling's Filter and Score (docs/rules/scheduler.md#filter, #score), stated over every
row of a ``columns.Block`` at once. Each line is the upstream formula on arrays: float64 division and
multiplication round as Go's do, and ``round_half_away`` is Go's ``math.Round``; integer arithmetic is
int64 for rows within ``columns.EXACT_LIMIT`` and Python ints for the others (the same expressions on
an object-dtype block), so every row gets exactly the per-node rule's result.
Imports: numpy, scheduler.plugins.loadaware (args, columns).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from scheduler.plugins.loadaware.args import LoadAwareSchedulingArgs
from scheduler.plugins.loadaware.columns import Block

Array = npt.NDArray[Any]
I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]


def round_half_away(x: npt.NDArray[np.float64], finite: bool = False) -> npt.NDArray[np.float64]:
    """Go's ``math.Round`` elementwise: halves away from zero, exact for every double. With
    ``t = trunc(x)``, ``d = x − t`` is exact and ``trunc(2d)`` is −1, 0 or 1 exactly when ``d ≤ −½``,
    ``|d| < ½`` or ``d ≥ ½``. Infinities stay as they are; ``finite`` says the caller knows there are
    none (only Python-int rows can overflow a double), which skips that check."""
    t = np.trunc(x)
    if finite:
        d = np.subtract(x, t)
    else:
        with np.errstate(invalid="ignore"):  # inf − inf
            d = np.subtract(x, t)
    d *= 2
    np.trunc(d, out=d)
    t += d
    if not finite and not np.isfinite(x).all():
        np.copyto(t, x, where=np.isinf(x))
    return t


def _column(values: Sequence[int], dtype: Any, r: int) -> Array:
    """A per-resource vector as an ``(R, 1)`` column."""
    return np.array(list(values), dtype).reshape(r, 1)


def filter_codes(b: Block, estimate: Sequence[int], prod: bool) -> I32:
    """Per row, before the expiry rule: -1 pass, ``1 + j`` resource j over its usage threshold,
    ``1 + R + j`` over its aggregated threshold. Daemonset pods are not filtered (the caller's check).
    Prod pods read the prod thresholds and usage where the node sets them (``k = 1``)."""
    k = 1 if prod else 0
    existing, thresholds = b.existing_num[k], b.limit[k]
    # float64(existing + estimate): in the int64 block ``existing`` is float64 and both terms are exact
    # doubles, so their (correctly rounded) float sum is that very double.
    used = np.asarray(existing + _column(estimate, existing.dtype, b.r), np.float64)
    used /= b.total
    used *= 100
    usage = round_half_away(used, finite=b.dtype is not object)  # |used| ≤ 2**54 there: no overflow
    over = np.asarray(usage > thresholds, np.bool_)  # (the object block compares Python ints)
    over &= b.checked[k]  # (R, n): resource j is over its threshold
    first = np.zeros(b.n, np.int32)
    for j in range(b.r - 1, 0, -1):  # the first resource over wins (0 where resource 0 is over)
        np.copyto(first, j, where=over[j] & ~over[0])
    failed = np.logical_or.reduce(over, axis=0)
    failed &= b.evaluated[k]  # thresholds set, a metric entry and a node metric
    which: I32 = np.full(b.n, -1, np.int32)
    np.add(first, b.code_base[k], out=first, casting="unsafe")  # small ints (object block: Python's)
    np.copyto(which, first, where=failed)
    return which


def filter_expiry(which: I32, b: Block, args: LoadAwareSchedulingArgs, prod: bool, now: float) -> None:
    """The expiry rule over ``filter_codes``' result (in place): with filterExpiredNodeMetrics, a node
    whose thresholds apply and whose metric expired passes (enableScheduleWhenNodeMetricsExpired) or
    gets code 0."""
    if args.filter_expired_node_metrics:
        gone = b.active[1 if prod else 0] & b.expired(args.node_metric_expiration_seconds, now)
        if gone.any():
            which[gone] = -1 if args.enable_schedule_when_node_metrics_expired else 0


def scores(
    b: Block, args: LoadAwareSchedulingArgs, weights: Sequence[int], estimate: Sequence[int], prod: bool
) -> I64:
    """Per row, before the freshness rule: the weighted leastUsed score."""
    dominant_weight = args.dominant_resource_weight
    if dominant_weight == 0 and not any(weights):
        return np.zeros(b.n, np.int64)
    existing = b.prod_usage if prod and args.score_according_prod_usage else b.score_usage
    cap = b.capacity
    used = existing + _column(estimate, cap.dtype, b.r)
    least = cap - used  # (R, n): leastUsed = (capacity − used) × 100 / capacity, 0 if used > capacity
    least *= 100
    least //= b.cap_safe
    unfit = used > cap
    unfit |= b.cap_zero
    np.copyto(least, 0, where=unfit)
    node_score = least[0] * weights[0]
    for j in range(1, b.r):
        node_score += least[j] * weights[j]
    weight_sum = sum(weights)
    if dominant_weight > 0:
        dominant = np.minimum.reduce(least, axis=0, initial=100)  # min(100, every leastUsed)
        node_score += dominant * dominant_weight
        weight_sum += dominant_weight
    node_score //= weight_sum
    result: I64 = node_score.astype(np.int64, copy=False)
    return result


def score_freshness(out: I64, b: Block, args: LoadAwareSchedulingArgs, now: float) -> None:
    """The freshness rule over ``scores``' result (in place): 0 without a node metric or when it
    expired."""
    stale = ~b.has_node_metric
    stale |= b.expired(args.node_metric_expiration_seconds, now)
    np.copyto(out, 0, where=stale)
