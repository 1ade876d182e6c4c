"""The shared shape of the NodeSLO and NodeMetric controllers: one cluster-scoped object per node, named
after it, kept equal to a spec computed from the node and the slo-controller-config.

Triggers (docs/rules/manager.md): Node create, update only when labels or ``status.allocatable`` changed,
delete; object create/delete and updates that change ``metadata.generation`` (spec changes, not status); any
change of the cached config enqueues every node. The reconcile drops the request while the config is
unavailable, asks the subclass's pure ``plan`` what to write and does it through the gateway, counting
``{status, reason}`` in the subclass's upstream-named counter.
Imports: the standard library, manager.{gateway,metrics,controller.runtime,controllers.config,
controllers.specs}, apis.{kubeobjects,sloconfig}.
"""

from __future__ import annotations

import logging
from typing import Any

from apis.kubeobjects import CustomResource, KubeObject, Node
from apis.sloconfig import SLOControllerConfig
from manager.controllerruntime.runtime import Controller
from manager.controllers.config import ConfigController
from manager.controllers.specs import Plan
from manager.gateway import Gateway, GatewayError, SharedInformer
from manager.metrics import ExactCounter, ManagerMetrics

__all__ = ["NodeObjectController"]

log = logging.getLogger(__name__)


def _node_changed(old: Node, new: Node) -> bool:
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    if (old_meta.get("labels") or {}) != (new_meta.get("labels") or {}):
        return True
    return bool((old.get("status") or {}).get("allocatable") != (new.get("status") or {}).get("allocatable"))


def _generation_changed(old: KubeObject, new: KubeObject) -> bool:
    return bool(
        (old.get("metadata") or {}).get("generation") != (new.get("metadata") or {}).get("generation")
    )


def _name(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


class NodeObjectController:
    """Base of the per-node object controllers; subclasses set ``kind`` and implement the I/O hooks."""

    kind = ""
    controller_name = ""  # the work queue's name (metrics, logs)

    def __init__(
        self,
        gateway: Gateway,
        config: ConfigController,
        metrics: ManagerMetrics | None = None,
        *,
        workers: int = 1,
        resync_seconds: float = 0,
    ) -> None:
        self.gateway = gateway
        self.config = config
        self.objects = objects = self.informer(gateway)
        self.metrics = metrics if metrics is not None else config.metrics
        self._counter = self.counter(self.metrics)
        self.controller = Controller(
            self.controller_name,
            self.reconcile,
            workers,
            self.metrics,
            list_keys=self.keys,
            resync_seconds=resync_seconds,
        )
        gateway.nodes.add_handlers(
            on_add=self._enqueue_obj,
            on_update=lambda old, new: self._enqueue_obj(new) if _node_changed(old, new) else None,
            on_delete=self._enqueue_obj,
        )
        objects.add_handlers(
            on_add=self._enqueue_obj,
            on_update=lambda old, new: self._enqueue_obj(new) if _generation_changed(old, new) else None,
            on_delete=self._enqueue_obj,
        )
        config.on_change(self.enqueue_all_nodes)

    def keys(self) -> list[str]:
        """Every node, and every object (an orphan must be deleted)."""
        return sorted(set(self.gateway.node_names()) | set(self.objects.keys()))

    def enqueue_all_nodes(self) -> None:
        self.controller.enqueue_all(self.gateway.node_names())

    def _enqueue_obj(self, obj: KubeObject) -> None:
        name = _name(obj)
        if name:
            self.controller.enqueue(name)

    # -- subclass hooks --------------------------------------------------------------------------------

    def informer(self, gateway: Gateway) -> SharedInformer[CustomResource]:
        """The gateway's informer of this controller's objects."""
        raise NotImplementedError

    def counter(self, metrics: ManagerMetrics) -> ExactCounter:
        """The ``{status, reason}`` reconcile counter."""
        raise NotImplementedError

    def ready(self) -> bool:
        return self.config.available()

    def plan(self, cfg: SLOControllerConfig, node: Node | None, old: CustomResource | None) -> Plan:
        raise NotImplementedError

    def create(self, name: str, spec: dict[str, Any]) -> CustomResource:
        raise NotImplementedError

    def update(self, old: CustomResource, spec: dict[str, Any]) -> CustomResource:
        raise NotImplementedError

    def delete(self, name: str) -> bool:
        raise NotImplementedError

    # -- reconcile -------------------------------------------------------------------------------------

    def reconcile(self, name: str) -> float | None:
        if not self.ready():
            self._count("failed", "configUnavailable")
            log.info("%s %s: slo-controller-config not available, request dropped", self.kind, name)
            return None
        cfg = self.config.current()
        if cfg is None:
            return None
        node = self.gateway.node(name)
        old = self.objects.get(name)
        plan = self.plan(cfg, node, old)
        if plan.warning:
            log.warning("%s %s: %s", self.kind, name, plan.warning)
        try:
            written = self._apply(name, plan, old)
        except GatewayError as e:
            self._count("failed", plan.reason)
            log.info("%s %s: %s; retrying with backoff", self.kind, name, e)
            raise
        if written:
            self._count("succeeded", plan.reason)
            log.info("%s %s: %s", self.kind, name, plan.reason)
        return None

    def _apply(self, name: str, plan: Plan, old: CustomResource | None) -> bool:
        """Carry ``plan`` out; True when it wrote (and so is counted as a success)."""
        if plan.action == "delete":
            self.delete(name)
        elif plan.action == "create" and plan.spec is not None:
            try:
                self.create(name, plan.spec)
            except GatewayError as e:
                if not e.conflict:
                    raise
                # 409 AlreadyExists: the cache is behind our own earlier create; nothing was written
                # now, and the watch event of that object requeues the node.
                log.debug("%s %s: already exists; waiting for the watch", self.kind, name)
                return False
        elif plan.action == "update" and plan.spec is not None and old is not None:
            self.update(old, plan.spec)
        else:
            return False
        return True

    def _count(self, status: str, reason: str) -> None:
        self._counter.inc(status=status, reason=reason or "unknown")
