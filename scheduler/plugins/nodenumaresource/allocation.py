"""A node's CPU allocation state (docs/rules/scheduler-nodenumaresource.md#allocation): for every
allocated CPU its reference count and the exclusive policy of the newest pod that took it, and each
pod's allocation (keyed by pod id, so a pod assumed by Reserve and then seen bound counts once).
Pure. Imports: the standard library, this package (topology).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from scheduler.plugins.nodenumaresource.topology import CPUTopology


@dataclass(slots=True)
class CPUAlloc:
    """One allocated CPU: how many pods hold it and the exclusive policy of the last one added."""

    ref_count: int
    exclusive_policy: str


@dataclass(frozen=True, slots=True)
class PodAllocation:
    cpus: frozenset[int]
    exclusive_policy: str = ""


@dataclass(slots=True)
class NodeAllocation:
    pods: dict[str, PodAllocation] = field(default_factory=dict)
    cpus: dict[int, CPUAlloc] = field(default_factory=dict)
    version: int = 0  # grows on every change (memo keys)

    def add(self, pod_id: str, alloc: PodAllocation) -> None:
        """A pod already present is left as it is (use ``update`` to replace it)."""
        if pod_id in self.pods:
            return
        self.pods[pod_id] = alloc
        for cpu in alloc.cpus:
            rec = self.cpus.get(cpu)
            if rec is None:
                self.cpus[cpu] = CPUAlloc(1, alloc.exclusive_policy)
            else:  # the newest pod's policy overwrites the CPU's
                self.cpus[cpu] = CPUAlloc(rec.ref_count + 1, alloc.exclusive_policy)
        self.version += 1

    def update(self, pod_id: str, alloc: PodAllocation) -> None:
        self.release(pod_id)
        self.add(pod_id, alloc)

    def release(self, pod_id: str) -> None:
        alloc = self.pods.pop(pod_id, None)
        if alloc is None:
            return
        for cpu in alloc.cpus:
            rec = self.cpus.get(cpu)
            if rec is None:
                continue
            if rec.ref_count <= 1:
                del self.cpus[cpu]
            else:
                self.cpus[cpu] = CPUAlloc(rec.ref_count - 1, rec.exclusive_policy)
        self.version += 1

    def available(
        self,
        topology: CPUTopology,
        max_ref_count: int,
        reserved: frozenset[int],
        preferred: Iterable[frozenset[int]] = (),
    ) -> tuple[frozenset[int], dict[int, CPUAlloc]]:
        """Available CPUs = topology CPUs − CPUs held ``max_ref_count`` times − ``reserved``, after each
        preferred set's CPUs had one reference given back; and the allocation details used."""
        details = dict(self.cpus)
        for cpus in preferred:
            for cpu in cpus:
                rec = details.get(cpu)
                if rec is None:
                    continue
                if rec.ref_count <= 1:
                    del details[cpu]
                else:
                    details[cpu] = CPUAlloc(rec.ref_count - 1, rec.exclusive_policy)
        full = {cpu for cpu, rec in details.items() if rec.ref_count >= max_ref_count}
        return frozenset(c for c in topology.details if c not in full and c not in reserved), details
