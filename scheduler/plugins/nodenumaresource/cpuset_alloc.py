"""Allocating a pod's cpuset on one node (docs/rules/scheduler-nodenumaresource.md#allocation): the
bind policy used (the pod's required one, else the node's forced one, else the pod's preferred one),
the available CPUs narrowed for a required policy, the accumulator over them, and the check that a
required policy's result really is whole cores / one CPU per core. Reserve runs it, Filter runs it as a
trial. Pure. Imports: the standard library, apis.numa, this package.
"""

from __future__ import annotations

from dataclasses import dataclass

from apis.numa import (
    BIND_FULL_PCPUS,
    BIND_SPREAD_BY_PCPUS,
    NODE_BIND_FULL_PCPUS_ONLY,
    NODE_BIND_SPREAD_BY_PCPUS,
)
from scheduler.plugins.nodenumaresource.accumulator import (
    ERR_NOT_ENOUGH_CPUS,
    AllocationError,
    take_preferred_cpus,
)
from scheduler.plugins.nodenumaresource.allocation import NodeAllocation
from scheduler.plugins.nodenumaresource.topology import CPUTopology, TopologyOptions


def bind_policy_used(required: str, preferred: str, node_policy: str) -> tuple[str, bool]:
    """(policy, required?): the pod's required policy, else the node's forced one, else the preferred."""
    if required:
        return required, True
    if node_policy == NODE_BIND_SPREAD_BY_PCPUS:
        return BIND_SPREAD_BY_PCPUS, True
    if node_policy == NODE_BIND_FULL_PCPUS_ONLY:
        return BIND_FULL_PCPUS, True
    return preferred, False


def _by_core(topo: CPUTopology, cpus: frozenset[int]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for c in cpus:
        info = topo.details.get(c)
        if info is not None:
            out.setdefault(info.core, []).append(c)
    return out


def filter_required(policy: str, available: frozenset[int], topo: CPUTopology) -> frozenset[int]:
    """FullPCPUs keeps the CPUs of cores that are wholly available; SpreadByPCPUs the lowest available
    CPU of each core; any other policy keeps all."""
    if policy == BIND_FULL_PCPUS:
        per_core = topo.cpus_per_core
        return frozenset(
            c for cpus in _by_core(topo, available).values() if len(cpus) == per_core for c in cpus
        )
    if policy == BIND_SPREAD_BY_PCPUS:
        return frozenset(min(cpus) for cpus in _by_core(topo, available).values())
    return available


def check_required(policy: str, cpus: frozenset[int], topo: CPUTopology) -> None:
    cores = len(_by_core(topo, cpus))
    if (policy == BIND_FULL_PCPUS and cores * topo.cpus_per_core != len(cpus)) or (
        policy == BIND_SPREAD_BY_PCPUS and cores != len(cpus)
    ):
        raise AllocationError(f"insufficient CPUs to satisfy required cpu bind policy {policy}")


@dataclass(frozen=True, slots=True)
class Request:
    """What the allocation needs to know of the pod on this node."""

    need: int
    policy: str
    required: bool
    exclusive_policy: str
    strategy: str
    preferred: frozenset[int] = frozenset()
    preemptible: frozenset[int] = frozenset()  # victims' CPUs: available again, not preferred


def allocate_cpuset(options: TopologyOptions, node: NodeAllocation, req: Request) -> frozenset[int]:
    """The pod's cpuset; AllocationError with the reason."""
    topo = options.topology
    given_back = [req.preferred, req.preemptible]
    available, details = node.available(topo, options.max_ref_count, options.reserved_cpus, given_back)
    if req.required:
        available = filter_required(req.policy, available, topo)
    if len(available) < req.need:
        raise AllocationError(ERR_NOT_ENOUGH_CPUS)
    result: frozenset[int] = frozenset()
    if req.need > 0:
        result = take_preferred_cpus(
            topo, options.max_ref_count, available, req.preferred, details, req.need,
            req.policy, req.exclusive_policy, req.strategy,
        )  # fmt: skip
    if req.required:
        check_required(req.policy, result, topo)
    return result
