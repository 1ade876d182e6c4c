"""The Coscheduling plugin's decisions as pure functions of the gang cache, the gang scheduling context,
the pod and the args: each returns what to answer and which effects to carry out, and
scheduler.plugins.coscheduling.plugin carries them out
(docs/rules/scheduler-coscheduling.md#scheduling-extension-points).
Messages are upstream's, character for character.
Imports: the standard library, apis (pod, podgroup), this package's cache and gang.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from apis.pod import metadata, pod_key
from apis.podgroup import GANG_MODE_STRICT, gang_id, gang_name, uid
from scheduler.plugins.coscheduling.cache import GangCache
from scheduler.plugins.coscheduling.gang import Gang

Pod = Mapping[str, Any]

REASON_GANG_IS_NIL: Final = "gang is nil, may be already deleted"
REASON_ALL_PENDING_ATTEMPTED: Final = "all pending pods is already been attempted"
REASON_GANG_IS_SUCCEED: Final = "gang is already succeed"
GANG_NOT_FOUND: Final = "Gang not found"


@dataclass(slots=True, eq=False)
class GangSchedulingContext:
    """The gang group being scheduled now (docs/rules/scheduler-coscheduling.md#queue-ordering)."""

    first_pod: Pod
    gang_group: frozenset[str]
    group_id: str
    attempted: set[str] = field(default_factory=set)
    failed_message: str = ""


def go_list(items: Iterable[str]) -> str:
    """Go's ``%v``/``%+v`` of a []string: ``[a b]``."""
    return "[" + " ".join(items) + "]"


def go_quote(text: str) -> str:
    """Go's ``%q`` of a string (strconv.Quote) for printable text: quotes and backslashes escaped,
    control characters as Go writes them."""
    out = []
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def basic_check(cache: GangCache, gang: Gang, pod: Pod) -> str | None:
    """docs/rules/scheduler-coscheduling.md#basic-check: None when every gang of the group exists, is
    initialised and has collected its min children."""
    missing: list[str] = []
    not_init: list[str] = []
    short = False
    for gid in gang.gang_group:
        member = cache.get(gid)
        if member is None:
            missing.append(gid)
        elif not member.has_init:
            not_init.append(gid)
        elif len(member.children) < member.min_required:
            short = True
    parts = []
    if missing:
        parts.append(f"memberGangs {go_list(missing)} doesn't exists")
    if not_init:
        parts.append(f"memberGangs {go_list(not_init)} has not init")
    if short:  # upstream prints the whole group here, not just the gangs short of children
        parts.append(f"memberGangs {go_list(gang.gang_group)} child pod not collect enough")
    if not parts:
        return None
    return (
        f"gangGroup {go_list(gang.gang_group)} basic check: {', '.join(parts)}, "
        f"current gang: {gang.name}, podName: {pod_key(pod)}"
    )


@dataclass(frozen=True, slots=True)
class Admission:
    """The shared first steps of PreEnqueue and BeforePreFilter. ``message`` empty: pass on to the
    next step (``skip_rest``: the group was satisfied once under ``once-satisfied``, admit at once).
    ``drop_representative``: the basic check failed for the group's representative."""

    gang: Gang | None
    message: str = ""
    skip_rest: bool = False
    drop_representative: bool = False


def admission(cache: GangCache, pod: Pod) -> Admission:
    """docs/rules/scheduler-coscheduling.md#preenqueue, steps 1 to 4 (a pod of no gang passes)."""
    if not gang_name(pod):
        return Admission(None, skip_rest=True)
    gang = cache.gang_of(pod)
    if gang is None:
        return Admission(None, f"can't find gang, gangName: {gang_id(pod)}, podName: {pod_key(pod)}")
    if not gang.has_init:
        return Admission(gang, f"gang has not init, gangName: {gang.name}, podName: {pod_key(pod)}")
    if gang.once_satisfied_and_policy():
        return Admission(gang, skip_rest=True)
    failure = basic_check(cache, gang, pod)
    if failure is not None:
        return Admission(gang, failure, drop_representative=gang.group_info.representative == pod_key(pod))
    return Admission(gang)


def pre_enqueue_rest(gang: Gang, context: GangSchedulingContext | None, pod: Pod) -> str:
    """docs/rules/scheduler-coscheduling.md#preenqueue, steps 5 and 6 ("" admits the pod; the
    representative gate records the pod when the group has none)."""
    key = pod_key(pod)
    if context is not None and gang.name in context.gang_group and key not in context.attempted:
        return f"gangGroup {gang.gang_group_id} is scheduling and this pod has not been attempted"
    if key not in gang.pending:
        return f"pod {key} is not exists in gangCache"
    representative = gang.group_info.representative or key
    if representative != key:
        return f"representative pod {representative} of gangGroupID {gang.gang_group_id} already exists"
    return ""


def next_pod(cache: GangCache, context: GangSchedulingContext) -> Pod | None:
    """The next pending pod of the group not attempted yet: gangs in group order, a gang's pods in the
    order they became pending (upstream's order is a map's; this one is as cheap and deterministic).
    None when none remains."""
    gang = cache.gang_of(context.first_pod)
    if gang is None:
        return None
    for member in cache.members(gang):
        for key, pod in member.pending.items():
            if key not in context.attempted:
                return pod
    return None


def failure_message(
    cache: GangCache, context: GangSchedulingContext | None, pod: Pod, fit_error: str
) -> tuple[str, bool]:
    """docs/rules/scheduler-coscheduling.md#afterpostfilter step 3: the message a member's failure
    rejects the group with, and whether it is new to the context (then the context records it)."""
    if context is None:
        return f"gets rejected due to member pod {go_quote(pod_key(pod))} is unschedulable", False
    if context.failed_message:
        return context.failed_message, False
    waiting = cache.waiting_pods_num(context.gang_group)
    message = (
        f"GangGroup {go_quote(context.group_id)} gets rejected due to member Pod {go_quote(pod_key(pod))} "
        f"is unschedulable with reason {go_quote(fit_error)}, alreadyWaitForBound: {waiting}"
    )
    return message, True


def strict_rejection(gang: Gang) -> str:
    return f"Gang {go_quote(gang.name)} gets rejected due to pod is unschedulable"


def unreserve_rejection(gang: Gang, pod: Pod) -> str | None:
    """docs/rules/scheduler-coscheduling.md#unreserve: the message the group's waiting pods are rejected
    with, None when they are spared (a once-satisfied group, or a NonStrict gang)."""
    if gang.once_satisfied_and_policy() or gang.mode != GANG_MODE_STRICT:
        return None
    name = str(metadata(pod).get("name") or "")
    return f"Gang {go_quote(gang.name)} gets rejected due to Pod {go_quote(name)} in Unreserve"


def permit_blockers(cache: GangCache, gang: Gang) -> list[str]:
    """docs/rules/scheduler-coscheduling.md#permit: the gangs of the group missing or not yet valid."""
    return [gid for gid in gang.gang_group if (m := cache.get(gid)) is None or not m.valid_for_permit()]


def binding_members(cache: GangCache, gang: Gang) -> set[str]:
    """The UIDs of every pod waiting for bind in the group (recorded at the first AllowGangGroup)."""
    return {uid(p) for member in cache.members(gang) for p in member.waiting_for_bind.values()}


def bind_annotations(cache: GangCache, pod: Pod) -> tuple[str, int] | None:
    """docs/rules/scheduler-coscheduling.md#prebind: (group id, member count) to write, or None (the
    annotations are removed): only members recorded by AllowGangGroup, and only sets of two or more."""
    gang = cache.gang_of(pod)
    if gang is None:
        return None
    members = gang.group_info.binding_members
    if len(members) <= 1 or uid(pod) not in members:
        return None
    return gang.gang_group_id, len(members)


def in_group(group: frozenset[str], pod: Pod) -> bool:
    """Whether a (waiting) pod's gang is one of the group's."""
    return bool(gang_name(pod)) and gang_id(pod) in group
