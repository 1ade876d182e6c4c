"""The NodeMetric controller (docs/rules/manager.md): one NodeMetric per node whose
``spec.metricCollectPolicy`` comes from the node's merged colocation strategy
(``manager.controllers.specs.nodemetric_plan``); created with the node (empty status: the koordlet fills
it), updated when the policy changes (an existing spec is kept while colocation-config is in error
status), deleted with the node. Counts ``slo_controller_nodemetric_reconcile_count{status,reason}`` and
``..._spec_parse_count``.
Imports: manager.{gateway,metrics,controllers.{nodeobject,specs}}, apis.{kubeobjects,sloconfig}.
"""

from __future__ import annotations

from typing import Any

from apis.kubeobjects import CustomResource, Node
from apis.sloconfig import SLOControllerConfig
from manager.controllers.nodeobject import NodeObjectController
from manager.controllers.specs import Plan, nodemetric_plan
from manager.gateway import Gateway, SharedInformer
from manager.metrics import ExactCounter, ManagerMetrics

__all__ = ["NodeMetricController"]


class NodeMetricController(NodeObjectController):
    """``NodeMetricController(gateway, config, metrics, workers=1, resync_seconds=0)``; runs as
    ``.controller``."""

    kind = "NodeMetric"
    controller_name = "nodemetric"

    def informer(self, gateway: Gateway) -> SharedInformer[CustomResource]:
        return gateway.nodemetrics

    def counter(self, metrics: ManagerMetrics) -> ExactCounter:
        return metrics.nodemetric_reconcile

    def plan(self, cfg: SLOControllerConfig, node: Node | None, old: CustomResource | None) -> Plan:
        plan = nodemetric_plan(cfg, node, old)
        if plan.spec is not None:
            self.metrics.nodemetric_spec_parse.inc(status="succeeded", reason="getNodeMetricSpec")
        return plan

    def create(self, name: str, spec: dict[str, Any]) -> CustomResource:
        return self.gateway.create_nodemetric(name, spec)

    def update(self, old: CustomResource, spec: dict[str, Any]) -> CustomResource:
        return self.gateway.update_nodemetric_spec(old, spec)

    def delete(self, name: str) -> bool:
        return self.gateway.delete_nodemetric(name)
