"""PreFilter of NodeNUMAResource (docs/rules/scheduler-nodenumaresource.md#prefilter): whether the
plugin acts on the pod at all, how many whole CPUs it needs, and whether (and by which policies) it asks
for an exclusive cpuset — only LSE/LSR pods of koord-prod do by themselves.
Pure. Imports: the standard library, apis (numa, pod, qos), scheduler.framework (status, units).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from apis.numa import (
    BIND_DEFAULT,
    BIND_FULL_PCPUS,
    BIND_SPREAD_BY_PCPUS,
    PLUGIN_NAME,
    parse_numa_topology_spec,
    parse_resource_spec,
)
from apis.pod import pod_annotations, pod_requests
from apis.qos import PriorityClass, QoSClass, priority_class_with_default, qos_class_raw
from scheduler.framework.status import Status
from scheduler.framework.units import to_values

ERR_INVALID_REQUESTED_CPUS: Final = "the requested CPUs must be integer"


@dataclass(frozen=True, slots=True)
class PodState:
    """PreFilter's answer for one pod, kept in CycleState."""

    skip: bool = True
    requests: Mapping[str, int] = field(default_factory=dict)  # snapshot units (cpu in milli)
    num_cpus_needed: int = 0
    request_cpu_bind: bool = False
    required_policy: str = ""
    preferred_policy: str = ""
    exclusive_policy: str = ""
    numa_policy: str = ""

    @property
    def cpu_milli(self) -> int:
        return self.requests.get("cpu", 0)

    def clone(self) -> PodState:
        return self  # immutable


SKIP: Final = PodState()


def allow_use_cpuset(pod: Mapping[str, Any]) -> bool:
    """Raw QoS LSE or LSR and priority class (with default) koord-prod."""
    return (
        qos_class_raw(pod) in (QoSClass.LSE, QoSClass.LSR)
        and priority_class_with_default(pod) is PriorityClass.PROD
    )


def pre_filter(pod: Mapping[str, Any], default_bind_policy: str) -> tuple[Status, PodState]:
    """(status, state): ERROR when an annotation does not decode, SKIP when the pod requests nothing,
    UNSCHEDULABLE_AND_UNRESOLVABLE for a fractional cpu request of a binding pod."""
    annotations = pod_annotations(pod)
    try:
        spec = parse_resource_spec(annotations)
        numa = parse_numa_topology_spec(annotations)
    except ValueError as e:
        return Status.error(str(e), plugin=PLUGIN_NAME), SKIP
    quantities = pod_requests(pod)
    if all(q.is_zero() for q in quantities.values()):
        return Status.skip(), SKIP
    requests = to_values(quantities)
    cpu = requests.get("cpu", 0)
    state = PodState(False, requests, cpu // 1000, numa_policy=numa.numa_topology_policy)
    if not allow_use_cpuset(pod):
        return Status.success(), state
    bind = spec.preferred_cpu_bind_policy
    if bind in ("", BIND_DEFAULT):
        bind = default_bind_policy
    required = spec.required_cpu_bind_policy
    if required == BIND_DEFAULT:
        required = default_bind_policy
    if required:
        bind = required
    if bind not in (BIND_FULL_PCPUS, BIND_SPREAD_BY_PCPUS):
        return Status.success(), state
    if cpu % 1000:
        return Status.unresolvable(ERR_INVALID_REQUESTED_CPUS, plugin=PLUGIN_NAME), state
    if cpu > 0:
        exclusive = spec.preferred_cpu_exclusive_policy
        state = PodState(
            False, requests, cpu // 1000, True, required, bind, exclusive, numa.numa_topology_policy
        )
    return Status.success(), state
