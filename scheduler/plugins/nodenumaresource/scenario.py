"""``koord simulate`` kind ``CPUSet``, the scheduler's operations
(docs/rules/scheduler-nodenumaresource.md#koord-simulate-kind-cpuset): ``takeCPUs`` (the accumulator,
through take_preferred_cpus when ``preferredCPUs`` is given), ``preFilter`` and ``filter`` (the plugin
itself over a one-node snapshot, its NodeResourceTopology built from the inputs). Bad input raises
ValueError naming the field and value. Pure.
Imports: the standard library, apis (cpuset, numa, objectcheck), scheduler.framework, this package.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

from apis.cpuset import CPUSetError, format_cpuset, parse_cpuset
from apis.numa import (
    ANNOTATION_CPU_TOPOLOGY,
    ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    ANNOTATION_NODE_RESERVATION,
    BIND_FULL_PCPUS,
    BIND_SPREAD_BY_PCPUS,
    EXCLUSIVE_NONE,
    EXCLUSIVE_NUMA_NODE_LEVEL,
    EXCLUSIVE_PCPU_LEVEL,
    NUMA_LEAST_ALLOCATED,
    NUMA_MOST_ALLOCATED,
    format_cpu_topology,
    go_marshal,
    parse_cpu_topology,
    parse_kubelet_cpu_manager_policy,
)
from apis.objectcheck import as_node, as_pod, show
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.plugins.nodenumaresource.accumulator import AllocationError, take_preferred_cpus
from scheduler.plugins.nodenumaresource.allocation import NodeAllocation, PodAllocation
from scheduler.plugins.nodenumaresource.plugin import NodeNUMAResource
from scheduler.plugins.nodenumaresource.topology import CPUTopology

Scenario = Mapping[str, Any]
CODES: Final = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.SKIP: "Skip",
}
_EXCLUSIVE: Final = ("", EXCLUSIVE_NONE, EXCLUSIVE_PCPU_LEVEL, EXCLUSIVE_NUMA_NODE_LEVEL)


# --- input -------------------------------------------------------------------------------------------
def _cpuset(s: Scenario, key: str) -> frozenset[int]:
    value = s.get(key, "")
    if value is None:
        return frozenset()
    if not isinstance(value, str):
        raise ValueError(f"{key}={show(value)}: expected a cpulist string")
    try:
        return parse_cpuset(value)
    except CPUSetError as e:
        raise ValueError(f"{key}={show(value)}: {e}") from None


def _int(s: Scenario, key: str, default: int, low: int) -> int:
    value = s.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < 2**31:
        raise ValueError(f"{key}={show(value)}: expected an integer from {low} below 2^31")
    return value


def _choice(s: Scenario, key: str, allowed: tuple[str, ...], default: str | None = None) -> str:
    value = s.get(key, default)
    if value not in allowed:
        raise ValueError(f"{key}={show(value)}: must be one of {', '.join(repr(a) for a in allowed)}")
    return str(value)


def _topology(s: Scenario) -> CPUTopology:
    return CPUTopology.of(parse_cpu_topology(s.get("cpuTopology"), "cpuTopology"))


def _allocation(s: Scenario) -> NodeAllocation:
    raw = s.get("allocatedPods") or []
    if not isinstance(raw, list):
        raise ValueError(f"allocatedPods={show(raw)}: expected a list")
    node = NodeAllocation()
    for i, entry in enumerate(raw):
        where = f"allocatedPods[{i}]"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}={show(entry)}: expected an object")
        cpus = _cpuset(entry, "cpuset") if "cpuset" in entry else frozenset()
        policy = entry.get("cpuExclusivePolicy") or ""
        if policy not in _EXCLUSIVE:
            raise ValueError(
                f"{where}.cpuExclusivePolicy={show(policy)}: must be None, PCPULevel or NUMANodeLevel"
            )
        node.add(f"allocated-{i}", PodAllocation(cpus, str(policy)))
    return node


# --- operations --------------------------------------------------------------------------------------
def _op_take_cpus(s: Scenario) -> dict[str, Any]:
    topo = _topology(s)
    max_ref = _int(s, "maxRefCount", 1, 1)
    node = _allocation(s)
    preferred = _cpuset(s, "preferredCPUs")
    available, details = node.available(topo, max_ref, _cpuset(s, "reservedCPUs"), [preferred])
    need = _int(s, "numCPUsNeeded", 0, 0)
    bind = _choice(s, "cpuBindPolicy", (BIND_FULL_PCPUS, BIND_SPREAD_BY_PCPUS))
    exclusive = _choice(s, "cpuExclusivePolicy", _EXCLUSIVE, "")
    strategy = _choice(
        s, "numaAllocateStrategy", (NUMA_MOST_ALLOCATED, NUMA_LEAST_ALLOCATED), NUMA_LEAST_ALLOCATED
    )
    try:
        cpus = take_preferred_cpus(
            topo, max_ref, available, preferred, details, need, bind, exclusive, strategy
        )
    except AllocationError as e:
        return {"cpuset": "", "error": str(e)}
    return {"cpuset": format_cpuset(cpus), "error": None}


def _plugin(s: Scenario) -> NodeNUMAResource:
    args = s.get("args")
    if args is not None and not isinstance(args, dict):
        raise ValueError(f"args={show(args)}: expected an object")
    try:
        return NodeNUMAResource.from_args(args)
    except ValueError as e:
        raise ValueError(f"args.{e}") from None


def _status(status: Status) -> dict[str, Any]:
    return {"status": CODES[status.code], "reason": status.message() or None}


def _op_pre_filter(s: Scenario) -> dict[str, Any]:
    plugin = _plugin(s)
    pod = as_pod(s.get("pod"), "pod")
    state = CycleState(0)
    status = plugin.pre_filter(state, pod, Snapshot())
    if not status.is_success():
        return _status(status)
    st = plugin.pod_state(state, pod)
    return {
        "status": "Success", "reason": None, "requestCPUBind": st.request_cpu_bind,
        "numCPUsNeeded": st.num_cpus_needed, "requiredCPUBindPolicy": st.required_policy,
        "preferredCPUBindPolicy": st.preferred_policy, "preferredCPUExclusivePolicy": st.exclusive_policy,
    }  # fmt: skip


def _nrt(s: Scenario, name: str) -> dict[str, Any] | None:
    """The node's NodeResourceTopology from the scenario's inputs; None without ``cpuTopology``."""
    if s.get("cpuTopology") is None:
        return None
    annotations = {
        ANNOTATION_CPU_TOPOLOGY: format_cpu_topology(parse_cpu_topology(s["cpuTopology"], "cpuTopology"))
    }
    kubelet = s.get("kubeletCPUManagerPolicy")
    if kubelet is not None:
        parse_kubelet_cpu_manager_policy(kubelet, "kubeletCPUManagerPolicy")
        annotations[ANNOTATION_KUBELET_CPU_MANAGER_POLICY] = go_marshal(kubelet)
    reserved = _cpuset(s, "reservedCPUs")
    if reserved:
        annotations[ANNOTATION_NODE_RESERVATION] = json.dumps({"reservedCPUs": format_cpuset(reserved)})
    policies = s.get("topologyPolicies") or []
    if not isinstance(policies, list):
        raise ValueError(f"topologyPolicies={show(policies)}: expected a list")
    return {"metadata": {"name": name, "annotations": annotations}, "topologyPolicies": policies}


def _op_filter(s: Scenario) -> dict[str, Any]:
    plugin = _plugin(s)
    node = as_node(s.get("node"), "node")
    name = str((node.get("metadata") or {}).get("name") or "node")
    node = {**node, "metadata": {**(node.get("metadata") or {}), "name": name}}
    pod = as_pod(s.get("pod"), "pod")
    pods = s.get("pods") or []
    if not isinstance(pods, list):
        raise ValueError(f"pods={show(pods)}: expected a list")
    assigned = [as_pod(p, f"pods[{i}]") for i, p in enumerate(pods)]
    plugin.on_topology(name, _nrt(s, name))
    opts = plugin.cache.options.get(name)
    if opts is not None:
        opts.max_ref_count = _int(s, "maxRefCount", 1, 1)
    for key, alloc in _allocation(s).pods.items():
        plugin.cache.assign(name, key, alloc)
    for p in assigned:
        plugin.on_pod_add(p)
    snapshot = Snapshot.build([node], assigned)
    state = CycleState(0)
    status = plugin.pre_filter(state, pod, snapshot)
    if status.is_skip():
        return {"status": "Success", "reason": None}
    if not status.is_success():
        return _status(status)
    return _status(plugin.filter_all(state, pod, snapshot).status_of(0))


OPERATIONS: Final[dict[str, Callable[[Scenario], dict[str, Any]]]] = {
    "takeCPUs": _op_take_cpus,
    "preFilter": _op_pre_filter,
    "filter": _op_filter,
}


def simulate(scenario: Scenario) -> dict[str, Any]:
    operation = scenario.get("operation")
    if not isinstance(operation, str) or operation not in OPERATIONS:
        raise ValueError(f"operation={show(operation)}: must be one of {', '.join(OPERATIONS)}")
    return OPERATIONS[operation](scenario)
