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


def filter_codes(b: Block, estimate: Sequence[int], prod: bool) -> I64:
    """Per row, before the expiry rule (scheduler.plugins.loadaware.freshness): -1 pass, ``1 + j``
    resource j over its usage threshold, ``1 + R + j`` over its aggregated threshold. Daemonset pods are
    not filtered (the caller's check). Prod pods read the prod thresholds and usage where the node sets
    them (``k = 1``)."""
    k = 1 if prod else 0
    exact = b.dtype is not object
    if b.r == 0:
        return np.full(b.n, -1, np.int64)
    # float64(existing + estimated) / float64(total) * 100: the sum is exact (int64 within the exact
    # range, Python ints otherwise) and each conversion rounds once, as Go's do.
    used = np.asarray(b.existing[k] + b.estimate(estimate), np.float64)
    used /= b.cap_safe if exact else b.cap_safe.astype(np.float64)
    used *= 100
    usage = round_half_away(used, finite=exact)  # |used| ≤ 2**54 in the int64 block: no overflow
    # int64 thresholds compare as exact doubles (within the exact range); Python ints compare exactly
    over = np.asarray(usage > b.thresholds[k], np.bool_)
    over &= b.checked[k]  # (R, n): resource j is over its threshold
    failed = np.logical_or.reduce(over, axis=0)
    failed &= b.evaluated[k]  # thresholds set, a metric entry and a node metric
    first = over.argmax(axis=0)  # the first resource over
    which: I64 = np.where(failed, first + b.code_base[k], -1)
    return which


def scores(
    b: Block, args: LoadAwareSchedulingArgs, weights: Sequence[int], estimate: Sequence[int], prod: bool
) -> I64:
    """Per row, before the freshness rule: the weighted leastUsed score."""
    dominant_weight = args.dominant_resource_weight
    if dominant_weight == 0 and not any(weights):
        return np.zeros(b.n, np.int64)
    existing = b.prod_usage if prod and args.score_according_prod_usage else b.score_usage
    cap = b.capacity
    used = existing + b.estimate(estimate)
    least = cap - used  # (R, n): leastUsed = (capacity − used) × 100 / capacity, 0 if used > capacity
    least *= 100
    least //= b.cap_safe
    unfit = used > cap
    unfit |= b.cap_zero
    np.copyto(least, 0, where=unfit)
    node_score = np.dot(np.array(weights, b.dtype), least)  # exact integer sums
    weight_sum = sum(weights)
    if dominant_weight > 0:
        dominant = np.minimum.reduce(least, axis=0, initial=100)  # min(100, every leastUsed)
        node_score += dominant * dominant_weight
        weight_sum += dominant_weight
    node_score //= weight_sum
    result: I64 = node_score.astype(np.int64, copy=False)
    return result
