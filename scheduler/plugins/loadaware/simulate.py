"""``koord simulate`` for kind ``LoadAwareScheduling`` (docs/simulate.md): builds the plugin from the
scenario's args, feeds its NodeMetrics and assigned pods as the informers would, and evaluates the
incoming pod against every node with the scenario ``now`` as the clock. Assumed pods (annotation
``test.koordinator.sh/assumed: "true"``) go through Reserve. Runs the plugin's one Filter and Score
(the tests also check every scenario against the per-node oracle).
Bad input raises ``ValueError`` naming the field and its value (docs/simulate.md#input-errors).
Imports: the standard library, apis (nodemetric, objectcheck, rfc3339), scheduler.framework,
scheduler.plugins.loadaware.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import numpy as np

from apis.kubeobjects import Pod
from apis.nodemetric import NodeMetric
from apis.objectcheck import as_node, as_pod, as_pods, object_list
from apis.rfc3339 import parse_rfc3339
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.loadaware.plugin import LoadAwareScheduling

ANNOTATION_ASSUMED: Final = "test.koordinator.sh/assumed"


def _now(scenario: Mapping[str, Any]) -> float:
    try:
        return parse_rfc3339(scenario.get("now")).timestamp()
    except ValueError as e:
        raise ValueError(f"now={scenario.get('now')!r}: {e}") from None


def prepare(scenario: dict[str, Any]) -> tuple[LoadAwareScheduling, Snapshot, CycleState, Pod]:
    """The plugin fed with the scenario's objects, its snapshot, the cycle state and the incoming pod."""
    now = _now(scenario)
    try:
        plugin = LoadAwareScheduling(scenario.get("args"), clock=lambda: now)
    except ValueError as e:
        raise ValueError(f"args: {e}") from None
    nodes = [as_node(n, f"nodes[{i}]") for i, n in enumerate(object_list(scenario, "nodes"))]
    for i, n in enumerate(nodes):
        if not isinstance(n.get("metadata", {}).get("name"), str):
            raise ValueError(f"nodes[{i}].metadata.name: required")
    snapshot = Snapshot.build(nodes)
    for i, raw in enumerate(object_list(scenario, "nodeMetrics")):
        nm = NodeMetric.from_dict(raw, f"nodeMetrics[{i}]")
        plugin.on_node_metric(nm.name, nm)
    state = CycleState(now)
    for assigned in as_pods(scenario.get("pods"), "pods"):  # scenario JSON enters here
        annotations = assigned.get("metadata", {}).get("annotations", {})
        if annotations.get(ANNOTATION_ASSUMED) == "true":
            plugin.reserve(state, assigned, str((assigned.get("spec") or {}).get("nodeName") or ""))
        else:
            plugin.on_pod_add(assigned)
    return plugin, snapshot, state, as_pod(scenario.get("pod"), "pod")


def simulate(scenario: dict[str, Any]) -> dict[str, Any]:
    """Evaluate one scenario: ``{"filter": {node: bool}, "filterReason": {node: msg},
    "score": {node: int}}``."""
    plugin, snapshot, state, pod = prepare(scenario)
    plugin.pre_filter(state, pod, snapshot)
    result = plugin.filter_all(state, pod, snapshot)
    scores = plugin.score_all(state, pod, snapshot, np.arange(snapshot.n, dtype=np.int64))
    out: dict[str, Any] = {"filter": {}, "filterReason": {}, "score": {}}
    for i, name in enumerate(snapshot.names):
        status = result.status_of(i)
        out["filter"][name] = status.is_success()
        if not status.is_success():
            out["filterReason"][name] = status.message()
        out["score"][name] = int(scores[i])
    return out
