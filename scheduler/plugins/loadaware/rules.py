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


def round_half_away(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Go's ``math.Round`` elementwise: halves away from zero, exact for every double (``x − trunc(x)``
    is exact); infinities and NaN are returned as they are."""
    t = np.trunc(x)
    with np.errstate(invalid="ignore"):  # inf - inf: NaN, and the comparisons below are then false
        d = x - t
    out: npt.NDArray[np.float64] = t + (d >= 0.5) - (d <= -0.5)
    return out


def expired(b: Block, expiration_seconds: int, now: float) -> npt.NDArray[np.bool_]:
    """``updateTime`` unset, or ``now − updateTime ≥ nodeMetricExpirationSeconds``."""
    age = now - b.update_time
    if float(expiration_seconds) == expiration_seconds:
        over = age >= float(expiration_seconds)
    else:  # not a double: compare exactly, as Python's float-int comparison does
        over = np.array([a >= expiration_seconds for a in age.tolist()], np.bool_).reshape(b.n)
    return np.isnan(b.update_time) | over


def filter_codes(
    b: Block, args: LoadAwareSchedulingArgs, estimate: Sequence[int], prod: bool, now: float
) -> I32:
    """Per row: -1 pass, 0 node metric expired, ``1 + j`` resource j over its usage threshold,
    ``1 + R + j`` over its aggregated threshold. Daemonset pods are not filtered (the caller's check)."""
    k = 1 if prod else 0  # Prod pods read the prod thresholds where the node sets them
    thresholds, cap = b.thresholds[k], b.capacity
    checked = (thresholds != 0) & (cap != 0)
    est = np.array(list(estimate), object if cap.dtype == object else np.int64)
    used = (b.existing[k] + est).astype(np.float64)
    total = np.where(cap != 0, cap, 1).astype(np.float64)
    usage = round_half_away(used / total * 100)
    over = checked & (usage > thresholds)
    first = over.argmax(axis=1).astype(np.int32)  # the first resource over wins
    codes = 1 + first + np.where(b.aggregated[k], b.r, 0).astype(np.int32)
    active = (thresholds != 0).any(axis=1) & b.has_entry  # all-zero thresholds or no metric: pass
    which: I32 = np.where(active & b.has_node_metric & over.any(axis=1), codes, -1).astype(np.int32)
    if args.filter_expired_node_metrics:
        gone = active & expired(b, args.node_metric_expiration_seconds, now)
        which[gone] = -1 if args.enable_schedule_when_node_metrics_expired else 0
    return which


def scores(
    b: Block,
    args: LoadAwareSchedulingArgs,
    weights: Sequence[int],
    estimate: Sequence[int],
    prod: bool,
    now: float,
) -> I64:
    """Per row: the weighted leastUsed score (0 without a fresh node metric)."""
    dominant_weight = args.dominant_resource_weight
    if dominant_weight == 0 and not any(weights):
        return np.zeros(b.n, np.int64)
    existing = b.prod_usage if prod and args.score_according_prod_usage else b.score_usage
    cap = b.capacity
    big = cap.dtype == object
    est = np.array(list(estimate), object if big else np.int64)
    used = existing + est
    least = np.where((cap == 0) | (used > cap), 0, (cap - used) * 100 // np.where(cap != 0, cap, 1))
    w = np.array(list(weights), object if big else np.int64)
    node_score = least @ w
    weight_sum = sum(weights)
    if dominant_weight > 0:
        dominant = least.min(axis=1, initial=100)  # min(100, leastUsed of every resource)
        node_score = node_score + dominant * dominant_weight
        weight_sum += dominant_weight
    out = node_score // weight_sum if weight_sum > 0 else np.zeros(b.n, np.int64)
    fresh = b.has_entry & b.has_node_metric & ~expired(b, args.node_metric_expiration_seconds, now)
    result: I64 = np.where(fresh, out, 0).astype(np.int64)
    return result
