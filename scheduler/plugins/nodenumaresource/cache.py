"""NodeNUMAResource's per-node state, fed by events (docs/rules/scheduler-nodenumaresource.md#wiring):
each node's topology options (from its NodeResourceTopology) and CPU allocation (assigned pods'
``resource-status`` cpusets, and the pods Reserve assumed), keyed by pod id (uid, else namespace/name)
so a pod assumed and then seen bound counts once. Also the nodes whose NodeResourceTopology alone makes
the plugin act on every pod (a kubelet forcing full cores, a NUMA topology policy), so the vectorised
Filter and Score visit only those rows. Imports: the standard library, apis (cpuset, numa, pod), this
package.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apis.cpuset import CPUSetError, parse_cpuset
from apis.numa import (
    NODE_BIND_FULL_PCPUS_ONLY,
    node_cpu_bind_policy,
    parse_resource_spec,
    parse_resource_status,
)
from apis.pod import is_terminated, pod_annotations, pod_key
from scheduler.plugins.nodenumaresource.allocation import NodeAllocation, PodAllocation
from scheduler.plugins.nodenumaresource.topology import TopologyOptions, options_of


def pod_id(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return str(meta.get("uid") or "") or pod_key(pod)


def _node_name(pod: Mapping[str, Any]) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def pod_allocation(pod: Mapping[str, Any]) -> PodAllocation | None:
    """An assigned pod's allocation from its annotations; None when they do not decode or hold nothing."""
    ann = pod_annotations(pod)
    try:
        status = parse_resource_status(ann)
        spec = parse_resource_spec(ann)
        cpus = parse_cpuset(status.cpuset)
    except (ValueError, CPUSetError):
        return None
    if not cpus and not status.numa_node_resources:
        return None
    return PodAllocation(cpus, spec.preferred_cpu_exclusive_policy)


class NUMACache:
    def __init__(self) -> None:
        self.options: dict[str, TopologyOptions] = {}
        self.allocations: dict[str, NodeAllocation] = {}
        self.pod_nodes: dict[str, str] = {}  # pod id -> node of its allocation
        self.forcing: set[str] = set()  # nodes whose kubelet forces full cores on every pod
        self.numa: set[str] = set()  # nodes whose kubelet reports a NUMA topology policy
        self.valid: set[str] = set()  # nodes with a valid CPU topology

    # --- topology -----------------------------------------------------------------------------------
    def on_topology(self, node_name: str, nrt: Mapping[str, Any] | None) -> None:
        """A NodeResourceTopology added or updated (None: deleted); MaxRefCount is kept."""
        old = self.options.get(node_name)
        self.forcing.discard(node_name)
        self.numa.discard(node_name)
        self.valid.discard(node_name)
        if nrt is None:
            self.options.pop(node_name, None)
            return
        opts = options_of(nrt, old.max_ref_count if old is not None else 1)
        self.options[node_name] = opts
        if opts.topology.valid:
            self.valid.add(node_name)
        if opts.numa_policy:
            self.numa.add(node_name)
        if node_cpu_bind_policy({}, opts.kubelet) == NODE_BIND_FULL_PCPUS_ONLY:
            self.forcing.add(node_name)

    # --- allocations --------------------------------------------------------------------------------
    def allocation(self, node_name: str) -> NodeAllocation:
        found = self.allocations.get(node_name)
        if found is None:
            found = self.allocations[node_name] = NodeAllocation()
        return found

    def assign(self, node_name: str, key: str, alloc: PodAllocation) -> None:
        old = self.pod_nodes.get(key)
        if old is not None and old != node_name:
            self.release(old, key)
        self.allocation(node_name).update(key, alloc)
        self.pod_nodes[key] = node_name

    def release(self, node_name: str, key: str) -> None:
        found = self.allocations.get(node_name)
        if found is not None:
            found.release(key)
        if self.pod_nodes.get(key) == node_name:
            del self.pod_nodes[key]

    # --- assigned pods ------------------------------------------------------------------------------
    def on_pod_add(self, pod: Mapping[str, Any]) -> None:
        self._update(None, pod)

    def on_pod_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        self._update(old, new)

    def on_pod_delete(self, pod: Mapping[str, Any]) -> None:
        node = _node_name(pod)
        if node:
            self.release(node, pod_id(pod))

    def _update(self, old: Mapping[str, Any] | None, pod: Mapping[str, Any]) -> None:
        node = _node_name(pod)
        if not node:
            if old is not None and _node_name(old):
                self.release(_node_name(old), pod_id(old))
            return
        if is_terminated(pod):
            self.on_pod_delete(pod)
            return
        alloc = pod_allocation(pod)
        if alloc is not None:  # nothing readable: an allocation Reserve assumed stays
            self.assign(node, pod_id(pod), alloc)
