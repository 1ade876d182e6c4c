"""Oracle for the Coscheduling gang cache (docs/rules/scheduler-coscheduling.md#gang-cache), for
annotation-declared gangs: each pod is in exactly one state (absent, pending, waitingForBind, bound) and
the cache's per-gang sets, the gangs it holds, its group infos and their satisfied-once flags follow
from those states as the rules say. Property tests replay the same events through both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ABSENT, PENDING, WAITING, BOUND = "absent", "pending", "waitingForBind", "bound"


@dataclass
class GangCacheOracle:
    """Pods by key (``ns/name``) with their gang id and state; groups by gang id (one fixed group per
    gang); the groups satisfied once since their group info was created."""

    gang_of: dict[str, str]
    group_of: dict[str, str]  # gang id -> group id
    state: dict[str, str] = field(default_factory=dict)
    satisfied: set[str] = field(default_factory=set)

    def _present_gangs(self) -> set[str]:
        return {self.gang_of[k] for k, s in self.state.items() if s != ABSENT}

    def add(self, key: str, node: bool) -> None:
        """Pod add or update: a pod with a node is bound (the group satisfied once); one without stays
        waiting for bind if it was, else is pending."""
        if node:
            self.state[key] = BOUND
            self.satisfied.add(self.group_of[self.gang_of[key]])
        elif self.state.get(key, ABSENT) != WAITING:
            self.state[key] = PENDING

    def permit(self, key: str) -> None:
        self.state[key] = WAITING

    def unreserve(self, key: str) -> None:
        if self.state.get(key) == WAITING:
            self.state[key] = PENDING

    def post_bind(self, key: str) -> None:
        self.state[key] = BOUND
        self.satisfied.add(self.group_of[self.gang_of[key]])

    def delete(self, key: str) -> None:
        self.state[key] = ABSENT
        present = {self.group_of[g] for g in self._present_gangs()}
        self.satisfied &= present  # a group info leaves with the last gang of its group

    def gangs(self) -> dict[str, dict[str, list[str]]]:
        """Per present gang: its sorted children and the three state sets."""
        out: dict[str, dict[str, list[str]]] = {}
        for gid in sorted(self._present_gangs()):
            keys = sorted(
                k for k, g in self.gang_of.items() if g == gid and self.state.get(k, ABSENT) != ABSENT
            )
            out[gid] = {
                "children": keys,
                "pendingChildren": [k for k in keys if self.state[k] == PENDING],
                "waitingForBindChildren": [k for k in keys if self.state[k] == WAITING],
                "boundChildren": [k for k in keys if self.state[k] == BOUND],
            }
        return out

    def groups(self) -> set[str]:
        return {self.group_of[g] for g in self._present_gangs()}
