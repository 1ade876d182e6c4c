"""kube-scheduler's ``helper.DefaultNormalizeScore`` over a numpy score array, shared by the Score plugins
that normalise by the highest count (docs/rules/scheduler-affinity-taint.md#defaultnormalizescore):
``score = MaxNodeScore * score / maxCount`` in Go int64 (the quotient truncates toward zero), then
``MaxNodeScore - score`` when reversed; ``maxCount`` is the highest score but at least 0, and when it is
0 the scores stay as they are (reversed: every one becomes MaxNodeScore).
Imports: numpy, scheduler.framework, scheduler.plugins.resourcemath.
"""

from __future__ import annotations

import numpy as np

from scheduler.framework.interfaces import IntArray
from scheduler.framework.status import MAX_NODE_SCORE
from scheduler.plugins.resourcemath import go_div_all


def default_normalize_score(scores: IntArray, reverse: bool, max_priority: int = MAX_NODE_SCORE) -> None:
    """Rewrites ``scores`` in place, as ``DefaultNormalizeScore(max_priority, reverse, scores)``."""
    if len(scores) == 0:
        return
    max_count = max(int(scores.max()), 0)
    if max_count == 0:
        if reverse:
            scores[:] = max_priority
        return
    # The scores here are small sums (taint counts, int32 weights): max_priority * score cannot wrap.
    scores *= np.int64(max_priority)
    if int(scores.min()) >= 0:  # the usual case: floor and truncation agree
        scores //= max_count
    else:
        scores[:] = go_div_all(scores, max_count)
    if reverse:
        np.subtract(max_priority, scores, out=scores)
