"""The assigned-pod cache (``podAssignCache``): pods with a node (informer, Reserve) and the per-node
sums of the pseudo-code in docs/rules/scheduler.md#pods-already-on-the-node. A node's sums are
recomputed when its NodeMetric changes; a pod joining or leaving shifts them by that pod's contribution
alone (the sums are plain integer sums of contributions, so this is exact), which keeps a pod event
O(resources) instead of O(pods on the node).
Terminated pods and reservation placeholder pods are not cached; an update that changes ``nodeName``
moves the pod; a spec or condition change re-computes the entry; deletes remove it. Nodes whose sums
changed are collected in ``dirty`` for the plugin's per-row refresh.
Imports: the standard library, apis (constants, pod, qos), scheduler.plugins.loadaware (args, estimator,
nodemetric_cache, usage).
"""

from __future__ import annotations

from apis import constants as c
from apis.kubeobjects import Pod
from apis.pod import is_terminated, metadata, pod_annotations, pod_key, spec, status
from apis.qos import PriorityClass
from scheduler.plugins.loadaware.args import LoadAwareSchedulingArgs
from scheduler.plugins.loadaware.estimator import Estimator, assign_timestamp
from scheduler.plugins.loadaware.nodemetric_cache import NodeMetricCache
from scheduler.plugins.loadaware.usage import NodeSums, PodEntry, node_sums, pod_contribution, shift


def pod_id(pod: Pod) -> str:
    """The cache key: ``metadata.uid`` when set, else ``namespace/name``."""
    uid = metadata(pod).get("uid")
    return uid if isinstance(uid, str) and uid else pod_key(pod)


def node_name_of(pod: Pod) -> str:
    name = spec(pod).get("nodeName")
    return name if isinstance(name, str) else ""


def is_reserve_pod(pod: Pod) -> bool:
    return pod_annotations(pod).get(c.ANNOTATION_RESERVE_POD) == "true"


class AssignCache:
    """Assigned pods per node and their sums. ``now`` arguments are the scheduler's clock (epoch s)."""

    def __init__(self, args: LoadAwareSchedulingArgs, estimator: Estimator, metrics: NodeMetricCache) -> None:
        self.args = args
        self.estimator = estimator
        self.metrics = metrics
        self.r = len(estimator.resources)
        self.pods: dict[str, dict[str, PodEntry]] = {}
        self.objects: dict[str, Pod] = {}
        self.node_of: dict[str, str] = {}
        self.sums: dict[str, NodeSums] = {}
        self.dirty: set[str] = set()
        zero = (0,) * self.r
        self.zero_sums = NodeSums(zero, zero, zero, zero)

    # --- queries ----------------------------------------------------------------------------------
    def sums_of(self, node: str) -> NodeSums:
        return self.sums.get(node, self.zero_sums)

    def entries_on(self, node: str) -> list[PodEntry]:
        return list(self.pods.get(node, {}).values())

    # --- recomputation ----------------------------------------------------------------------------
    def recompute(self, node: str) -> None:
        """Re-derive the node's sums from its NodeMetric entry and cached pods."""
        pods = self.pods.get(node)
        entry = self.metrics.get(node)
        if entry is None or not pods:
            if entry is None:
                self.sums.pop(node, None)
            else:
                self.sums[node] = node_sums(self.args, self.r, entry, ())
        else:
            self.sums[node] = node_sums(self.args, self.r, entry, list(pods.values()))
        self.dirty.add(node)

    # --- assignment -------------------------------------------------------------------------------
    def assign(self, node: str, pod: Pod, now: float) -> None:
        """Cache ``pod`` on ``node`` (replacing its previous entry, wherever it was)."""
        if not node or is_terminated(pod) or is_reserve_pod(pod):
            return
        pid = pod_id(pod)
        old_node = self.node_of.get(pid)
        if old_node is not None and old_node != node:
            self._remove(pid)
        timestamp = assign_timestamp(pod, now)
        estimate, priority_class = self.estimator.assigned_facts(pod)
        entry = PodEntry(
            key=pod_key(pod),
            estimate=estimate,
            timestamp=timestamp,
            deadline=self.estimator.deadline(pod, timestamp),
            prod=priority_class is PriorityClass.PROD,
        )
        on_node = self.pods.setdefault(node, {})
        before = on_node.get(pid)
        on_node[pid] = entry
        self.objects[pid] = pod
        self.node_of[pid] = node
        self._shift(node, before, entry)

    def _shift(self, node: str, gone: PodEntry | None, came: PodEntry | None) -> None:
        """The node's sums after ``gone`` left and ``came`` joined (either may be None)."""
        metric = self.metrics.get(node)
        sums = self.sums.get(node)
        if metric is None or sums is None:
            self.recompute(node)
            return
        if gone is not None:
            sums = shift(sums, pod_contribution(metric, gone, self.r), -1)
        if came is not None:
            sums = shift(sums, pod_contribution(metric, came, self.r), 1)
        self.sums[node] = sums
        self.dirty.add(node)

    def unassign(self, node: str, pod: Pod) -> None:
        pid = pod_id(pod)
        if self.node_of.get(pid) == node:
            self._remove(pid)

    def _remove(self, pid: str) -> None:
        node = self.node_of.pop(pid, None)
        self.objects.pop(pid, None)
        if node is None:
            return
        on_node = self.pods.get(node, {})
        gone = on_node.pop(pid, None)
        if not on_node:
            self.pods.pop(node, None)
        self._shift(node, gone, None)

    # --- informer events --------------------------------------------------------------------------
    def on_add(self, pod: Pod, now: float) -> None:
        self.assign(node_name_of(pod), pod, now)

    def on_update(self, old: Pod | None, new: Pod, now: float) -> None:
        pid = pod_id(new)
        if old is not None and pod_id(old) != pid:
            self._remove(pod_id(old))
        node = node_name_of(new)
        cached_node = self.node_of.get(pid)
        if cached_node is not None and (not node or is_terminated(new) or is_reserve_pod(new)):
            self._remove(pid)
            return
        if cached_node is None or cached_node != node:
            self.assign(node, new, now)
            return
        cached = self.objects[pid]
        if spec(cached) != spec(new) or status(cached).get("conditions") != status(new).get("conditions"):
            self.assign(node, new, now)
        else:
            self.objects[pid] = new

    def on_delete(self, pod: Pod) -> None:
        self._remove(pod_id(pod))
