"""What one scheduling attempt returns (`ScheduleResult`, the per-node `Rejections`), kube-scheduler's
FitError text (`fit_error_message`) and the choice among equal top scores (`select_best`,
docs/architecture.md#ties-between-nodes). Split from scheduler.framework.runtime, which re-exports them.
Imports: standard library, numpy, scheduler.framework (interfaces, status).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from scheduler.framework.interfaces import FilterResult, IntArray
from scheduler.framework.status import Code, Status


@dataclass(frozen=True, slots=True)
class Rejections:
    """Which nodes the filters rejected and why, kept as arrays: `which[i]` indexes `statuses` (-1 =
    not rejected). Expanding it to a per-node dict costs O(rejected), so that happens only on demand."""

    which: npt.NDArray[np.int32]
    statuses: tuple[Status, ...]
    names: Sequence[str]

    @classmethod
    def none(cls, names: Sequence[str] = ()) -> Rejections:
        return cls(np.full(len(names), -1, np.int32), (), names)

    def as_dict(self) -> dict[str, Status]:
        return {self.names[int(i)]: self.statuses[self.which[i]] for i in np.flatnonzero(self.which >= 0)}

    def _used(self) -> list[Status]:
        return [self.statuses[k] for k in np.unique(self.which[self.which >= 0]).tolist()]

    def plugins(self) -> set[str]:
        """Plugins that rejected at least one node."""
        return {st.plugin for st in self._used()}

    def first_error(self) -> Status | None:
        if not any(st.code == Code.ERROR for st in self.statuses):
            return None
        return next((st for st in self._used() if st.code == Code.ERROR), None)


@dataclass(slots=True)
class ScheduleResult:
    """`node` is the chosen node, or None with `status` saying why (per-node reasons in `rejections`)."""

    node: str | None
    status: Status
    feasible: int = 0
    evaluated: int = 0
    rejections: Rejections = field(default_factory=Rejections.none)
    nominated: str | None = None  # node a PostFilter plugin nominated the pod to

    @property
    def diagnosis(self) -> dict[str, Status]:
        return self.rejections.as_dict()


def fit_error_message(num_nodes: int, statuses: Iterable[Status]) -> str:
    """kube-scheduler's FitError text: reasons counted over nodes, `"<count> <reason>"` sorted."""
    hist: Counter[str] = Counter()
    for st in statuses:
        hist.update(st.reasons)
    parts = sorted(f"{count} {reason}" for reason, count in hist.items())
    return f"0/{num_nodes} nodes are available: {', '.join(parts)}."


def select_best(scores: IntArray, rng: random.Random | None, ranks: IntArray | None = None) -> int:
    """The index of a highest score: uniformly among equal ones with `rng` (one draw, and only when
    there is a tie), else the first. `ranks[k]` is the name rank of `scores[k]`'s node
    (`Snapshot.name_rank`): tied nodes are then taken in name order — the draw picks the k-th tied
    name — so the choice does not depend on the order of the snapshot's rows, which follow the node
    list (docs/architecture.md#ties-between-nodes). O(ties) in C: no sort."""
    first = int(np.argmax(scores))
    ties = np.flatnonzero(scores == scores[first])
    if len(ties) == 1:
        return first
    if ranks is None:
        return int(ties[0]) if rng is None else int(ties[rng.randrange(len(ties))])
    tied = ranks[ties]
    if rng is None:
        return int(ties[int(np.argmin(tied))])
    k = rng.randrange(len(ties))
    return int(ties[int(np.argpartition(tied, k)[k])])


def record_rejections(
    res: FilterResult, plugin: str, rejected_by: npt.NDArray[np.int32], found: list[Status]
) -> None:
    """Adds one Filter plugin's result to `rejected_by` (per row: index into `found` of the first
    rejecting status, -1 when none yet): rows it rejects that no earlier plugin rejected get its
    status. All its statuses are appended to `found` (Rejections reports only those in use).

    Three passes in C, whatever the rows: seen as uint32, "none" (-1) is the largest value and every
    index this plugin adds (`which + base`) is larger than every index already there, so the first
    rejecting plugin's is the minimum. `maximum(which, which + base)` keeps -1 (as 2**32 - 1, which
    the add wraps below `base`) and gives `which + base` elsewhere."""
    if not res.statuses:
        return
    base = len(found)
    found.extend(st.with_plugin(plugin) for st in res.statuses)
    which = (res.which if res.which.dtype == np.int32 else res.which.astype(np.int32)).view(np.uint32)
    codes = np.add(which, np.uint32(base))
    np.maximum(codes, which, out=codes)
    held = rejected_by.view(np.uint32)
    np.minimum(held, codes, out=held)
