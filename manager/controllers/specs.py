"""Pure decisions of the NodeSLO and NodeMetric controllers: what a node's object should be, and which
write (create / update / delete / nothing) takes the cluster there. No I/O: the controllers do the
writes through the gateway.

``nodeslo_plan(cfg, node, old)`` (docs/rules/manager.md): the spec is rebuilt from the config each time,
only ``extensions`` starts from the old spec; an update only when the typed specs differ once the CRD's
defaults (which the API server fills in, e.g. networkQOS limits) are applied to both.
``nodemetric_plan(cfg, node, old)`` (docs/rules/manager.md): ``spec.metricCollectPolicy`` from the
node's merged colocation strategy (enable==true and valid) else the defaults; while the colocation
config is in error status an existing spec is kept.
Imports: the standard library and apis.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from apis import constants as c
from apis.crddefaults import nodeslo_spec_with_defaults
from apis.kubeobjects import CustomResource, Node
from apis.nodemetric import NodeMetricSpec
from apis.nodeslo import NodeSLOSpec
from apis.sloconfig import (
    SLOControllerConfig,
    node_colocation_strategy,
    node_metric_collect_policy,
    node_slo_spec,
)

__all__ = ["Plan", "nodemetric_plan", "nodemetric_spec", "nodeslo_plan", "nodeslo_spec"]

Action = Literal["create", "update", "delete", "none"]


@dataclass(frozen=True)
class Plan:
    """The write to make: ``action``, the desired ``spec`` (create/update), ``reason`` (metric label) and
    ``warning`` (a problem found while computing the spec, e.g. a bad node annotation; ``""`` if none)."""

    action: Action
    spec: dict[str, Any] | None = None  # the object's spec, as JSON
    reason: str = ""
    warning: str = ""


def _meta(obj: Mapping[str, Any], field: str) -> dict[str, str]:
    value = (obj.get("metadata") or {}).get(field) or {}
    return {str(k): str(v) for k, v in value.items()}


def _old_nodeslo_spec(old: CustomResource | None) -> NodeSLOSpec | None:
    if old is None:
        return None
    try:
        return NodeSLOSpec.from_dict(old.get("spec") or {})
    except Exception:  # an unreadable stored spec is simply replaced
        return None


def nodeslo_spec(
    cfg: SLOControllerConfig, node: Node, old: CustomResource | None
) -> tuple[dict[str, Any], str]:
    """The NodeSLO spec for ``node`` (JSON) and a warning (``""`` when none)."""
    labels, annotations = _meta(node, "labels"), _meta(node, "annotations")
    old_spec = _old_nodeslo_spec(old)
    extensions = old_spec.extensions if old_spec is not None else None
    spec = node_slo_spec(cfg, labels, annotations, extensions)
    warning = ""
    bandwidth = annotations.get(c.ANNOTATION_NETWORK_BANDWIDTH)
    if bandwidth is not None and spec.system_strategy is None:
        warning = f"annotation {c.ANNOTATION_NETWORK_BANDWIDTH}={bandwidth!r} is not a quantity"
    return spec.to_dict(), warning


def nodeslo_plan(cfg: SLOControllerConfig, node: Node | None, old: CustomResource | None) -> Plan:
    if node is None:
        return (
            Plan("delete", reason="deleteNodeSLO") if old is not None else Plan("none", reason="nodeNotFound")
        )
    spec, warning = nodeslo_spec(cfg, node, old)
    if old is None:
        return Plan("create", spec, "createNodeSLO", warning)
    old_spec = _old_nodeslo_spec(old)
    if old_spec is not None and nodeslo_spec_with_defaults(old_spec.to_dict()) == nodeslo_spec_with_defaults(
        spec
    ):
        return Plan("none", spec, "unchanged", warning)
    return Plan("update", spec, "updateNodeSLO", warning)


def nodemetric_spec(cfg: SLOControllerConfig, node: Node) -> dict[str, Any]:
    """``{"metricCollectPolicy": ...}`` for ``node`` (always a complete collect policy)."""
    strategy = node_colocation_strategy(cfg, _meta(node, "labels"), _meta(node, "annotations"))
    return NodeMetricSpec(collect_policy=node_metric_collect_policy(strategy)).to_dict()


def _same_nodemetric_spec(old: CustomResource, spec: dict[str, Any]) -> bool:
    raw = old.get("spec") or {}
    if raw == spec:
        return True
    try:
        return bool(NodeMetricSpec.from_dict(raw).to_dict() == spec)
    except Exception:
        return False


def nodemetric_plan(cfg: SLOControllerConfig, node: Node | None, old: CustomResource | None) -> Plan:
    if node is None:
        if old is not None:
            return Plan("delete", reason="deleteNodeMetric")
        return Plan("none", reason="nodeNotFound")
    if old is not None and cfg.colocation_error and (old.get("spec") or {}):
        return Plan("none", reason="keepOldSpec")  # colocation config in error: keep what is there
    spec = nodemetric_spec(cfg, node)
    if old is None:
        return Plan("create", spec, "createNodeMetric")
    if _same_nodemetric_spec(old, spec):
        return Plan("none", spec, "unchanged")
    return Plan("update", spec, "updateNodeMetric")
