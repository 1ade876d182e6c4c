"""``koord simulate`` for kind ``BatchResource`` (docs/simulate.md): the scenario's ``config`` overlaid on
``DefaultColocationStrategy`` and merged for the node (annotation/labels, as the controller does), then
the MidResource and BatchResource plugins and Prepare, exactly as the NodeResource controller runs them
(``enable`` is the controller's switch, not an input: it is ignored here;
docs/rules/manager.md#missing-strategy-fields-take-the-default-strategys-values).

Result: ``kubernetes.io/batch-cpu`` / ``kubernetes.io/batch-memory`` (and ``kubernetes.io/mid-cpu`` /
``kubernetes.io/mid-memory``) as the integers written to the node's allocatable, ``null`` when reset;
plus ``message``, ``degraded`` and ``explain`` (every term of the formulas, cpu milli / memory bytes).
Imports: the standard library, ``apis`` and ``manager.noderesource``. Pure apart from its input dict. Bad
input raises ``ValueError`` naming the field and its value (docs/simulate.md#input-errors).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from apis.gojson import decode_into, overlay
from apis.kubeobjects import CustomResource, Node
from apis.nodemetric import NodeMetric
from apis.objectcheck import as_node, as_pods, check_object
from apis.rfc3339 import parse_rfc3339
from apis.sloconfig import node_colocation_strategy
from apis.sloconfig_merge import default_colocation_cfg
from apis.sloconfig_types import ColocationStrategy
from manager.noderesource.plugins import batchresource, midresource
from manager.noderesource.prepare import SYNC_RESOURCES, prepare_node_status
from manager.noderesource.resources import annotations_of, nano, pod_infos, value


def _object(scenario: Mapping[str, Any], key: str, *, optional: bool = False) -> dict[str, Any] | None:
    v = scenario.get(key)
    if v is None and optional:
        return None
    if not isinstance(v, dict):
        raise ValueError(f"{key}: expected an object, got {v!r:.80}")
    return v


def strategy_for(config: object, node: Node) -> ColocationStrategy:
    """``config`` (ColocationStrategy JSON) over the defaults, then merged for ``node``."""
    base = default_colocation_cfg()
    if config is not None:
        decoded, errs = decode_into(ColocationStrategy(), config, "config")
        bad = [e for e in errs if e.fatal]
        if bad:
            raise ValueError("; ".join(str(e) for e in bad))
        base = type(base)(strategy=overlay(base.strategy, decoded))
    meta = node.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return node_colocation_strategy(
        base, labels if isinstance(labels, dict) else {}, dict(annotations_of(node))
    )


def _now(scenario: Mapping[str, Any]) -> datetime:
    try:
        return parse_rfc3339(scenario.get("now"))
    except ValueError as e:
        raise ValueError(f"now={scenario.get('now')!r}: {e}") from None


def simulate(scenario: dict[str, Any]) -> dict[str, Any]:
    """Evaluate one BatchResource scenario (see the module docstring for the result shape)."""
    now = _now(scenario)
    # scenario JSON: the boundary, checked as the API server would have (the informers are the cluster's)
    node = as_node(scenario.get("node"), "node")
    nodemetric = _object(scenario, "nodeMetric", optional=True)
    if nodemetric is not None:
        check_object(nodemetric, CustomResource, "nodeMetric")
        NodeMetric.from_dict(nodemetric, "nodeMetric")  # only to name a malformed field; read as JSON
    pods = as_pods(scenario.get("pods"), "pods")
    strategy = strategy_for(scenario.get("config"), node)
    infos = pod_infos(pods)
    mid = midresource.calculate(strategy, node, infos, nodemetric, now)
    batch = batchresource.calculate(strategy, node, infos, nodemetric, now)
    prepared = prepare_node_status(node, (*mid.items, *batch.items))
    out: dict[str, Any] = {}
    for name in SYNC_RESOURCES:
        raw = prepared["allocatable"].get(name)
        out[name] = None if raw is None else value(nano(raw))
    out["degraded"] = batch.terms is None
    out["message"] = batch.message
    out["midMessage"] = mid.message
    out["explain"] = {"batch": batchresource.explain(batch), "mid": midresource.explain(mid)}
    out["calculated"] = {i.name: i.value for i in (*batch.items, *mid.items)}
    return out
