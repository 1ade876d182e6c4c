"""The NodeSLO CustomResourceDefinition (``deploy/crds/slo.koordinator.sh_nodeslos.yaml``) as data.

``node_slo_crd()`` builds the apiextensions.k8s.io/v1 CRD from the typed NodeSLO dataclasses, so the
committed YAML can be checked against the code: cluster-scoped, ``v1alpha1`` served and stored, status
subresource, an Age printer column and a structural OpenAPI v3 schema valid for Kubernetes 1.20
(int64/int32 formats, quantities and intstr as ``x-kubernetes-int-or-string``, ``extensions``
preserving unknown fields, enums where SPEC §3 lists the values).
Imports: the standard library and ``apis`` modules. Pure, no I/O.
"""

from __future__ import annotations

from typing import Any

from apis import constants as c
from apis.nodeslo import NodeSLOSpec
from apis.nodeslo_codec import struct_openapi


def node_slo_spec_schema() -> dict[str, Any]:
    """OpenAPI v3 schema of ``NodeSLO.spec``."""
    schema = struct_openapi(NodeSLOSpec)
    schema["description"] = "NodeSLOSpec defines the desired state of NodeSLO"
    return schema


def node_slo_crd() -> dict[str, Any]:
    """The full NodeSLO CRD object."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{c.NODE_SLO_PLURAL}.{c.SLO_GROUP}"},
        "spec": {
            "group": c.SLO_GROUP,
            "names": {
                "kind": c.NODE_SLO_KIND,
                "listKind": f"{c.NODE_SLO_KIND}List",
                "plural": c.NODE_SLO_PLURAL,
                "singular": "nodeslo",
            },
            "scope": "Cluster",
            "versions": [
                {
                    "name": c.SLO_VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "description": "NodeSLO is the Schema for the nodeslos API",
                            "type": "object",
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": node_slo_spec_schema(),
                                "status": {
                                    "description": "NodeSLOStatus defines the observed state of NodeSLO",
                                    "type": "object",
                                },
                            },
                        }
                    },
                }
            ],
        },
    }
