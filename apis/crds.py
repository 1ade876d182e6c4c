"""The CustomResourceDefinitions of ``deploy/crds/`` (NodeSLO, NodeMetric) as data.

Each CRD is built from the typed dataclasses through ``apis.gojson.struct_openapi``, so the committed
YAML (written by ``hack/gen_crds.py``) can be checked against the code: cluster-scoped, ``v1alpha1``
served and stored, status subresource, printer columns and a structural OpenAPI v3 schema valid for
Kubernetes 1.20 (no CEL; int64/int32 formats, quantities and intstr as ``x-kubernetes-int-or-string``,
free-form objects preserving unknown fields, enums where the types declare them, RFC 3339 times as
``date-time`` strings).
Imports: the standard library and ``apis`` modules. Pure, no I/O.
"""

from __future__ import annotations

from typing import Any, Final

from apis import constants as c
from apis.gojson import struct_openapi
from apis.nodemetric import NodeMetricSpec, NodeMetricStatus
from apis.nodeslo import NodeSLOSpec

AGE_COLUMN: Final = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def _described(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, **schema}


def _crd(
    kind: str,
    plural: str,
    description: str,
    spec: dict[str, Any],
    status: dict[str, Any],
    columns: list[dict[str, Any]],
) -> dict[str, Any]:
    """A cluster-scoped ``slo.koordinator.sh/v1alpha1`` CRD with a status subresource."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{c.SLO_GROUP}"},
        "spec": {
            "group": c.SLO_GROUP,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
            "scope": "Cluster",
            "versions": [
                {
                    "name": c.SLO_VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [*columns, AGE_COLUMN],
                    "schema": {
                        "openAPIV3Schema": {
                            "description": description,
                            "type": "object",
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec,
                                "status": status,
                            },
                        }
                    },
                }
            ],
        },
    }


def node_slo_spec_schema() -> dict[str, Any]:
    """OpenAPI v3 schema of ``NodeSLO.spec``."""
    return _described(struct_openapi(NodeSLOSpec), "NodeSLOSpec defines the desired state of NodeSLO")


def node_slo_crd() -> dict[str, Any]:
    """The full NodeSLO CRD object."""
    return _crd(
        c.NODE_SLO_KIND,
        c.NODE_SLO_PLURAL,
        "NodeSLO is the Schema for the nodeslos API",
        node_slo_spec_schema(),
        {"description": "NodeSLOStatus defines the observed state of NodeSLO", "type": "object"},
        [],
    )


def node_metric_crd() -> dict[str, Any]:
    """The full NodeMetric CRD object (printer columns: update time, node CPU and memory, age)."""
    usage = ".status.nodeMetric.nodeUsage.resources"
    return _crd(
        c.NODE_METRIC_KIND,
        c.NODE_METRIC_PLURAL,
        "NodeMetric is the resource usage of one node (the object's name is the node's name).",
        _described(struct_openapi(NodeMetricSpec), "Desired collection behaviour, written by koord-manager."),
        _described(struct_openapi(NodeMetricStatus), "Observed usage, written by the node's koordlet."),
        [
            {
                "name": "UpdateTime",
                "type": "date",
                "description": "When the koordlet last reported.",
                "jsonPath": ".status.updateTime",
            },
            {
                "name": "CPU",
                "type": "string",
                "description": "Average node CPU usage.",
                "jsonPath": f"{usage}.cpu",
            },
            {
                "name": "Memory",
                "type": "string",
                "description": "Average node memory usage.",
                "jsonPath": f"{usage}.memory",
            },
        ],
    )


# Committed file name under deploy/crds/ → its generator.
CRDS: Final = {
    f"{c.SLO_GROUP}_{c.NODE_SLO_PLURAL}.yaml": node_slo_crd,
    f"{c.SLO_GROUP}_{c.NODE_METRIC_PLURAL}.yaml": node_metric_crd,
}
