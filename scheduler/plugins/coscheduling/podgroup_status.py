"""The PodGroup status controller's pure parts (docs/rules/scheduler-coscheduling.md#podgroup-status):
whether a PodGroup is (re)queued, and the status one sync computes from the gang's children as the
gang cache knows them. The controller patches the PodGroup when the status changed; the patch's update
event requeues it, so syncs repeat until the status settles (``settle`` replays that loop).
Imports: the standard library, apis (pod, podgroup), this package's cache.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Mapping, Sequence
from typing import Any, Final

from apis.pod import phase
from apis.podgroup import (
    PHASE_FAILED,
    PHASE_FINISHED,
    PHASE_PENDING,
    PHASE_PRE_SCHEDULING,
    PHASE_RUNNING,
    PHASE_SCHEDULED,
    PHASE_SCHEDULING,
    ZERO_TIME,
    PodGroup,
    PodGroupStatus,
)
from scheduler.plugins.coscheduling.cache import GangCache

MAX_GC_TIME: Final = _dt.timedelta(hours=48)
MAX_SYNCS: Final = 16  # the status settles within a handful of syncs; a bound against a flapping rule

Pod = Mapping[str, Any]


def should_enqueue(pg: PodGroup) -> bool:
    """Finished and Failed groups are left alone, and so is a group fully scheduled, with nothing
    running, whose scheduling started more than 48 h after its creation."""
    st = pg.status
    if st.phase in (PHASE_FINISHED, PHASE_FAILED):
        return False
    started_late = st.schedule_start_time - pg.creation_timestamp > MAX_GC_TIME
    return not (st.scheduled == pg.min_member and st.running == 0 and started_late)


def occupied_by(pod: Pod) -> str | None:
    """``<pod ns>/<owner name>`` of each owner reference, sorted, joined by ``,``; None without owners."""
    meta = pod.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    owners = meta.get("ownerReferences")
    if not isinstance(owners, list) or not owners:
        return None
    namespace = meta.get("namespace") or ""
    refs = sorted(f"{namespace}/{o.get('name') or ''}" for o in owners if isinstance(o, Mapping))
    return ",".join(refs) if refs else None


def next_status(pg: PodGroup, children: Sequence[Pod], bound: int, now: _dt.datetime) -> PodGroupStatus:
    """One sync: the status computed from the gang's children (current pod objects, the first one
    first) and its bound count."""
    st = pg.status
    if st.phase == "":
        return dataclasses.replace(st, phase=PHASE_PENDING)
    if st.phase == PHASE_PENDING:
        if len(children) >= pg.min_member and pg.min_member > 0:
            owners = occupied_by(children[0])
            return dataclasses.replace(
                st, phase=PHASE_PRE_SCHEDULING, occupied_by=st.occupied_by if owners is None else owners
            )
        return st
    if not children:
        return dataclasses.replace(st, phase=PHASE_PENDING)
    phases = [phase(p) for p in children]
    running, succeeded, failed = (phases.count(x) for x in ("Running", "Succeeded", "Failed"))
    start = st.schedule_start_time
    if bound < pg.min_member:
        new_phase = PHASE_SCHEDULING
        if start == ZERO_TIME:
            start = now
    else:
        new_phase = PHASE_SCHEDULED
    if new_phase == PHASE_SCHEDULED and succeeded + running >= pg.min_member:
        new_phase = PHASE_RUNNING
    if failed != 0 and failed + running + succeeded >= pg.min_member:
        new_phase = PHASE_FAILED
    if succeeded >= pg.min_member:
        new_phase = PHASE_FINISHED
    return dataclasses.replace(
        st, phase=new_phase, running=running, succeeded=succeeded, failed=failed, scheduled=bound,
        schedule_start_time=start,
    )  # fmt: skip


def sync(cache: GangCache, pg: PodGroup, now: _dt.datetime) -> PodGroupStatus:
    """The status one sync of this PodGroup computes from the gang cache."""
    gang = cache.get(pg.key)
    children = list(gang.children.values()) if gang is not None else []
    bound = len(gang.bound) if gang is not None else 0
    return next_status(pg, children, bound, now)


def settle(cache: GangCache, pg: PodGroup, now: _dt.datetime) -> PodGroup:
    """Syncs as the controller would until the PodGroup is no longer enqueued or its status stops
    changing (each change is a patch, whose update event requeues the group)."""
    for _ in range(MAX_SYNCS):
        if not should_enqueue(pg):
            return pg
        status = sync(cache, pg, now)
        if status == pg.status:
            return pg
        pg = dataclasses.replace(pg, status=status)
        cache.on_pod_group_update(None, pg)  # the patch's update event reaches the gang cache too
    return pg
