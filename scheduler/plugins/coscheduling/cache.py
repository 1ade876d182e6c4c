"""The gang cache: every gang the scheduler knows, kept from pod and PodGroup informer events
(docs/rules/scheduler-coscheduling.md#gang-cache), the gang groups' shared state, and the GangSummary
view of a gang (docs/rules/scheduler-coscheduling.md#gangsummary).
Imports: the standard library, apis (duration, pod, podgroup, rfc3339), this package's gang and args.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from apis.duration import format_go_duration
from apis.pod import is_terminated, pod_key
from apis.podgroup import PodGroup, gang_id, gang_name, has_pod_group_label, node_name
from scheduler.plugins.coscheduling.args import CoschedulingArgs
from scheduler.plugins.coscheduling.gang import Gang, GangGroupInfo

Pod = Mapping[str, Any]


def utcnow() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


class GangCache:
    """Gangs by id (``ns/gangName``) and group infos by group id."""

    def __init__(self, args: CoschedulingArgs, clock: Callable[[], _dt.datetime] = utcnow) -> None:
        self.args = args
        self.clock = clock
        self.gangs: dict[str, Gang] = {}
        self.groups: dict[str, GangGroupInfo] = {}

    # --- lookups ---------------------------------------------------------------------------------------
    def get(self, gid: str) -> Gang | None:
        return self.gangs.get(gid)

    def gang_of(self, pod: Pod) -> Gang | None:
        """The pod's gang, None for a pod of no gang or whose gang is not cached."""
        return self.gangs.get(gang_id(pod)) if gang_name(pod) else None

    def _get_or_create(self, gid: str) -> Gang:
        gang = self.gangs.get(gid)
        if gang is None:
            gang = self.gangs[gid] = Gang(gid, self.clock())
        return gang

    def _group_info(self, gang: Gang) -> GangGroupInfo:
        info = self.groups.get(gang.gang_group_id)
        if info is None:
            info = GangGroupInfo(gang.gang_group_id, gang.gang_group, initialized=True)
            self.groups[gang.gang_group_id] = info
        return info

    def members(self, gang: Gang) -> Iterable[Gang]:
        """The cached gangs of this gang's group, in the group's (sorted) order."""
        for gid in gang.gang_group:
            member = self.gangs.get(gid)
            if member is not None:
                yield member

    def waiting_pods_num(self, group: Iterable[str]) -> int:
        return sum(len(g.waiting_for_bind) for gid in group if (g := self.gangs.get(gid)) is not None)

    # --- pod events ------------------------------------------------------------------------------------
    def on_pod_add(self, pod: Pod) -> None:
        if not gang_name(pod):
            return
        gang = self._get_or_create(gang_id(pod))
        if not has_pod_group_label(pod):  # declared by annotation: the pod may initialise the gang
            gang.try_init_from_pod(pod, self.args)
            gang.attach_group_info(self._group_info(gang))
        key, node = pod_key(pod), node_name(pod)
        gang.set_child(pod, key, node)
        if node:
            gang.add_bound(pod)

    def on_pod_update(self, old: Pod | None, new: Pod) -> None:
        """Updates of terminated pods are ignored (their adds are not)."""
        if not gang_name(new) or is_terminated(new):
            return
        self.on_pod_add(new)

    def on_pod_delete(self, pod: Pod) -> None:
        if not gang_name(pod):
            return
        gid = gang_id(pod)
        gang = self.gangs.get(gid)
        if gang is None or not gang.delete_pod(pod_key(pod)):
            return
        self._drop_gang(gang)

    # --- PodGroup events -------------------------------------------------------------------------------
    def on_pod_group_add(self, pg: PodGroup) -> None:
        """Add and update alike: create the gang when missing, (re)initialise it from the PodGroup."""
        gang = self._get_or_create(pg.key)
        gang.init_from_pod_group(pg, self.args)
        gang.attach_group_info(self._group_info(gang))

    def on_pod_group_update(self, old: PodGroup | None, new: PodGroup) -> None:
        self.on_pod_group_add(new)

    def on_pod_group_delete(self, namespace: str, name: str) -> None:
        gang = self.gangs.get(f"{namespace}/{name}")
        if gang is None:
            return
        gang.group_info.remove_waiting_gang(gang.name)
        self._drop_gang(gang)

    def _drop_gang(self, gang: Gang) -> None:
        """The gang leaves the cache; its group info too when no gang of its group remains."""
        del self.gangs[gang.name]
        if not any(gid in self.gangs for gid in gang.gang_group):
            self.groups.pop(gang.group_info.group_id, None)

    # --- views -----------------------------------------------------------------------------------------
    def summary(self, gid: str) -> dict[str, Any] | None:
        gang = self.gangs.get(gid)
        return None if gang is None else gang_summary(gang)

    def summaries(self) -> dict[str, dict[str, Any]]:
        return {gid: gang_summary(g) for gid, g in sorted(self.gangs.items())}


def gang_summary(gang: Gang) -> dict[str, Any]:
    """docs/rules/scheduler-coscheduling.md#gangsummary (pod-key lists sorted)."""
    return {
        "name": gang.name,
        "waitTime": format_go_duration(gang.wait_time),
        "mode": gang.mode,
        "gangMatchPolicy": gang.match_policy,
        "minRequiredNumber": gang.min_required,
        "totalChildrenNum": gang.total_children,
        "gangGroup": list(gang.gang_group),
        "gangGroupId": gang.gang_group_id,
        "children": sorted(gang.children),
        "pendingChildren": sorted(gang.pending),
        "waitingForBindChildren": sorted(gang.waiting_for_bind),
        "boundChildren": sorted(gang.bound),
        "onceResourceSatisfied": gang.group_info.once_resource_satisfied,
        "gangFrom": gang.gang_from,
        "hasGangInit": gang.has_init,
    }
