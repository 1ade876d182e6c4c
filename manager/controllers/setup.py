"""Assembling the SLO controllers for the composition root (manager/main.py): the ``--config-namespace``
/ ``--slo-config-name`` / ``--sync-period`` flags and ``build_slo_controllers``, which makes the gateway,
the config cache, the NodeSLO, NodeMetric and NodeResource controllers (the latter with the gateway's
Device informer, docs/rules/manager.md#gpu-device-resources) and a ``ControllerManager`` over
them, with no global state.
Imports: argparse, prometheus_client, apis.{constants,duration}, kube.events, manager.{gateway,metrics,
controller.runtime,controllers.*}.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry

from apis import constants as c
from apis.duration import Duration
from kube.events import EventRecorder
from manager.controllerruntime.runtime import ControllerManager
from manager.controllers.config import ConfigController
from manager.controllers.nodemetric import NodeMetricController
from manager.controllers.noderesource import HubLookup, NodeResourceController
from manager.controllers.nodeslo import NodeSLOController
from manager.gateway import Gateway
from manager.metrics import ManagerMetrics

__all__ = ["SLOControllers", "add_config_flags", "build_slo_controllers", "sync_period"]


def sync_period(text: str) -> float:
    """``--sync-period``: a Go duration in seconds; empty or 0 = no periodic resync."""
    if not text.strip():
        return 0.0
    try:
        seconds = Duration.parse(text.strip()).total_seconds()
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 0, 30s, 10h)") from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative")
    return seconds


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """``--config-namespace``, ``--slo-config-name``
    (docs/configuration.md#the-slo-controller-config-configmap, docs/flags.md#koord-manager) and
    ``--sync-period``: every key of the config, NodeSLO and NodeMetric controllers is reconciled again
    each period."""
    parser.add_argument(
        "--config-namespace",
        default=c.DEFAULT_CONFIG_NAMESPACE,
        help=f"namespace of the slo-controller-config ConfigMap ({c.DEFAULT_CONFIG_NAMESPACE})",
    )
    parser.add_argument(
        "--slo-config-name",
        default=c.SLO_CONTROLLER_CONFIG_NAME,
        help=f"name of the slo-controller-config ConfigMap ({c.SLO_CONTROLLER_CONFIG_NAME})",
    )
    parser.add_argument(
        "--sync-period",
        type=sync_period,
        default=0.0,
        help="reconcile every node's NodeSLO and NodeMetric (and the config) again this often, a Go "
        "duration (default '' = only on change, as 0)",
    )


@dataclass
class SLOControllers:
    """What ``build_slo_controllers`` made. Start order: ``gateway.start(stop)`` (informers, on every
    replica), then ``manager.start(stop)`` or hand ``manager.on_started_leading``/``on_stopped_leading``
    to the LeaderElector. More controllers (noderesource) join with ``manager.add`` before starting and
    can follow config changes with ``config.on_change``."""

    gateway: Gateway
    metrics: ManagerMetrics
    config: ConfigController
    nodeslo: NodeSLOController
    nodemetric: NodeMetricController
    manager: ControllerManager
    noderesource: NodeResourceController | None = None


def build_slo_controllers(
    api: Any,
    namespace: str = c.DEFAULT_CONFIG_NAMESPACE,
    config_name: str = c.SLO_CONTROLLER_CONFIG_NAME,
    registry: CollectorRegistry | None = None,
    recorder: EventRecorder | None = None,
    *,
    identity: str = "",
    workers: int = 1,
    resync_seconds: float = 0,
    node_filter: Callable[[str], bool] | None = None,
    noderesource: bool = True,
    hub_lookup: HubLookup | None = None,
) -> SLOControllers:
    """``node_filter`` (tests, sharding): only nodes whose names it accepts are managed."""
    metrics = ManagerMetrics(registry)
    gateway = Gateway(
        api, config_namespace=namespace, config_name=config_name, recorder=recorder, node_filter=node_filter
    )
    config = ConfigController(gateway, metrics, resync_seconds=resync_seconds)
    nodeslo = NodeSLOController(gateway, config, metrics, workers=workers, resync_seconds=resync_seconds)
    nodemetric = NodeMetricController(
        gateway, config, metrics, workers=workers, resync_seconds=resync_seconds
    )
    manager = ControllerManager(
        [config.controller, nodeslo.controller, nodemetric.controller], metrics=metrics, identity=identity
    )
    nr = None
    if noderesource:
        nr = NodeResourceController(
            gateway, config, metrics, hub_lookup=hub_lookup, workers=workers, devices=gateway.devices
        )
        manager.add(nr.controller)
    return SLOControllers(gateway, metrics, config, nodeslo, nodemetric, manager, nr)
