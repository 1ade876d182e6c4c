"""One gang's state and its gang group's shared state, and how a gang is initialised from a pod's
annotations or from a PodGroup (docs/rules/scheduler-coscheduling.md#initialising-a-gang).

A Gang keeps four pod sets keyed ``ns/name``: children (every pod seen), pending (children neither
waiting at Permit nor bound), waitingForBind (assumed, parked at Permit) and bound. The GangGroupInfo is
shared by every gang of one group (docs/rules/scheduler-coscheduling.md#gang-groups).
Imports: the standard library, apis (podgroup, pod, duration), this package's args. No locking: the
scheduler serialises plugin state under its lock.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from apis.duration import DurationError, parse_go_duration
from apis.pod import pod_annotations, pod_key, pod_labels
from apis.podgroup import (
    ANNOTATION_GANG_GROUPS,
    ANNOTATION_GANG_MIN_NUM,
    ANNOTATION_GANG_MODE,
    ANNOTATION_GANG_TOTAL_NUM,
    ANNOTATION_GANG_WAIT_TIME,
    GANG_MODE_NON_STRICT,
    GANG_MODE_STRICT,
    LABEL_LIGHTWEIGHT_MIN_AVAILABLE,
    MATCH_ONCE_SATISFIED,
    MATCH_POLICIES,
    PodGroup,
    go_parse_int32,
    match_policy_annotation,
    parse_gang_groups,
    time_or_zero,
)
from scheduler.plugins.coscheduling.args import CoschedulingArgs

GANG_FROM_POD_ANNOTATION: Final = "GangFromPodAnnotation"
GANG_FROM_POD_GROUP_CRD: Final = "GangFromPodGroupCrd"
SECOND_NS: Final = 1_000_000_000

Pod = Mapping[str, Any]


@dataclass(slots=True, eq=False)
class GangGroupInfo:
    """State shared by the gangs of one group, keyed by the group id. ``initialized`` is false only for
    the placeholder a gang carries before it is attached to a real group."""

    group_id: str
    group: list[str]
    initialized: bool = False
    once_resource_satisfied: bool = False  # irreversible once true
    waiting_gang_ids: set[str] = field(default_factory=set)
    representative: str = ""  # the pod key admitted by PreEnqueue's representative gate
    binding_members: set[str] = field(default_factory=set)  # pod UIDs recorded at AllowGangGroup

    def add_waiting_gang(self) -> None:
        self.waiting_gang_ids.update(self.group)

    def remove_waiting_gang(self, gang_id: str) -> None:
        """An emptied waiting set clears the binding members (the group finished binding)."""
        self.waiting_gang_ids.discard(gang_id)
        if not self.waiting_gang_ids:
            self.binding_members = set()

    def clear_waiting_gang(self) -> None:
        self.waiting_gang_ids.clear()
        self.binding_members = set()

    def record_if_no_representative(self, key: str) -> str:
        """The representative after the call: this pod when there was none."""
        if not self.representative:
            self.representative = key
        return self.representative

    def delete_if_representative(self, key: str) -> None:
        if self.representative == key:
            self.representative = ""


@dataclass(slots=True, eq=False)
class Gang:
    """A gang as the cache holds it (docs/rules/scheduler-coscheduling.md#initialising-a-gang)."""

    name: str  # the gang id, ``ns/gangName``
    create_time: _dt.datetime
    wait_time: int = 0  # nanoseconds
    mode: str = GANG_MODE_STRICT
    match_policy: str = MATCH_ONCE_SATISFIED
    min_required: int = 0
    total_children: int = 0
    gang_group: list[str] = field(default_factory=list)
    gang_group_id: str = ""
    gang_from: str = GANG_FROM_POD_ANNOTATION
    has_init: bool = False
    group_info: GangGroupInfo = field(default_factory=lambda: GangGroupInfo("", []))
    children: dict[str, Pod] = field(default_factory=dict)
    pending: dict[str, Pod] = field(default_factory=dict)
    waiting_for_bind: dict[str, Pod] = field(default_factory=dict)
    bound: dict[str, Pod] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.gang_group:
            self.gang_group = [self.name]
            self.gang_group_id = self.name

    # --- initialisation ------------------------------------------------------------------------------
    def try_init_from_pod(self, pod: Pod, args: CoschedulingArgs) -> bool:
        """The first pod whose annotations give a valid min initialises the gang; False when the gang
        was initialised already or this pod's min is missing or unparsable."""
        if self.has_init:
            return False
        labels, annotations = _strs(pod_labels(pod)), _strs(pod_annotations(pod))
        try:
            if labels.get(LABEL_LIGHTWEIGHT_MIN_AVAILABLE):
                minimum = go_parse_int32(labels[LABEL_LIGHTWEIGHT_MIN_AVAILABLE])
            elif ANNOTATION_GANG_MIN_NUM in annotations:
                minimum = go_parse_int32(annotations[ANNOTATION_GANG_MIN_NUM])
            else:
                return False
        except ValueError:
            return False
        meta = pod.get("metadata")
        created = meta.get("creationTimestamp") if isinstance(meta, Mapping) else None
        self._apply(minimum, annotations, args, time_or_zero(created), _pod_wait_time(annotations, args))
        self.gang_from = GANG_FROM_POD_ANNOTATION
        return True

    def init_from_pod_group(self, pg: PodGroup, args: CoschedulingArgs) -> None:
        """Every PodGroup add and update re-initialises the gang."""
        timeout = pg.schedule_timeout_seconds
        wait = timeout * SECOND_NS if timeout is not None and timeout > 0 else args.default_timeout
        self._apply(pg.min_member, pg.annotations, args, pg.creation_timestamp, wait)
        self.gang_from = GANG_FROM_POD_GROUP_CRD

    def _apply(
        self, minimum: int, annotations: Mapping[str, str], args: CoschedulingArgs,
        created: _dt.datetime, wait: int,
    ) -> None:  # fmt: skip
        self.min_required = minimum
        try:
            total = _total(annotations)
        except ValueError:
            total = minimum
        self.total_children = minimum if total == 0 or total < minimum else total
        mode = annotations.get(ANNOTATION_GANG_MODE, "")
        self.mode = mode if mode in (GANG_MODE_STRICT, GANG_MODE_NON_STRICT) else GANG_MODE_STRICT
        policy = match_policy_annotation(annotations) or args.default_match_policy
        self.match_policy = policy if policy in MATCH_POLICIES else args.default_match_policy
        self.create_time = created
        self.wait_time = wait
        group = parse_gang_groups(annotations.get(ANNOTATION_GANG_GROUPS, "")) or [self.name]
        group.sort()  # the group id sorts the list in place: the stored group is sorted too
        self.gang_group = group
        self.gang_group_id = ",".join(group)
        self.has_init = True

    def attach_group_info(self, info: GangGroupInfo) -> None:
        """A gang keeps the first real group info it is attached to."""
        if not self.group_info.initialized:
            self.group_info = info

    # --- pod bookkeeping (docs/rules/scheduler-coscheduling.md#gang-cache) -----------------------------
    def set_child(self, pod: Pod, key: str, node: str) -> None:
        self.children[key] = pod
        if not node and key not in self.waiting_for_bind:
            self.pending[key] = pod

    def add_assumed(self, pod: Pod) -> None:
        key = pod_key(pod)
        self.waiting_for_bind.setdefault(key, pod)
        self.pending.pop(key, None)

    def del_assumed(self, pod: Pod) -> None:
        key = pod_key(pod)
        if key in self.waiting_for_bind:
            del self.waiting_for_bind[key]
            if key in self.children:
                self.pending[key] = self.children[key]
            if not self.waiting_for_bind:
                self.group_info.remove_waiting_gang(self.name)

    def add_bound(self, pod: Pod) -> None:
        key = pod_key(pod)
        self.waiting_for_bind.pop(key, None)
        if not self.waiting_for_bind:
            self.group_info.remove_waiting_gang(self.name)
        self.pending.pop(key, None)
        self.group_info.delete_if_representative(key)
        self.bound[key] = pod
        self.group_info.once_resource_satisfied = True

    def delete_pod(self, key: str) -> bool:
        """Forgets the pod; True when the gang itself should leave the cache (an annotation gang, or one
        never initialised, with no child left)."""
        self.children.pop(key, None)
        self.pending.pop(key, None)
        self.group_info.delete_if_representative(key)
        self.waiting_for_bind.pop(key, None)
        if not self.waiting_for_bind:
            self.group_info.remove_waiting_gang(self.name)
        self.bound.pop(key, None)
        return self.gang_from == GANG_FROM_POD_ANNOTATION and not self.children

    # --- questions -----------------------------------------------------------------------------------
    def once_satisfied_and_policy(self) -> bool:
        """``once-satisfied`` policy and the group has been satisfied once: most gang checks are skipped."""
        return self.match_policy == MATCH_ONCE_SATISFIED and self.group_info.once_resource_satisfied

    def valid_for_permit(self) -> bool:
        """docs/rules/scheduler-coscheduling.md#permit"""
        if not self.has_init:
            return False
        waiting = len(self.waiting_for_bind)
        if self.match_policy == "only-waiting":
            return waiting >= self.min_required
        if self.match_policy == "waiting-and-running":
            return waiting + len(self.bound) >= self.min_required
        return waiting >= self.min_required or self.group_info.once_resource_satisfied


def _strs(value: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): v for k, v in value.items() if isinstance(v, str)}


def _total(annotations: Mapping[str, str]) -> int:
    text = annotations.get(ANNOTATION_GANG_TOTAL_NUM, "")
    return go_parse_int32(text) if text else 0


def _pod_wait_time(annotations: Mapping[str, str], args: CoschedulingArgs) -> int:
    """The waiting-time annotation; zero, absent, negative or unparsable all give the default."""
    text = annotations.get(ANNOTATION_GANG_WAIT_TIME, "")
    if not text:
        return args.default_timeout
    try:
        wait = parse_go_duration(text)
    except DurationError:
        return args.default_timeout
    return args.default_timeout if wait <= 0 else wait
