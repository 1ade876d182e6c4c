"""Who is in a shard group, judged from the group's Leases (docs/shards.md#membership). Every shard holds
its own Lease ``koord-scheduler-shard-<identity>`` labelled ``scheduling.koordinator.sh/shard-group=
<scheduler name>`` and renews it every few seconds; the members are the identities whose Lease is live.

Live is judged as kube's leader election judges a lease (kube/leaderelection.py): by the *reader's*
monotonic clock, from when the reader last saw the Lease's record change, never by comparing the
``renewTime`` written by another host's clock with ours, so clock skew between hosts cannot make a
member vanish or a dead one linger. A Lease first seen counts as just changed (as a new leader-election
candidate does), a Lease with no holder (released) or deleted is gone at once.

The shard's own Lease body and the arbiter's address (the annotation the shard hosting the arbiter
writes on its own Lease, the arbiter being the holder of the group's leader Lease:
docs/shards.md#arbiter-address) are pure functions too; scheduler.shards.heartbeat does the I/O.
Imports: the standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "ARBITER_ANNOTATION",
    "GROUP_LABEL",
    "LEASE_PREFIX",
    "Observed",
    "arbiter_address",
    "lease_body",
    "lease_name",
    "members",
    "observe",
]

LEASE_PREFIX: Final = "koord-scheduler-shard-"
GROUP_LABEL: Final = "scheduling.koordinator.sh/shard-group"
ARBITER_ANNOTATION: Final = "scheduling.koordinator.sh/shard-binder-address"
_RECORD_FIELDS: Final = ("holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime")


def lease_name(identity: str) -> str:
    """The shard's Lease name. Identities are already DNS-1123 in practice (pod names, host names with
    a suffix); anything else is lowered and its other characters become ``-``."""
    safe = "".join(c if c.isalnum() or c in "-." else "-" for c in identity.lower()).strip("-.")
    if not safe:
        raise ValueError(f"identity {identity!r}: no usable character for a Lease name")
    return (LEASE_PREFIX + safe)[:253]


def lease_body(
    identity: str, group: str, namespace: str, *, now: str, duration: int, address: str = ""
) -> dict[str, Any]:
    """The shard's Lease as created (and as a merge patch renews it): holder, duration, renewTime,
    the group label, and the arbiter address annotation (``null`` removes it in a merge patch)."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": lease_name(identity),
            "namespace": namespace,
            "labels": {GROUP_LABEL: group},
            "annotations": {ARBITER_ANNOTATION: address or None},
        },
        "spec": {
            "holderIdentity": identity,
            "leaseDurationSeconds": duration,
            "renewTime": now,
        },
    }


@dataclass(frozen=True, slots=True)
class Observed:
    """One member's Lease as a reader last saw it: the record (its spec fields), when by the reader's
    monotonic clock that record last changed, the lease duration it states, and the arbiter address it
    carries ('' when none)."""

    identity: str
    record: tuple[Any, ...]
    changed_at: float
    duration: float
    address: str = ""


def observe(
    previous: Mapping[str, Observed], leases: Iterable[Mapping[str, Any]], now: float
) -> dict[str, Observed]:
    """Pure: the group's observations after listing ``leases`` at monotonic time ``now``. A record
    unchanged since ``previous`` keeps its change time; a new or changed one is stamped ``now``;
    Leases without a holder, and identities no longer listed, are dropped. Keyed by identity (a second
    Lease naming the same holder keeps the more recently changed record)."""
    out: dict[str, Observed] = {}
    for lease in leases:
        spec = lease.get("spec") or {}
        identity = str(spec.get("holderIdentity") or "")
        if not identity:
            continue
        record = tuple(spec.get(k) for k in _RECORD_FIELDS)
        before = previous.get(identity)
        changed_at = before.changed_at if before is not None and before.record == record else now
        try:
            duration = float(spec.get("leaseDurationSeconds") or 0)
        except (TypeError, ValueError):
            duration = 0.0
        annotations = (lease.get("metadata") or {}).get("annotations") or {}
        obs = Observed(identity, record, changed_at, duration, str(annotations.get(ARBITER_ANNOTATION) or ""))
        kept = out.get(identity)
        if kept is None or obs.changed_at >= kept.changed_at:
            out[identity] = obs
    return out


def members(observed: Mapping[str, Observed], now: float) -> list[str]:
    """Pure: the identities whose Lease is live at monotonic time ``now`` (its record changed less than
    its lease duration ago by the reader's clock), sorted."""
    return sorted(o.identity for o in observed.values() if o.changed_at + o.duration > now)


def arbiter_address(observed: Mapping[str, Observed], leader: str, now: float) -> str:
    """Pure: where the group's arbiter listens: the address on the live Lease of the leader (the holder
    of the group's leader Lease); '' when there is no leader, it is not a live member, or it publishes
    no address yet."""
    o = observed.get(leader) if leader else None
    if o is None or not o.changed_at + o.duration > now:
        return ""
    return o.address
