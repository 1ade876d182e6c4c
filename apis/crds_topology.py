"""The CustomResourceDefinitions of the device and topology objects
(docs/rules/scheduler-deviceshare.md#device-crd): Koordinator's ``Device``
(``scheduling.koordinator.sh/v1alpha1``, cluster-scoped, one per node) and the
``NodeResourceTopology`` of the k8stopologyawareschedwg API (``topology.node.k8s.io/v1alpha1``,
cluster-scoped) that the koordlet writes its CPU topology annotations and zones into.

Device's schema is derived from the typed dataclasses of ``apis.device`` through
``apis.gojson.struct_openapi``; neither CRD has a status subresource (as upstream's). The NRT schema is
upstream's v1alpha1 (``topologyPolicies`` and ``zones`` required; zones ``{name, type, parent?, costs?,
attributes?, resources?}``), written out here. ``apis.crds`` registers both in its file table so
``hack/gen_crds.py`` writes them to ``deploy/crds/``.
Imports: the standard library and ``apis`` modules (device, gojson, gojson_kinds). Pure, no I/O.
"""

from __future__ import annotations

from typing import Any, Final

from apis.device import DEVICE_GROUP, DEVICE_KIND, DEVICE_PLURAL, DEVICE_VERSION, DeviceSpec, DeviceStatus
from apis.gojson import struct_openapi
from apis.gojson_kinds import QUANTITY_PATTERN

NRT_GROUP: Final = "topology.node.k8s.io"
NRT_VERSION: Final = "v1alpha1"
NRT_KIND: Final = "NodeResourceTopology"
NRT_PLURAL: Final = "noderesourcetopologies"
# *.k8s.io groups are protected: the API server wants the approval upstream's CRD carries
NRT_APPROVAL: Final = "https://github.com/kubernetes/enhancements/pull/1870"


def _crd(
    group: str,
    version: str,
    kind: str,
    plural: str,
    schema: dict[str, Any],
    *,
    annotations: dict[str, str] | None = None,
    short_names: list[str] | None = None,
) -> dict[str, Any]:
    names: dict[str, Any] = {"kind": kind, "listKind": f"{kind}List", "plural": plural}
    if short_names:
        names["shortNames"] = short_names
    names["singular"] = kind.lower()
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}", **({"annotations": annotations} if annotations else {})},
        "spec": {
            "group": group,
            "names": names,
            "scope": "Cluster",
            "versions": [
                {"name": version, "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
            ],
        },
    }


def device_crd() -> dict[str, Any]:
    """The Device CRD: ``spec.devices[]`` (type, labels, id, minor, moduleID, health, resources, topology,
    vfGroups, conditions) and ``status.allocations[]``."""
    schema = {
        "description": "Device lists the devices of one node (the object's name is the node's name).",
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "description": "The node's devices, written by its koordlet.",
                **struct_openapi(DeviceSpec),
            },
            "status": {"description": "Device allocations (informational).", **struct_openapi(DeviceStatus)},
        },
    }
    return _crd(DEVICE_GROUP, DEVICE_VERSION, DEVICE_KIND, DEVICE_PLURAL, schema)


def node_resource_topology_crd() -> dict[str, Any]:
    """The NodeResourceTopology CRD (v1alpha1 of the topology-aware scheduling API)."""
    text = {"type": "string"}
    quantity = {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": True,
    }
    named = {"type": "object", "required": ["name", "value"]}
    zone = {
        "description": "Zone represents a resource topology zone, e.g. socket, node, die or core.",
        "type": "object",
        "required": ["name", "type"],
        "properties": {
            "attributes": {"type": "array", "items": {**named, "properties": {"name": text, "value": text}}},
            "costs": {
                "type": "array",
                "items": {
                    **named,
                    "properties": {"name": text, "value": {"type": "integer", "format": "int64"}},
                },
            },
            "name": text,
            "parent": text,
            "resources": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["allocatable", "available", "capacity", "name"],
                    "properties": {
                        "allocatable": quantity,
                        "available": quantity,
                        "capacity": quantity,
                        "name": text,
                    },
                },
            },
            "type": text,
        },
    }
    schema = {
        "description": "NodeResourceTopology describes node resources and their topology.",
        "type": "object",
        "required": ["topologyPolicies", "zones"],
        "properties": {
            "apiVersion": text,
            "kind": text,
            "metadata": {"type": "object"},
            "topologyPolicies": {"type": "array", "items": text},
            "zones": {"type": "array", "items": zone},
        },
    }
    return _crd(
        NRT_GROUP,
        NRT_VERSION,
        NRT_KIND,
        NRT_PLURAL,
        schema,
        annotations={"api-approved.kubernetes.io": NRT_APPROVAL},
        short_names=["node-res-topo"],
    )


# Committed file name under deploy/crds/ → its generator (merged into apis.crds.CRDS).
CRDS_TOPOLOGY: Final = {
    f"{DEVICE_GROUP}_{DEVICE_PLURAL}.yaml": device_crd,
    f"{NRT_GROUP}_{NRT_PLURAL}.yaml": node_resource_topology_crd,
}
