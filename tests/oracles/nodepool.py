"""Oracles for NodePool and ScarceDevice (docs/rules/scheduler-nodepool.md): each rule node by node, in
plain Python over the Node object of the row and the pod (no views, no tables, nothing kept between
calls). `oracle_for` maps a production plugin (either mode) to its oracle.
"""

from __future__ import annotations

from typing import Any

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Plugin, Pod
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.plugins import nodepool, scarcedevice


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def node_label(snapshot: Snapshot, i: int, key: str) -> str | None:
    """Row i's value of label `key` (JSON null reads as ""), None without the label."""
    labels = _map(_map(snapshot.infos[i].node.get("metadata")).get("labels"))
    if key not in labels:
        return None
    value = labels[key]
    return value if isinstance(value, str) else ""


def pod_asks_for(pod: Pod, key: str, value: str, *, own_label: bool) -> bool:
    """Whether the pod names `value` of `key`: nodeSelector, an In expression of a required term, or
    (own_label) the pod's own label."""
    spec = _map(pod.get("spec"))
    selector = _map(spec.get("nodeSelector"))
    if key in selector:
        wanted = selector[key] if isinstance(selector[key], str) else ""
        if wanted == value:
            return True
    affinity = _map(_map(spec.get("affinity")).get("nodeAffinity"))
    required = _map(affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
    for term in _list(required.get("nodeSelectorTerms")):
        for expr in _list(_map(term).get("matchExpressions")):
            e = _map(expr)
            if e.get("key") == key and e.get("operator") == "In" and value in _list(e.get("values")):
                return True
    if own_label:
        labels = _map(_map(pod.get("metadata")).get("labels"))
        if labels.get(key) == value:
            return True
    return False


class _Oracle:
    def __init__(self, plugin: Any, name: str, own_label: bool) -> None:
        self.args = plugin.args
        self.name = name
        self.own_label = own_label

    def counts(self, value: str) -> bool:
        """Whether a node with this label value is guarded at all."""
        return True

    def guarded(self, pod: Pod, snapshot: Snapshot, i: int) -> bool:
        """Row i carries a guarded value the pod did not ask for."""
        value = node_label(snapshot, i, self.args.label)
        if value is None or not self.counts(value):
            return False
        return not pod_asks_for(pod, self.args.label, value, own_label=self.own_label)


class NodePoolOracle(_Oracle):
    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> Status:
        if self.guarded(pod, snapshot, i):
            return Status.unresolvable(
                "node(s) belong to a private pool the pod did not ask for", plugin=self.name
            )
        return Status.success()


class NodePoolScoreOracle(_Oracle):
    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> tuple[int, Status]:
        return (0 if self.guarded(pod, snapshot, i) else 100), Status.success()


class _Scarce(_Oracle):
    def counts(self, value: str) -> bool:
        models = self.args.models
        return len(models) == 0 or value in models


class ScarceDeviceOracle(_Scarce):
    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> Status:
        if self.guarded(pod, snapshot, i):
            return Status.unresolvable(
                "node(s) have a scarce device model the pod did not ask for", plugin=self.name
            )
        return Status.success()


class ScarceDeviceScoreOracle(_Scarce):
    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> tuple[int, Status]:
        return (0 if self.guarded(pod, snapshot, i) else 100), Status.success()


def oracle_for(plugin: Plugin) -> Plugin | None:
    """The oracle of a production NodePool or ScarceDevice plugin, None for any other."""
    if isinstance(plugin, nodepool.NodePool):
        return NodePoolOracle(plugin, "NodePool", own_label=True)
    if isinstance(plugin, nodepool.NodePoolScore):
        return NodePoolScoreOracle(plugin, "NodePool", own_label=True)
    if isinstance(plugin, scarcedevice.ScarceDevice):
        return ScarceDeviceOracle(plugin, "ScarceDevice", own_label=False)
    if isinstance(plugin, scarcedevice.ScarceDeviceScore):
        return ScarceDeviceScoreOracle(plugin, "ScarceDevice", own_label=False)
    return None
