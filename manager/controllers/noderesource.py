"""The NodeResource controller (docs/rules/manager.md): batch and mid resources into each Node's
status, and (given the Device informer) the GPU resources and labels of the node's Device
(docs/rules/manager.md#gpu-device-resources).

Per node: colocation disabled → batch/mid removed; else the pure plugins (manager.noderesource) compute
mid then batch from the node, its pods and its NodeMetric — the fresher of the CR and the MetricHub's
latest report (docs/rules/manager.md#the-fresher-of-hub-and-cr). The node is written only when the result
moved by more than
``resourceDiffThreshold`` or appeared/vanished, or the last write is older than
``updateTimeThresholdSeconds`` (the key is requeued after that long so the forced sync happens). When it
writes, the formula's terms go into the ``*-resource-explain`` annotations, so an operator sees why the
number is what it is. Triggers: Node and NodeMetric-status events, Device create/delete and spec
changes, and any config change. GPU resources are written on the same status write (a GPU resource that
appeared, vanished or moved by more than the threshold also forces it); GPU labels by a merge patch of
the node's labels when one differs. A Device that does not decode leaves the node's GPU resources and
labels as they are (a warning logged once per distinct error).

Imports: standard library, apis.*, manager.{gateway,metrics,controller,controllers.config,noderesource}.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from prometheus_client import Counter, Gauge

from apis import constants as c
from apis.device import DeviceError
from apis.kubeobjects import CustomResource, Node
from apis.nodemetric import NodeMetricError, parse_time
from apis.reportlimits import reason_of
from apis.sloconfig import node_colocation_enabled, node_colocation_strategy
from manager.controllerruntime.runtime import Controller
from manager.controllers.config import ConfigController
from manager.gateway import Gateway, GatewayError, SharedInformer
from manager.metrics import ExactCounter, ManagerMetrics
from manager.noderesource.plugins import batchresource, gpudeviceresource, midresource
from manager.noderesource.prepare import disabled_reset, need_sync, prepare_node
from manager.noderesource.resources import CalculateResult, nano

__all__ = ["NodeResourceController", "fresher_nodemetric"]

log = logging.getLogger(__name__)

DEFAULT_DIFF_THRESHOLD = 0.1
DEFAULT_UPDATE_TIME_THRESHOLD_SECONDS = 300
DEGRADED_RETRY_SECONDS = 5.0
"""How soon a degraded node is recomputed when the MetricHub may hold a fresher report than the CR."""
DEGRADE_REASONS = frozenset({batchresource.DEGRADE_REASON, midresource.DEGRADE_REASON})
EXPLAIN_ANNOTATIONS = (
    batchresource.ANNOTATION_BATCH_RESOURCE_EXPLAIN,
    midresource.ANNOTATION_MID_RESOURCE_EXPLAIN,
)

RESOURCE_UNITS = (
    (c.BATCH_CPU, "integer"),
    (c.BATCH_MEMORY, "byte"),
    (c.MID_CPU, "integer"),
    (c.MID_MEMORY, "byte"),
)

HubLookup = Callable[[str], Mapping[str, Any] | None]


def _update_time(nm: Mapping[str, Any] | None) -> datetime | None:
    if not nm:
        return None
    raw = (nm.get("status") or {}).get("updateTime")
    if not raw:
        return None
    try:
        return parse_time(raw)
    except ValueError:
        return None


def fresher_nodemetric(
    cr: Mapping[str, Any] | None, hub: Mapping[str, Any] | None
) -> Mapping[str, Any] | None:
    """Pure: the NodeMetric whose ``status.updateTime`` is later (the CR on ties or when neither has one)."""
    hub_time, cr_time = _update_time(hub), _update_time(cr)
    if hub_time is not None and (cr_time is None or hub_time > cr_time):
        return hub
    return cr if cr is not None else hub


class NodeResourceController:
    def __init__(
        self,
        gateway: Gateway,
        config: ConfigController,
        metrics: ManagerMetrics,
        *,
        hub_lookup: HubLookup | None = None,
        workers: int = 1,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
        devices: SharedInformer[CustomResource] | None = None,
    ) -> None:
        """``devices``: the Device informer; without it the GPUDeviceResource plugin is off."""
        self.gateway = gateway
        self.config = config
        self.metrics = metrics
        self._hub_lookup = hub_lookup
        self._clock = clock
        self._monotonic = monotonic
        self._last_update: dict[str, float] = {}
        self._devices = devices
        self._device_errors: dict[str, str] = {}  # node → the last Device decode error reported
        self._lock = threading.Lock()
        registry = metrics.registry
        self.reconcile_count = ExactCounter(
            "slo_controller_node_resource_reconcile_count",
            "NodeResource reconciles by status and reason",
            ["status", "reason"],
            registry,
        )
        self.hub_skipped = Counter(
            "koord_manager_noderesource_hub_reports_skipped",
            "MetricHub reports the NodeResource controller could not decode (the CR is used), by reason",
            ["reason"],
            registry=registry,
        )
        self.allocatable = Gauge(
            "slo_controller_node_extended_resource_allocatable_internal",
            "Batch/mid allocatable computed per node (cpu in cores, memory in bytes)",
            ["node", "resource", "unit"],
            registry=registry,
        )
        self.controller = Controller(
            "noderesource", self.reconcile, workers, metrics, list_keys=gateway.node_names
        )
        gateway.nodes.add_handlers(
            lambda obj: self._enqueue(obj),
            lambda _old, new: self._enqueue(new),
            lambda obj: self._forget(obj),
        )
        gateway.nodemetrics.add_handlers(
            lambda obj: self._enqueue(obj),
            self._nodemetric_updated,
            lambda obj: self._forget(obj, requeue=True),
        )
        if devices is not None:
            devices.add_handlers(
                lambda obj: self._enqueue(obj),
                self._device_updated,
                lambda obj: self._enqueue(obj),
            )
        config.on_change(lambda: self.controller.enqueue_all(gateway.node_names()))

    # -- events ----------------------------------------------------------------------------------------
    @staticmethod
    def _name(obj: Mapping[str, Any]) -> str:
        return str((obj.get("metadata") or {}).get("name") or "")

    def _enqueue(self, obj: Mapping[str, Any]) -> None:
        if name := self._name(obj):
            self.controller.enqueue(name)

    def _nodemetric_updated(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        if old.get("status") != new.get("status"):
            self._enqueue(new)

    def _device_updated(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        # as upstream's DeviceHandler: only a spec change (docs/rules/manager.md#gpu-device-resources)
        if old.get("spec") != new.get("spec"):
            self._enqueue(new)

    def _forget(self, obj: Mapping[str, Any], requeue: bool = False) -> None:
        name = self._name(obj)
        with self._lock:
            self._last_update.pop(name, None)
            self._device_errors.pop(name, None)
        for resource, unit in RESOURCE_UNITS:
            with contextlib.suppress(KeyError):
                self.allocatable.remove(name, resource, unit)
        if requeue and name:
            self.controller.enqueue(name)

    # -- reconcile -----------------------------------------------------------------------------------
    def nodemetric(self, name: str) -> Mapping[str, Any] | None:
        return fresher_nodemetric(self.gateway.nodemetric(name), self._hub_metric(name))

    def _hub_metric(self, name: str) -> Mapping[str, Any] | None:
        """The hub's report of the node; None (counted) when there is none or it cannot be decoded: a
        bad entry costs this node its hub metric, never the reconcile
        (docs/rules/manager.md#metrichub-limits)."""
        if self._hub_lookup is None:
            return None
        try:
            return self._hub_lookup(name)
        except (NodeMetricError, RecursionError) as e:
            reason = reason_of(e) if isinstance(e, NodeMetricError) else "invalid_field"
            self.hub_skipped.labels(reason).inc()
            log.warning("noderesource: node %s: the hub's report is skipped (%s): %.300s", name, reason, e)
            return None

    def reconcile(self, name: str) -> float | None:
        if not self.config.available():
            self.reconcile_count.inc(status="failed", reason="config_unavailable")
            return None
        cfg = self.config.current()
        node = self.gateway.node(name)
        if cfg is None or node is None:
            return None
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        annotations = meta.get("annotations") or {}
        strategy = node_colocation_strategy(cfg, labels, annotations)
        results: list[CalculateResult[Any]]
        explain: dict[str, str | None] = dict.fromkeys(EXPLAIN_ANNOTATIONS)
        gpu: gpudeviceresource.GPUResult | None = None
        if not node_colocation_enabled(cfg, labels, annotations):
            # upstream's GPU plugin has no Reset: the node's GPU resources and labels stay
            # (docs/rules/manager.md#gpu-device-resources)
            results = [disabled_reset()]
        else:
            nm = self.nodemetric(name)
            pods = self.gateway.pods_on_node(name)
            now = self._clock()
            mid = midresource.calculate(strategy, node, pods, nm, now)
            batch = batchresource.calculate(strategy, node, pods, nm, now)
            results = [mid, batch]
            gpu = self._gpu(name, node)
            explain[batchresource.ANNOTATION_BATCH_RESOURCE_EXPLAIN] = batchresource.explain_annotation(batch)
            explain[midresource.ANNOTATION_MID_RESOURCE_EXPLAIN] = midresource.explain_annotation(mid)
        items = [item for r in results for item in r.items]

        def desired(fresh: Node) -> Node:
            out = prepare_node(fresh, items)
            return out if gpu is None else gpudeviceresource.prepare(out, gpu, labels=False)

        prepared = desired(node)
        diff = strategy.resource_diff_threshold or DEFAULT_DIFF_THRESHOLD
        period = float(strategy.update_time_threshold_seconds or DEFAULT_UPDATE_TIME_THRESHOLD_SECONDS)
        with self._lock:
            last = self._last_update.get(name)
        now_mono = self._monotonic()
        forced = last is None or now_mono - last >= period
        # docs/rules/manager.md#degrade: the hub may bring a fresh report without any NodeMetric event, so a
        # degraded node is looked at again soon instead of after the whole update period.
        retry = period
        if self._hub_lookup is not None and any(r.reason in DEGRADE_REASONS for r in results):
            retry = min(period, DEGRADED_RETRY_SECONDS)
        # docs/rules/manager.md#gpu-device-resources: a GPU resource change forces the status write, a GPU
        # label change the label patch
        sync_status = (
            forced
            or need_sync(node, prepared, diff)
            or (gpu is not None and bool(gpudeviceresource.need_sync(node, prepared, diff)))
        )
        sync_labels = gpu is not None and bool(
            gpudeviceresource.need_sync_meta(node, gpudeviceresource.prepare(node, gpu))
        )
        remaining = min(retry, max(1.0, period - (now_mono - (last or now_mono))))
        if not sync_status and not sync_labels:
            self.reconcile_count.inc(status="succeeded", reason="unchanged")
            return remaining
        written: Node | None = None
        failure: GatewayError | None = None
        if sync_status:
            try:  # as upstream, the label patch is tried even when the status write failed
                written = self.gateway.update_node_status(name, desired)
            except GatewayError as e:
                failure = e
        if sync_labels and gpu is not None:
            self._label(name, gpu)
        if failure is not None:
            raise failure
        if not sync_status:
            self.reconcile_count.inc(status="succeeded", reason="updated")
            return remaining
        if written is None:
            return None
        with self._lock:
            self._last_update[name] = self._monotonic()
        self._publish(name, written)
        self._annotate(name, written, prepared, explain)
        reason = next((r.reason for r in results if r.reason), "updated")
        self.reconcile_count.inc(status="succeeded", reason=reason)
        return retry

    def _gpu(self, name: str, node: Node) -> gpudeviceresource.GPUResult | None:
        """The GPU plugin's result for the node; None (the node's GPU state kept) when the plugin is off or
        the node's Device does not decode (docs/rules/manager.md#gpu-device-resources)."""
        if self._devices is None:
            return None
        device = self._devices.get(name)
        try:
            result = gpudeviceresource.calculate(node, device)
        except DeviceError as e:
            message = f"Device {name} does not decode, node GPU resources and labels kept: {e}"
            with self._lock:
                seen = self._device_errors.get(name) == message
                self._device_errors[name] = message
            if not seen:
                # logged, not an Event: an Event about a Node lives in namespace default, where the
                # manager may not write (deploy/rbac/koord-manager.yaml)
                log.warning("noderesource: %s", message)
            return None
        with self._lock:
            self._device_errors.pop(name, None)
        return result

    def _label(self, name: str, gpu: gpudeviceresource.GPUResult) -> None:
        """Merge-patch the GPU labels that differ on a fresh read of the node (upstream's node meta
        update, after the status write)."""
        fresh = self.gateway.get_node(name)
        if fresh is None:
            return
        changes = gpudeviceresource.label_changes(fresh, gpu)
        if changes:
            self.gateway.patch_node_metadata(name, labels=dict(changes))

    def _annotate(
        self,
        name: str,
        written: Mapping[str, Any],
        prepared: Mapping[str, Any],
        explain: Mapping[str, str | None],
    ) -> None:
        """The status write does not carry annotations: patch the ones that changed (origin allocatable
        and the explain annotations; None deletes)."""
        current = (written.get("metadata") or {}).get("annotations") or {}
        wanted = dict(explain)
        origin = c.ANNOTATION_ORIGIN_EXTENDED_ALLOCATABLE
        new_origin = ((prepared.get("metadata") or {}).get("annotations") or {}).get(origin)
        if new_origin is not None:
            wanted[origin] = new_origin
        changes = {
            k: v for k, v in wanted.items() if current.get(k) != v and not (v is None and k not in current)
        }
        if changes:
            self.gateway.patch_node_metadata(name, annotations=changes)

    def _publish(self, name: str, node: Node) -> None:
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        for resource, unit in RESOURCE_UNITS:
            raw = allocatable.get(resource)
            if raw is None:
                with contextlib.suppress(KeyError):
                    self.allocatable.remove(name, resource, unit)
                continue
            v = float(nano(raw)) / 1e9
            # batch-cpu / mid-cpu are integer milli-cores: expose cores, as upstream's gauge does.
            self.allocatable.labels(name, resource, unit).set(v / 1000.0 if unit == "integer" else v)
