"""The Reservation controller's ``sync`` as a pure function (docs/rules/scheduler-reservation.md#controller):
expiry by ``expires``/``ttl`` or a missing node, the owners and allocated recomputed from the pods on
the node, Succeeded for allocate-once reservations, and the requeue delay; plus the garbage collector's
test (docs/rules/scheduler-reservation.md#garbage-collection).
Imports: the standard library, apis (pod, podgroup, quantity, reservation, rfc3339).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final

from apis.pod import ResourceList, metadata, pod_annotations, pod_requests
from apis.podgroup import ZERO_TIME
from apis.reservation import (
    ANNOTATION_RESERVATION_ALLOCATED,
    REASON_EXPIRED,
    REASON_SUCCEEDED,
    Reservation,
    is_expired,
    is_failed,
    is_succeeded,
    set_expired,
    set_succeeded,
)
from apis.rfc3339 import format_rfc3339, parse_rfc3339

MIN_REQUEUE_NS: Final = 3 * 10**9
MAX_REQUEUE_NS: Final = 15 * 10**9
GC_DURATION_NS: Final = 24 * 3600 * 10**9
GC_INTERVAL_S: Final = 60.0


def _ns(delta: _dt.timedelta) -> int:
    return (delta.days * 86400 + delta.seconds) * 10**9 + delta.microseconds * 1000


def need_expiration(r: Reservation, now: _dt.datetime) -> bool:
    """Not failed or succeeded, ``ttl`` not 0, and past ``expires`` or older than ``ttl``."""
    if is_failed(r) or is_succeeded(r):
        return False
    if r.ttl_ns == 0:
        return False
    if r.expires is not None and now > r.expires:
        return True
    return r.ttl_ns is not None and _ns(now - (r.creation or ZERO_TIME)) > r.ttl_ns


def requeue_after_ns(r: Reservation, now: _dt.datetime) -> int:
    """``nextSyncTime``: 0 (no requeue) for a finished reservation or no deadline, else the time left
    clamped to [3 s, 15 s]."""
    if is_failed(r) or is_succeeded(r):
        return 0
    left = 0
    if r.expires is not None:
        left = _ns(r.expires - now)
    elif r.ttl_ns is not None and r.ttl_ns > 0:
        left = _ns((r.creation or ZERO_TIME) - now) + r.ttl_ns
    if left == 0:
        return 0
    return min(max(left, MIN_REQUEUE_NS), MAX_REQUEUE_NS)


def allocated_uid(pod: Mapping[str, Any]) -> str | None:
    """The ``reservation-allocated`` annotation's uid (None when absent or unparsable)."""
    text = pod_annotations(pod).get(ANNOTATION_RESERVATION_ALLOCATED)
    if not isinstance(text, str) or not text:
        return None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError:
        return None
    uid = raw.get("uid") if isinstance(raw, dict) else None
    return uid if isinstance(uid, str) else None


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return a.keys() == b.keys() and all(a[k] == b[k] for k in a)


def sync(
    r: Reservation, node_names: Collection[str], pods: Sequence[Mapping[str, Any]], now: _dt.datetime
) -> tuple[Reservation, int]:
    """One ``sync``: the new reservation (status changed or not) and the requeue delay in ns (0: none)."""
    if is_failed(r) or is_succeeded(r):
        return r, 0
    stamp = format_rfc3339(now)
    if r.node_name:
        if need_expiration(r, now) or r.node_name not in node_names:
            r = set_expired(r, stamp)
        else:
            r = _sync_owners(r, pods, stamp)
    return r, requeue_after_ns(r, now)


def _sync_owners(r: Reservation, pods: Sequence[Mapping[str, Any]], stamp: str) -> Reservation:
    owners: list[dict[str, str]] = []
    total: ResourceList = {}
    for pod in pods:
        if allocated_uid(pod) != r.uid:
            continue
        meta = metadata(pod)
        owners.append({k: str(meta.get(k) or "") for k in ("namespace", "name", "uid")})
        for n, q in pod_requests(pod).items():
            total[n] = total[n] + q if n in total else q
    owners.sort(key=lambda o: o["uid"])
    allocated = {n: q for n, q in total.items() if n in r.allocatable}
    current = sorted(({k: o.get(k, "") for k in ("namespace", "name", "uid")} for o in r.current_owners),
                     key=lambda o: o["uid"])  # fmt: skip
    if current == owners and _same(allocated, r.allocated):
        return r
    r = dataclasses.replace(r, current_owners=tuple(owners), allocated=allocated)
    return set_succeeded(r, stamp) if r.is_allocate_once else r


def _condition_time(r: Reservation, reason: str, key: str) -> _dt.datetime | None:
    """The time of the first condition with ``reason`` (Go's zero time when unset), None if none."""
    for c in r.conditions:
        if c.get("reason") == reason:
            try:
                return parse_rfc3339(c.get(key) or "")
            except ValueError:
                return ZERO_TIME
    return None


def gc_due(
    r: Reservation, node_exists: bool, now: _dt.datetime, gc_duration_ns: int = GC_DURATION_NS
) -> bool:
    """Whether the garbage collector deletes ``r``: expired (since its Expired condition's transition) or
    succeeded (since its Succeeded condition's probe) for longer than ``gc_duration_ns``, or finished with
    its node gone."""
    if not (is_expired(r) or is_succeeded(r)):
        return False
    if r.node_name and not node_exists:
        return True
    if is_expired(r):
        since = _condition_time(r, REASON_EXPIRED, "lastTransitionTime")
    else:
        since = _condition_time(r, REASON_SUCCEEDED, "lastProbeTime")
    return since is not None and _ns(now - since) > gc_duration_ns
