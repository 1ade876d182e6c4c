"""The node's ``Device`` object built from its GPU records, as upstream's koordlet builds it
(docs/rules/koordlet-gpu.md#device-object), and the "has it changed" rule of its reporter
(docs/rules/koordlet-gpu.md#reporting).

Per card: ``type`` gpu, ``id`` = UUID, ``minor``, ``health``, resources ``koordinator.sh/gpu-core`` 100,
``koordinator.sh/gpu-memory`` = total bytes (BinarySI), ``koordinator.sh/gpu-memory-ratio`` 100, ``topology``
``{socketID: -1, nodeID, pcieID, busID}`` only when the NUMA node, the PCIe root and the bus id are known,
and a ``Healthy`` condition only on an unhealthy card. The object is named after the node, owned by the
Node, and labelled with the vendor, the model and the driver version.

Pure: no I/O, the time is an argument. Imports: standard library, apis.{device,kubeobjects},
agent.system.gpu (the records only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from agent.system.gpu import GPU, GPUInventory
from apis.device import (
    DEVICE_GROUP,
    DEVICE_KIND,
    DEVICE_VERSION,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    GPU_VENDOR_NVIDIA,
    LABEL_GPU_DRIVER_VERSION,
    LABEL_GPU_MODEL,
    LABEL_GPU_VENDOR,
    DeviceError,
    DeviceInfo,
    DeviceSpec,
    DeviceTopology,
    parse_device_spec,
)
from apis.device import GPU as GPU_TYPE
from apis.quantity import Format, Quantity

__all__ = [
    "CONDITION_HEALTHY",
    "build_device",
    "carry_condition_times",
    "device_changed",
    "device_patch",
    "gpu_device_info",
    "gpu_labels",
    "gpu_model",
    "sort_devices",
]

CONDITION_HEALTHY: Final = "Healthy"
NVIDIA_PREFIX: Final = "NVIDIA "
CORE_PER_CARD: Final = 100
RATIO_PER_CARD: Final = 100


def gpu_model(names: Sequence[str]) -> str:
    """The model label: every card's name must be the same and non-empty (else ""), the ``NVIDIA ``
    prefix dropped, spaces made dashes (``NVIDIA A100 SXM4 80GB`` → ``A100-SXM4-80GB``)."""
    if not names or any(n == "" or n != names[0] for n in names):
        return ""
    model = names[0].removeprefix(NVIDIA_PREFIX)
    return model.replace(" ", "-")


def gpu_labels(inventory: GPUInventory) -> dict[str, str] | None:
    """The Device's labels: None without cards; with cards the vendor ``nvidia``, and the model and
    driver version together (upstream reads both or neither: an unknown driver drops the model too)."""
    if not inventory.gpus:
        return None
    labels = {LABEL_GPU_VENDOR: GPU_VENDOR_NVIDIA}
    model = gpu_model([g.model for g in inventory.gpus])
    if model and inventory.driver_version:
        labels[LABEL_GPU_MODEL] = model
        labels[LABEL_GPU_DRIVER_VERSION] = inventory.driver_version
    return labels


def _conditions(gpu: GPU, now: str) -> list[dict[str, Any]] | None:
    """Only an unhealthy card carries a condition (upstream sets a status only on those)."""
    if gpu.healthy:
        return None
    return [
        {
            "type": CONDITION_HEALTHY,
            "status": "False",
            "lastTransitionTime": now,
            "reason": gpu.health_reason or "Unknown",
            "message": gpu.health_message or "device is unhealthy",
        }
    ]


def gpu_device_info(gpu: GPU, now: str) -> DeviceInfo:
    """One ``spec.devices`` entry; ``now`` (RFC 3339) stamps a new condition."""
    topology = None
    if gpu.numa_node >= 0 and gpu.pcie_id and gpu.bus_id:
        topology = DeviceTopology(socket_id=-1, node_id=gpu.numa_node, pcie_id=gpu.pcie_id, bus_id=gpu.bus_id)
    return DeviceInfo(
        type=GPU_TYPE,
        id=gpu.uuid,
        minor=gpu.minor,
        health=gpu.healthy,
        resources={
            GPU_CORE: Quantity.from_int(CORE_PER_CARD),
            GPU_MEMORY: Quantity.from_int(gpu.memory_total_bytes, Format.BINARY_SI),
            GPU_MEMORY_RATIO: Quantity.from_int(RATIO_PER_CARD),
        },
        topology=topology,
        conditions=_conditions(gpu, now),
    )


def sort_devices(devices: Sequence[DeviceInfo]) -> list[DeviceInfo]:
    """Upstream's order before comparing: by type, then minor."""
    return sorted(devices, key=lambda d: (d.type or "", d.minor if d.minor is not None else -1))


def build_device(node_name: str, node_uid: str, inventory: GPUInventory, now: str) -> dict[str, Any]:
    """The whole Device object to create: named after the node, owned by it (controller, blocking its
    deletion), labelled per ``gpu_labels``; a node without cards still gets one, with no devices."""
    if not node_name:
        raise ValueError("node name is required for the Device object")
    devices = sort_devices([gpu_device_info(g, now) for g in inventory.gpus])
    metadata: dict[str, Any] = {
        "name": node_name,
        "ownerReferences": [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "name": node_name,
                "uid": node_uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    labels = gpu_labels(inventory)
    if labels:
        metadata["labels"] = labels
    return {
        "apiVersion": f"{DEVICE_GROUP}/{DEVICE_VERSION}",
        "kind": DEVICE_KIND,
        "metadata": metadata,
        "spec": DeviceSpec(devices=devices or None).to_dict(),
    }


def _meta_map(obj: Mapping[str, Any], key: str) -> dict[str, str]:
    raw = (obj.get("metadata") or {}).get(key) or {}
    return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}


def carry_condition_times(desired: Sequence[DeviceInfo], current: Sequence[DeviceInfo]) -> list[DeviceInfo]:
    """Upstream's rule: a condition whose status did not change keeps the current
    ``lastTransitionTime`` (matched by device id and condition type); a changed one keeps the new time."""
    old = {d.id: {str(c.get("type")): c for c in d.conditions or ()} for d in current if d.id}
    out: list[DeviceInfo] = []
    for dev in desired:
        prev = old.get(dev.id) if dev.id else None
        if prev is None or not dev.conditions:
            out.append(dev)
            continue
        conds = []
        for cond in dev.conditions:
            was = prev.get(str(cond.get("type")))
            if was is not None and was.get("status") == cond.get("status"):
                cond = {**cond, "lastTransitionTime": was.get("lastTransitionTime")}
            conds.append(cond)
        out.append(replace(dev, conditions=conds))
    return out


def _current_devices(current: Mapping[str, Any]) -> list[DeviceInfo] | None:
    """The current object's devices, sorted; None when its spec does not decode (then it is rewritten)."""
    try:
        return sort_devices(parse_device_spec(current, "device").devices or [])
    except DeviceError:
        return None


def device_changed(desired: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Does ``current`` (the object on the API server) differ from ``desired`` in its devices (quantities
    compared by value, condition times carried over), labels or annotations (absent ≡ empty)? The
    koordlet sets no annotations, so any annotation on ``current`` is a difference, as upstream."""
    cur = _current_devices(current)
    if cur is None:
        return True
    want = carry_condition_times(_current_devices(desired) or [], cur)
    return (
        want != cur
        or _meta_map(desired, "labels") != _meta_map(current, "labels")
        or _meta_map(desired, "annotations") != _meta_map(current, "annotations")
    )


def device_patch(desired: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON merge patch making ``current`` equal ``desired`` where upstream's update replaces it:
    ``spec.devices`` whole (condition times carried over), the labels (keys not desired → null), the
    annotations (every current key → null)."""
    cur = _current_devices(current) or []
    devices = carry_condition_times(_current_devices(desired) or [], cur)
    want_labels = _meta_map(desired, "labels")
    labels: dict[str, str | None] = {k: None for k in _meta_map(current, "labels") if k not in want_labels}
    labels.update(want_labels)
    annotations: dict[str, str | None] = {k: None for k in _meta_map(current, "annotations")}
    want_annotations = _meta_map(desired, "annotations")
    annotations.update(want_annotations)
    metadata: dict[str, Any] = {}
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    spec = DeviceSpec(devices=devices or None).to_dict()
    patch: dict[str, Any] = {"spec": {"devices": spec.get("devices")}}
    if metadata:
        patch["metadata"] = metadata
    return patch
