"""Koordinator's ``Device`` CR (``scheduling.koordinator.sh/v1alpha1``, cluster-scoped, one per node named
after it), the device resource names and the pod annotation ``scheduling.koordinator.sh/device-allocated``
(docs/rules/scheduler-deviceshare.md#device-crd, #resource-names, #prebind).

The CR's spec and status are typed dataclasses with Go's JSON form (``apis.gojson``), so the CRD schema
(``apis.crds_topology``) is derived from them. The annotation is parsed and written as Go's
``json.Marshal`` of ``map[DeviceType][]*DeviceAllocation``: keys sorted, ``{"minor", "resources", "id"?,
"extension"?}`` per allocation, quantities canonical strings (memory in BinarySI, the rest DecimalSI, as
upstream builds them with ``resource.NewQuantity``).
Imports: the standard library and apis (constants, gojson, gojson_base, gojson_collections, gojson_kinds,
quantity). Pure, no I/O.
"""

# ruff: noqa: RUF009  -- jf() returns a dataclasses.field() with a default or default_factory
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from apis import constants as c
from apis.gojson import GoStruct, StructKind, jf
from apis.gojson_base import DecodeError
from apis.gojson_collections import ListKind, MapKind
from apis.gojson_kinds import BoolKind, IntKind, ObjectKind, QuantityKind, StrKind
from apis.quantity import Format, Quantity, QuantityError

__all__ = [
    "ANNOTATION_DEVICE_ALLOCATED",
    "DEVICE_TYPES",
    "DeviceAllocationEntry",
    "DeviceError",
    "DeviceInfo",
    "DeviceSpec",
    "DeviceStatus",
    "format_device_allocations",
    "parse_device_allocations",
    "parse_device_spec",
]

DEVICE_GROUP: Final = c.SCHEDULING_DOMAIN_PREFIX
DEVICE_VERSION: Final = "v1alpha1"
DEVICE_KIND: Final = "Device"
DEVICE_PLURAL: Final = "devices"
ANNOTATION_DEVICE_ALLOCATED: Final = f"{c.SCHEDULING_DOMAIN_PREFIX}/device-allocated"
LABEL_GPU_VENDOR: Final = f"{c.NODE_DOMAIN_PREFIX}/gpu-vendor"
LABEL_GPU_MODEL: Final = f"{c.NODE_DOMAIN_PREFIX}/gpu-model"
LABEL_GPU_DRIVER_VERSION: Final = f"{c.NODE_DOMAIN_PREFIX}/gpu-driver-version"
GPU_VENDOR_NVIDIA: Final = "nvidia"
"""The ``gpu-vendor`` label's value on a node with NVIDIA cards (upstream's ``GPUVendorNVIDIA``)."""

# --- device types and resource names (docs/rules/scheduler-deviceshare.md#resource-names) -------------
GPU: Final = "gpu"
RDMA: Final = "rdma"
FPGA: Final = "fpga"
DEVICE_TYPES: Final = (GPU, RDMA, FPGA)

NVIDIA_GPU: Final = "nvidia.com/gpu"
AMD_GPU: Final = "amd.com/gpu"
HYGON_DCU: Final = "dcu.com/gpu"
KOORD_GPU: Final = f"{c.DOMAIN_PREFIX}gpu"
GPU_SHARED: Final = f"{c.DOMAIN_PREFIX}gpu.shared"
GPU_CORE: Final = f"{c.DOMAIN_PREFIX}gpu-core"
GPU_MEMORY: Final = f"{c.DOMAIN_PREFIX}gpu-memory"
GPU_MEMORY_RATIO: Final = f"{c.DOMAIN_PREFIX}gpu-memory-ratio"
NPU_CORE: Final = "huawei.com/npu-core"
NPU_CPU: Final = "huawei.com/npu-cpu"
NPU_DVPP: Final = "huawei.com/npu-dvpp"
KOORD_RDMA: Final = f"{c.DOMAIN_PREFIX}rdma"
KOORD_FPGA: Final = f"{c.DOMAIN_PREFIX}fpga"

RESOURCE_NAMES: Final[Mapping[str, tuple[str, ...]]] = {
    GPU: (NVIDIA_GPU, AMD_GPU, HYGON_DCU, KOORD_GPU, GPU_SHARED, GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO,
          NPU_CORE, NPU_CPU, NPU_DVPP),
    RDMA: (KOORD_RDMA,),
    FPGA: (KOORD_FPGA,),
}  # fmt: skip
DEVICE_TYPE_OF: Final[Mapping[str, str]] = {name: t for t, names in RESOURCE_NAMES.items() for name in names}


class DeviceError(ValueError):
    """A Device object or a device-allocated annotation that does not decode; the message names the
    field and the value."""


# --- the Device CR (docs/rules/scheduler-deviceshare.md#device-crd) -------------------------------------
STR = StrKind()
INT32 = IntKind(32)
RESOURCES = MapKind(QuantityKind())
LABELS = MapKind(StrKind(nullable=False))


@dataclass(slots=True)
class DeviceTopology(GoStruct):
    socket_id: int = jf("socketID", IntKind(32, pointer=False), required=True)
    node_id: int = jf("nodeID", IntKind(32, pointer=False), required=True)
    pcie_id: str = jf("pcieID", StrKind(nullable=False), required=True)
    bus_id: str | None = jf("busID", STR)


@dataclass(slots=True)
class VirtualFunction(GoStruct):
    minor: int = jf("minor", IntKind(32, pointer=False), required=True)
    bus_id: str | None = jf("busID", STR)


@dataclass(slots=True)
class VirtualFunctionGroup(GoStruct):
    labels: dict[str, str] | None = jf("labels", LABELS)
    vfs: list[VirtualFunction] | None = jf("vfs", ListKind(StructKind(VirtualFunction, pointer=False)))


@dataclass(slots=True)
class DeviceInfo(GoStruct):
    """One device of ``spec.devices``: ``health`` false (the default) means no capacity."""

    type: str | None = jf("type", STR)
    labels: dict[str, str] | None = jf("labels", LABELS)
    id: str | None = jf("id", STR)
    minor: int | None = jf("minor", INT32)
    module_id: int | None = jf("moduleID", INT32)
    health: bool = jf("health", BoolKind(pointer=False), required=True, crd_default=False)
    resources: dict[str, Quantity] | None = jf("resources", RESOURCES)
    topology: DeviceTopology | None = jf("topology", StructKind(DeviceTopology))
    vf_groups: list[VirtualFunctionGroup] | None = jf(
        "vfGroups", ListKind(StructKind(VirtualFunctionGroup, pointer=False))
    )
    conditions: list[dict[str, Any]] | None = jf("conditions", ListKind(ObjectKind(pointer=False)))


@dataclass(slots=True)
class DeviceSpec(GoStruct):
    devices: list[DeviceInfo] | None = jf("devices", ListKind(StructKind(DeviceInfo, pointer=False)))


@dataclass(slots=True)
class DeviceAllocationItem(GoStruct):
    name: str | None = jf("name", STR)
    namespace: str | None = jf("namespace", STR)
    uuid: str | None = jf("uuid", STR)
    minors: list[int] | None = jf("minors", ListKind(IntKind(32, pointer=False)))


@dataclass(slots=True)
class DeviceAllocation(GoStruct):
    type: str | None = jf("type", STR)
    entries: list[DeviceAllocationItem] | None = jf(
        "entries", ListKind(StructKind(DeviceAllocationItem, pointer=False))
    )


@dataclass(slots=True)
class DeviceStatus(GoStruct):
    allocations: list[DeviceAllocation] | None = jf(
        "allocations", ListKind(StructKind(DeviceAllocation, pointer=False))
    )


def parse_device_spec(obj: Mapping[str, Any] | None, where: str = "device") -> DeviceSpec:
    """``spec`` of a Device object (None or no spec: no devices); DeviceError names the bad field."""
    if obj is None:
        return DeviceSpec()
    if not isinstance(obj, Mapping):
        raise DeviceError(f"{where}: expected an object, got {type(obj).__name__}")
    try:
        return DeviceSpec.from_dict(obj.get("spec"), f"{where}.spec")
    except DecodeError as e:
        first = e.errors[0]
        raise DeviceError(f"{first.path}={first.value!r}: {first.message}") from None


# --- the device-allocated annotation (docs/rules/scheduler-deviceshare.md#prebind) ----------------------
@dataclass(frozen=True, slots=True)
class DeviceAllocationEntry:
    """One device a pod got: its minor and the resources taken on it (integer values)."""

    minor: int
    resources: Mapping[str, int]
    id: str = ""
    extension: Mapping[str, Any] | None = None


Allocations = Mapping[str, list[DeviceAllocationEntry]]


def _int_value(raw: object, where: str) -> int:
    try:
        return Quantity.from_json(raw).value()
    except (QuantityError, TypeError, ValueError) as e:
        raise DeviceError(f"{where}={raw!r}: not a quantity ({e})") from None


def parse_device_allocations(
    text: str | None, where: str = ANNOTATION_DEVICE_ALLOCATED
) -> dict[str, list[DeviceAllocationEntry]]:
    """The annotation's value (``""``/None: nothing allocated); DeviceError names the bad part."""
    if not text:
        return {}
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise DeviceError(f"{where}: invalid JSON: {e}") from None
    except RecursionError:  # nested deeper than the parser goes: as undecodable as any bad JSON
        raise DeviceError(f"{where}: invalid JSON: nested too deep") from None
    return allocations_from_json(raw, where)


def allocations_from_json(raw: object, where: str) -> dict[str, list[DeviceAllocationEntry]]:
    """``{"<type>": [{"minor", "resources", "id"?, "extension"?}]}`` as decoded JSON."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise DeviceError(f"{where}: expected an object, got {raw!r}")
    out: dict[str, list[DeviceAllocationEntry]] = {}
    for dtype, items in raw.items():
        if items is None:
            continue
        if not isinstance(items, list):
            raise DeviceError(f"{where}.{dtype}: expected a list, got {items!r}")
        entries: list[DeviceAllocationEntry] = []
        for i, item in enumerate(items):
            at = f"{where}.{dtype}[{i}]"
            if not isinstance(item, Mapping):
                raise DeviceError(f"{at}: expected an object, got {item!r}")
            minor = item.get("minor", 0)
            if isinstance(minor, bool) or not isinstance(minor, int) or not -(2**31) <= minor < 2**31:
                raise DeviceError(f"{at}.minor={minor!r}: expected an int32")
            res = item.get("resources") or {}
            if not isinstance(res, Mapping):
                raise DeviceError(f"{at}.resources: expected an object, got {res!r}")
            values = {str(n): _int_value(v, f"{at}.resources.{n}") for n, v in res.items()}
            ext = item.get("extension")
            entries.append(
                DeviceAllocationEntry(
                    minor, values, str(item.get("id") or ""), dict(ext) if isinstance(ext, Mapping) else None
                )
            )
        out[str(dtype)] = entries
    return out


def quantity_text(name: str, value: int) -> str:
    """How upstream prints an allocated value: memory bytes BinarySI (``8Gi``), the rest DecimalSI."""
    fmt = Format.BINARY_SI if name == GPU_MEMORY else Format.DECIMAL_SI
    return str(Quantity.from_int(value, fmt))


def allocations_to_json(allocations: Allocations) -> dict[str, list[dict[str, Any]]]:
    """Go's JSON shape (map keys sorted; ``id``/``extension`` omitted when empty)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for dtype in sorted(allocations):
        items: list[dict[str, Any]] = []
        for e in allocations[dtype]:
            item: dict[str, Any] = {
                "minor": e.minor,
                "resources": {n: quantity_text(n, e.resources[n]) for n in sorted(e.resources)},
            }
            if e.id:
                item["id"] = e.id
            if e.extension:
                item["extension"] = dict(e.extension)
            items.append(item)
        out[dtype] = items
    return out


def format_device_allocations(allocations: Allocations) -> str:
    """The annotation value, compact as Go's ``json.Marshal``."""
    return json.dumps(allocations_to_json(allocations), separators=(",", ":"))
