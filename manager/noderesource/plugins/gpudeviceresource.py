"""GPUDeviceResource plugin (docs/rules/manager.md#gpu-device-resources): the GPU extended resources and
labels of a Node, from the node's ``Device`` object (scheduling.koordinator.sh/v1alpha1, named after it).

* ``calculate(node, device)`` → a ``GPUResult``: the sums over the Device's healthy ``gpu`` devices of
  every resource they list (exact quantities, each keeping the format of its first card's quantity, as
  Go's ``Quantity.Add``), ``koordinator.sh/gpu`` = the summed ``gpu-core`` when the Device's vendor label
  is ``nvidia`` or absent, the three ``node.koordinator.sh/gpu-*`` labels the Device carries; no Device or
  no healthy GPU → every name of ``RESOURCE_NAMES`` reset. A Device that does not decode raises
  ``DeviceError`` (the caller keeps the node as it is).
* ``prepare(node, result)``: a copy of the node with the result written into ``status.capacity`` and
  ``status.allocatable`` (only names of ``RESOURCE_NAMES``) and, with ``labels=True``, the labels set.
* ``need_sync(old, new, threshold)`` / ``need_sync_meta(old, new)``: upstream's write conditions.
Imports: the standard library and ``apis``. Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from apis.device import (
    GPU,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    GPU_SHARED,
    GPU_VENDOR_NVIDIA,
    KOORD_GPU,
    LABEL_GPU_DRIVER_VERSION,
    LABEL_GPU_MODEL,
    LABEL_GPU_VENDOR,
    NPU_CORE,
    NPU_CPU,
    NPU_DVPP,
    parse_device_spec,
)
from apis.kubeobjects import Node
from apis.quantity import Format, Quantity, QuantityError

__all__ = [
    "LABELS",
    "PLUGIN_NAME",
    "RESOURCE_NAMES",
    "GPUResult",
    "calculate",
    "label_changes",
    "need_sync",
    "need_sync_meta",
    "prepare",
]

PLUGIN_NAME: Final = "GPUDeviceResource"
RESOURCE_NAMES: Final = (
    KOORD_GPU, GPU_CORE, NPU_CORE, NPU_CPU, NPU_DVPP, GPU_MEMORY, GPU_MEMORY_RATIO, GPU_SHARED,
)  # fmt: skip
"""The names this plugin writes or removes on a Node, in upstream's order (utils.go ``ResourceNames``)."""
LABELS: Final = (LABEL_GPU_VENDOR, LABEL_GPU_MODEL, LABEL_GPU_DRIVER_VERSION)
"""The Device labels copied to the Node (never removed from it)."""
RESET_MESSAGE: Final = "reset node gpu resources"
UPDATE_RESOURCES_MESSAGE: Final = "node gpu resources from device"
UPDATE_LABELS_MESSAGE: Final = "node gpu labels from device"
NEED_SYNC_RESOURCE_MESSAGE: Final = "gpu resource diff is big than threshold"
NEED_SYNC_LABEL_MESSAGE: Final = "gpu device label {} changed"
SHARED_PER_CARD: Final = 100


@dataclass(frozen=True, slots=True)
class GPUResult:
    """The plugin's decision for one node: ``resources`` to set (every name the healthy cards list;
    ``prepare`` writes only those of ``RESOURCE_NAMES``), ``resets`` to remove, ``labels`` to set."""

    resources: Mapping[str, Quantity] = field(default_factory=dict)
    resets: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    message: str = ""


def _reset() -> GPUResult:
    return GPUResult(resets=RESOURCE_NAMES, message=RESET_MESSAGE)


def _device_labels(device: Mapping[str, Any]) -> Mapping[str, str]:
    meta = device.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    if not isinstance(labels, Mapping):
        return {}
    return {str(k): v for k, v in labels.items() if isinstance(v, str)}


def _status_map(node: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    status = node.get("status")
    m = status.get(key) if isinstance(status, Mapping) else None
    return m if isinstance(m, Mapping) else None


def calculate(node: Node, device: Mapping[str, Any] | None, *, sync_shared: bool = False) -> GPUResult | None:
    """The GPU resources and labels of ``node`` from its ``device``
    (docs/rules/manager.md#gpu-device-resources). None when the node has no ``status.allocatable``
    (upstream's "missing essential arguments": the plugin contributes nothing). ``sync_shared`` is
    upstream's feature gate ``EnableSyncGPUSharedResource`` (off by default):
    ``koordinator.sh/gpu.shared`` = 100 × healthy cards. Raises ``DeviceError``."""
    if _status_map(node, "allocatable") is None:
        return None
    if device is None:
        return _reset()
    spec = parse_device_spec(device)
    healthy = [d for d in spec.devices or () if d.type == GPU and d.health]
    if not healthy:
        return _reset()
    sums: dict[str, Quantity] = {}
    koord_gpu = Quantity.from_int(0, Format.DECIMAL_SI)
    for card in healthy:
        resources = card.resources or {}
        for name, q in resources.items():
            # Go's AddResourceList: the first card's quantity (its format), then Quantity.Add
            sums[name] = sums[name] + q if name in sums else q
        core = resources.get(GPU_CORE)
        if core is not None:  # a missing gpu-core adds Go's zero Quantity: no change (format either)
            koord_gpu = koord_gpu + core
    labels = _device_labels(device)
    if labels.get(LABEL_GPU_VENDOR, "") in ("", GPU_VENDOR_NVIDIA):
        # docs/rules/manager.md#gpu-device-resources: only NVIDIA (or an unlabelled Device) gets the wrapper
        sums[KOORD_GPU] = koord_gpu
    if sync_shared:
        sums[GPU_SHARED] = Quantity.from_int(len(healthy) * SHARED_PER_CARD, Format.DECIMAL_SI)
    copied = {k: labels[k] for k in LABELS if k in labels}
    return GPUResult(resources=sums, labels=copied, message=UPDATE_RESOURCES_MESSAGE)


def prepare(node: Node, result: GPUResult, *, labels: bool = True) -> Node:
    """A shallow copy of ``node`` with ``result`` applied: per name of ``RESOURCE_NAMES`` a reset removes
    it from capacity and allocatable, a computed quantity is written to both, anything else is left as
    is; the result's labels are set when ``labels`` (none is ever removed)."""
    status = node.get("status")
    capacity = dict(_status_map(node, "capacity") or {})
    allocatable = dict(_status_map(node, "allocatable") or {})
    resets = set(result.resets)
    for name in RESOURCE_NAMES:
        if name in resets:
            capacity.pop(name, None)
            allocatable.pop(name, None)
        elif name in result.resources:
            capacity[name] = allocatable[name] = str(result.resources[name])
    out: dict[str, Any] = {
        **node,
        "status": {
            **(status if isinstance(status, Mapping) else {}),
            "capacity": capacity,
            "allocatable": allocatable,
        },
    }
    if labels and result.labels:
        meta = node.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        old = meta.get("labels")
        out["metadata"] = {**meta, "labels": {**(old if isinstance(old, Mapping) else {}), **result.labels}}
    return out  # type: ignore[return-value]  # a Node with two of its maps replaced


def _milli(raw: object) -> int | None:
    return None if raw is None else Quantity.from_json(raw).milli_value()


def need_sync(old_node: Node, new_node: Node, diff_threshold: float) -> str:
    """Upstream's ``NeedSync``: the message when a name of ``RESOURCE_NAMES`` appeared or vanished in
    allocatable, or moved by more than ``old × diff_threshold`` in milli units (float64); ``""`` otherwise.
    A malformed quantity always syncs."""
    old = _status_map(old_node, "allocatable") or {}
    new = _status_map(new_node, "allocatable") or {}
    for name in RESOURCE_NAMES:
        try:
            o, n = _milli(old.get(name)), _milli(new.get(name))
        except (QuantityError, ValueError):
            return NEED_SYNC_RESOURCE_MESSAGE
        if (o is None) != (n is None):
            return NEED_SYNC_RESOURCE_MESSAGE
        if o is not None and n is not None and float(abs(n - o)) > float(o) * diff_threshold:
            return NEED_SYNC_RESOURCE_MESSAGE
    return ""


def _labels(node: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = node.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def need_sync_meta(old_node: Node, new_node: Node) -> str:
    """Upstream's ``NeedSyncMeta``: the message naming the first of ``LABELS`` whose value differs (an
    absent label reads as ``""``, as a Go map does); ``""`` otherwise."""
    old, new = _labels(old_node), _labels(new_node)
    for label in LABELS:
        if old.get(label, "") != new.get(label, ""):
            return NEED_SYNC_LABEL_MESSAGE.format(label)
    return ""


def label_changes(node: Node, result: GPUResult) -> dict[str, str]:
    """The labels of ``result`` whose value on ``node`` differs: the body of the node's merge patch."""
    current = _labels(node)
    return {k: v for k, v in result.labels.items() if current.get(k) != v}
