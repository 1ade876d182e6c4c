"""``koord simulate`` for kind ``LoadAwareScheduling`` (docs/simulate.md): builds the plugin from the
scenario's args, feeds its NodeMetrics and assigned pods as the informers would, and evaluates the
incoming pod against every node with the scenario ``now`` as the clock. Assumed pods (annotation
``test.koordinator.sh/assumed: "true"``) go through Reserve. Runs the plugin's one Filter and Score
(the tests also check every scenario against the per-node oracle).
Imports: the standard library, apis (nodemetric, rfc3339), scheduler.framework,
scheduler.plugins.loadaware.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, cast

import numpy as np

from apis.kubeobjects import Pod
from apis.nodemetric import NodeMetric
from apis.rfc3339 import parse_rfc3339
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.loadaware.plugin import LoadAwareScheduling

ANNOTATION_ASSUMED: Final = "test.koordinator.sh/assumed"


def _list(scenario: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    value = scenario.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(x, dict) for x in value):
        raise ValueError(f"{key}: expected a list of objects, got {value!r:.80}")
    return value


def _now(scenario: Mapping[str, Any]) -> float:
    try:
        return parse_rfc3339(scenario.get("now")).timestamp()
    except ValueError as e:
        raise ValueError(f"now={scenario.get('now')!r}: {e}") from None


def prepare(scenario: dict[str, Any]) -> tuple[LoadAwareScheduling, Snapshot, CycleState, Pod]:
    """The plugin fed with the scenario's objects, its snapshot, the cycle state and the incoming pod."""
    now = _now(scenario)
    plugin = LoadAwareScheduling(scenario.get("args"), clock=lambda: now)
    nodes = _list(scenario, "nodes")
    for n in nodes:
        if not isinstance((n.get("metadata") or {}).get("name"), str):
            raise ValueError(f"nodes: a node without metadata.name: {n!r:.80}")
    snapshot = Snapshot.build(nodes)
    for i, raw in enumerate(_list(scenario, "nodeMetrics")):
        nm = NodeMetric.from_dict(raw, f"nodeMetrics[{i}]")
        plugin.on_node_metric(nm.name, nm)
    state = CycleState(now)
    for raw_pod in _list(scenario, "pods"):
        assigned = cast(Pod, raw_pod)  # scenario JSON enters here
        annotations = (assigned.get("metadata") or {}).get("annotations") or {}
        if annotations.get(ANNOTATION_ASSUMED) == "true":
            plugin.reserve(state, assigned, str((assigned.get("spec") or {}).get("nodeName") or ""))
        else:
            plugin.on_pod_add(assigned)
    incoming = scenario.get("pod")
    if not isinstance(incoming, dict):
        raise ValueError(f"pod: expected an object, got {incoming!r:.80}")
    return plugin, snapshot, state, cast(Pod, incoming)


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
