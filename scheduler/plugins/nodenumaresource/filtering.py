"""Filter of NodeNUMAResource for one node (docs/rules/scheduler-nodenumaresource.md#filter), NUMA
topology policy none: the NUMA policy match, the binding a node may force on any pod, the amplified-cpu
check, and for a binding pod the topology, the policy conflict, the SMT alignment and a trial
allocation. NUMA policies Restricted / SingleNUMANode fit pods to NUMA nodes upstream; that part is not
built here and such nodes pass after the checks above
(docs/rules/scheduler-nodenumaresource.md#numa-policies).
Pure. Imports: the standard library, apis.numa, scheduler.framework.status, this package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from apis.numa import (
    BIND_FULL_PCPUS,
    BIND_SPREAD_BY_PCPUS,
    LABEL_NUMA_ALLOCATE_STRATEGY,
    LABEL_NUMA_TOPOLOGY_POLICY,
    NODE_BIND_FULL_PCPUS_ONLY,
    NODE_BIND_NONE,
    NODE_BIND_SPREAD_BY_PCPUS,
    NUMA_POLICY_NONE,
    PLUGIN_NAME,
    amplification_ratios,
    amplify,
    node_cpu_bind_policy,
)
from scheduler.framework.status import Status
from scheduler.plugins.nodenumaresource.accumulator import AllocationError
from scheduler.plugins.nodenumaresource.allocation import NodeAllocation
from scheduler.plugins.nodenumaresource.cpuset_alloc import Request, allocate_cpuset, bind_policy_used
from scheduler.plugins.nodenumaresource.prefilter import ERR_INVALID_REQUESTED_CPUS, PodState
from scheduler.plugins.nodenumaresource.topology import TopologyOptions

ERR_NOT_MATCH_NUMA_TOPOLOGY: Final = "node(s) NUMA Topology policy not match"
ERR_INVALID_CPU_TOPOLOGY: Final = "node(s) invalid CPU Topology"
ERR_SMT_ALIGNMENT: Final = "node(s) requested cpus not multiple cpus per core"
ERR_CPU_BIND_POLICY_CONFLICT: Final = "node(s) cpu bind policy conflicts with pod's required cpu bind policy"
ERR_INVALID_AMPLIFICATION_RATIO: Final = "node(s) invalid CPU amplification ratio"
ERR_INSUFFICIENT_AMPLIFIED_CPU: Final = "Insufficient amplified cpu"


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What Filter, Reserve and Score read of one node. ``options`` None: no NodeResourceTopology."""

    labels: Mapping[str, Any]
    annotations: Mapping[str, Any]
    options: TopologyOptions | None
    allocation: NodeAllocation
    allocatable_cpu: int = 0  # milli
    requested_cpu: int = 0  # milli, the node's pods
    name: str = ""
    preemptible: frozenset[int] = frozenset()  # CPUs of the pods preemption took off this node

    @property
    def node_bind_policy(self) -> str:
        return node_cpu_bind_policy(self.labels, None if self.options is None else self.options.kubelet)

    @property
    def topology_valid(self) -> bool:
        return self.options is not None and self.options.topology.valid

    def strategy(self, default: str) -> str:
        """The node label ``numa-allocate-strategy`` when non-empty, else the plugin's default."""
        label = self.labels.get(LABEL_NUMA_ALLOCATE_STRATEGY)
        return str(label) if label else default

    def numa_policy(self, pod_policy: str) -> tuple[str, bool]:
        """(merged NUMA policy, matched?): the node label, else the kubelet's; the pod's wins when set."""
        node = str(self.labels.get(LABEL_NUMA_TOPOLOGY_POLICY) or "")
        if not node and self.options is not None:
            node = self.options.numa_policy
        if node and pod_policy and node != pod_policy:
            return "", False
        return pod_policy or node, True

    def allocated_cpus(self) -> int | None:
        """How many CPUs the node's pods hold; None when the topology is present but invalid."""
        if self.options is None:
            return 0
        if not self.options.topology.valid:
            return None
        return len(self.allocation.cpus)


def request_cpu_bind(state: PodState, node_policy: str) -> tuple[bool, Status | None]:
    """The pod binds when PreFilter said so, or when the node forces a policy and it requests cpu."""
    if state.request_cpu_bind:
        return True, None
    if state.cpu_milli == 0:
        return False, None
    if node_policy not in ("", NODE_BIND_NONE):
        if state.cpu_milli % 1000:
            return False, Status.unresolvable(ERR_INVALID_REQUESTED_CPUS, plugin=PLUGIN_NAME)
        return True, None
    return False, None


def cpu_ratio(annotations: Mapping[str, Any]) -> float:
    """The node's cpu amplification ratio (-1 when unset); ValueError when the annotation is bad,
    including a ratio out of float64's range, as Go's decoder has it
    (docs/rules/scheduler-nodenumaresource.md#filter)."""
    ratios = amplification_ratios(annotations)
    if ratios is None:
        return -1.0
    return ratios.get("cpu", -1.0)


def filter_amplified(state: PodState, facts: NodeFacts, bind: bool) -> Status | None:
    pod_cpu = state.cpu_milli
    if pod_cpu == 0:
        return None
    try:
        ratio = cpu_ratio(facts.annotations)
    except ValueError:
        return Status.unresolvable(ERR_INVALID_AMPLIFICATION_RATIO, plugin=PLUGIN_NAME)
    if ratio <= 1:
        return None
    if bind:
        pod_cpu = amplify(pod_cpu, ratio)
    held = facts.allocated_cpus()
    if held is None:
        return Status.unresolvable(ERR_INVALID_CPU_TOPOLOGY, plugin=PLUGIN_NAME)
    allocated = held * 1000
    requested = facts.requested_cpu
    if requested >= allocated > 0:  # bound CPUs count amplified
        requested = requested - allocated + amplify(allocated, ratio)
    if pod_cpu > facts.allocatable_cpu - requested:
        return Status.unschedulable(ERR_INSUFFICIENT_AMPLIFIED_CPU, plugin=PLUGIN_NAME)
    return None


# A trial allocation: the error text, or None when it fits (the plugin memoises it per node).
Trial = Callable[[NodeFacts, Request], str | None]


def run_trial(facts: NodeFacts, req: Request) -> str | None:
    assert facts.options is not None
    try:
        allocate_cpuset(facts.options, facts.allocation, req)
    except AllocationError as e:
        return str(e)
    return None


def filter_node(state: PodState, facts: NodeFacts, default_strategy: str, trial: Trial = run_trial) -> Status:
    """The Filter status of the pod on this node."""
    if state.skip:
        return Status.success()
    numa_policy, matched = facts.numa_policy(state.numa_policy)
    if not matched:
        return Status.unresolvable(ERR_NOT_MATCH_NUMA_TOPOLOGY, plugin=PLUGIN_NAME)
    node_policy = facts.node_bind_policy
    bind, status = request_cpu_bind(state, node_policy)
    if status is not None:
        return status
    status = filter_amplified(state, facts, bind)
    if status is not None:
        return status
    if not bind:
        return Status.success()
    if facts.options is None or not facts.options.topology.valid:
        return Status.unresolvable(ERR_INVALID_CPU_TOPOLOGY, plugin=PLUGIN_NAME)
    required = state.required_policy
    if node_policy == NODE_BIND_FULL_PCPUS_ONLY:
        required = BIND_FULL_PCPUS
    elif node_policy == NODE_BIND_SPREAD_BY_PCPUS:
        required = BIND_SPREAD_BY_PCPUS
    if state.required_policy and state.required_policy != required:
        return Status.unresolvable(ERR_CPU_BIND_POLICY_CONFLICT, plugin=PLUGIN_NAME)
    if required == BIND_FULL_PCPUS and state.num_cpus_needed % facts.options.topology.cpus_per_core:
        return Status.unresolvable(ERR_SMT_ALIGNMENT, plugin=PLUGIN_NAME)
    if required and numa_policy == NUMA_POLICY_NONE:
        error = trial(facts, pod_request(state, facts, default_strategy))
        if error is not None:
            return Status.unschedulable(error, plugin=PLUGIN_NAME)
    return Status.success()


def pod_request(state: PodState, facts: NodeFacts, default_strategy: str) -> Request:
    """The allocation request of a binding pod on this node."""
    policy, required = bind_policy_used(state.required_policy, state.preferred_policy, facts.node_bind_policy)
    strategy = facts.strategy(default_strategy)
    return Request(
        state.num_cpus_needed,
        policy,
        required,
        state.exclusive_policy,
        strategy,
        preemptible=facts.preemptible,
    )
