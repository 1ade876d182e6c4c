"""The NodeSLO controller (docs/rules/manager.md): one NodeSLO per node, its spec rendered from the
cached slo-controller-config by ``manager.controllers.specs.nodeslo_plan``; created with the node,
updated only when the typed spec differs (``extensions`` carried over from the old spec), deleted with
the node.
Counts ``slo_controller_nodeslo_reconcile_count{status,reason}`` and ``..._spec_parse_count``.
Imports: manager.{gateway,metrics,controllers.{nodeobject,specs}}, apis.{kubeobjects,sloconfig}.
"""

from __future__ import annotations

from typing import Any

from apis.kubeobjects import CustomResource, Node
from apis.sloconfig import SLOControllerConfig
from manager.controllers.nodeobject import NodeObjectController
from manager.controllers.specs import Plan, nodeslo_plan
from manager.gateway import Gateway, SharedInformer
from manager.metrics import ExactCounter, ManagerMetrics

__all__ = ["NodeSLOController"]


class NodeSLOController(NodeObjectController):
    """``NodeSLOController(gateway, config, metrics, workers=1, resync_seconds=0)``; run ``.controller``."""

    kind = "NodeSLO"
    controller_name = "nodeslo"

    def informer(self, gateway: Gateway) -> SharedInformer[CustomResource]:
        return gateway.nodeslos

    def counter(self, metrics: ManagerMetrics) -> ExactCounter:
        return metrics.nodeslo_reconcile

    def ready(self) -> bool:
        # The NodeSLO keys are usable after any sync, even when colocation-config was rejected.
        return self.config.slo_available()

    def plan(self, cfg: SLOControllerConfig, node: Node | None, old: CustomResource | None) -> Plan:
        plan = nodeslo_plan(cfg, node, old)
        if plan.spec is not None:
            status = "failed" if plan.warning else "succeeded"
            reason = "getSystemSpec" if plan.warning else "getNodeSLOSpec"
            self.metrics.nodeslo_spec_parse.inc(status=status, reason=reason)
        return plan

    def create(self, name: str, spec: dict[str, Any]) -> CustomResource:
        return self.gateway.create_nodeslo(name, spec)

    def update(self, old: CustomResource, spec: dict[str, Any]) -> CustomResource:
        return self.gateway.update_nodeslo(old, spec)

    def delete(self, name: str) -> bool:
        return self.gateway.delete_nodeslo(name)
