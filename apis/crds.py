"""The CustomResourceDefinitions of ``deploy/crds/`` (NodeSLO, NodeMetric, ClusterColocationProfile,
PodGroup, ElasticQuota, Reservation; Device and NodeResourceTopology from ``apis.crds_topology``) as data.

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
from apis.colocationprofile import ClusterColocationProfileSpec
from apis.crds_topology import CRDS_TOPOLOGY
from apis.gojson import struct_openapi
from apis.gojson_kinds import QUANTITY_PATTERN
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
    *,
    group: str = c.SLO_GROUP,
    version: str = c.SLO_VERSION,
    scope: str = "Cluster",
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A ``v1alpha1`` CRD with a status subresource (cluster-scoped ``slo.koordinator.sh`` unless
    another group or scope is given)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}", **({"annotations": annotations} if annotations else {})},
        "spec": {
            "group": group,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
            "scope": scope,
            "versions": [
                {
                    "name": version,
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


def cluster_colocation_profile_crd() -> dict[str, Any]:
    """The full ClusterColocationProfile CRD object (config.koordinator.sh; printer columns: QoS class,
    priority class, probability, scheduler name, age)."""
    return _crd(
        c.CLUSTER_COLOCATION_PROFILE_KIND,
        c.CLUSTER_COLOCATION_PROFILE_PLURAL,
        "ClusterColocationProfile selects pods at creation and writes QoS, priority, scheduler, labels, "
        "annotations and a patch into them (docs/rules/colocation-profile.md).",
        _described(
            struct_openapi(ClusterColocationProfileSpec),
            "Which pods the profile selects and what it writes into them.",
        ),
        {"description": "ClusterColocationProfileStatus is empty.", "type": "object"},
        [
            {
                "name": "QoSClass",
                "type": "string",
                "description": "The koordinator.sh/qosClass label written into the pods.",
                "jsonPath": ".spec.qosClass",
            },
            {
                "name": "PriorityClass",
                "type": "string",
                "description": "The PriorityClass given to the pods.",
                "jsonPath": ".spec.priorityClassName",
            },
            {
                "name": "Probability",
                "type": "string",
                "description": "Share of the selected pods the profile applies to (unset: all).",
                "jsonPath": ".spec.probability",
            },
            {
                "name": "Scheduler",
                "type": "string",
                "description": "The schedulerName given to the pods.",
                "jsonPath": ".spec.schedulerName",
            },
        ],
        group=c.CONFIG_GROUP,
        version=c.CONFIG_VERSION,
    )


def pod_group_crd() -> dict[str, Any]:
    """The PodGroup CRD of gang scheduling (scheduling.sigs.k8s.io/v1alpha1, namespaced;
    docs/rules/scheduler-coscheduling.md#the-podgroup-crd): the fields koord reads and writes."""
    int32 = {"type": "integer", "format": "int32"}
    spec = {
        "description": "PodGroupSpec: the gang's minimum members and how long its members wait at Permit.",
        "type": "object",
        "properties": {
            "minMember": int32,
            "minResources": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "scheduleTimeoutSeconds": int32,
        },
    }
    status = {
        "description": "PodGroupStatus, written by koord-scheduler's PodGroup status controller.",
        "type": "object",
        "properties": {
            "phase": {
                "type": "string",
                "enum": [
                    "Pending",
                    "PreScheduling",
                    "Scheduling",
                    "Scheduled",
                    "Running",
                    "Finished",
                    "Failed",
                    "Unknown",
                ],
            },
            "occupiedBy": {"type": "string"},
            "scheduled": int32,
            "running": int32,
            "succeeded": int32,
            "failed": int32,
            "scheduleStartTime": {"type": "string", "format": "date-time"},
        },
    }
    columns = [
        {"name": name, "type": kind, "description": text, "jsonPath": path}
        for name, kind, text, path in (
            ("Phase", "string", "The gang's phase.", ".status.phase"),
            ("MinMember", "integer", "Minimum members.", ".spec.minMember"),
            ("Scheduled", "integer", "Bound members.", ".status.scheduled"),
        )
    ]
    return _crd(
        "PodGroup",
        "podgroups",
        "PodGroup declares a gang: pods labelled pod-group.scheduling.sigs.k8s.io=<name> bind together "
        "once minMember of them have a node.",
        spec,
        status,
        columns,
        group="scheduling.sigs.k8s.io",
        version="v1alpha1",
        scope="Namespaced",
        # *.k8s.io groups are protected: the API server wants the approval upstream's CRD carries
        annotations={
            "api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/scheduler-plugins/pull/50"
        },
    )


def elastic_quota_crd() -> dict[str, Any]:
    """The ElasticQuota CRD of hierarchical quotas (scheduling.sigs.k8s.io/v1alpha1, namespaced,
    wire-compatible with scheduler-plugins; docs/rules/scheduler-elasticquota.md#the-elasticquota-object):
    min and max in spec, the used the scheduler's status controller writes."""
    quantity = {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": True,
    }

    def resource_list(description: str) -> dict[str, Any]:
        return {"description": description, "type": "object", "additionalProperties": quantity}

    spec = {
        "description": "ElasticQuotaSpec defines the Min and Max for Quota.",
        "type": "object",
        "properties": {
            "min": resource_list("Min is the set of desired guaranteed limits for each named resource."),
            "max": resource_list(
                "Max is the set of desired max limits for each named resource; its names are the resources "
                "the quota accounts."
            ),
        },
    }
    status = {
        "description": "ElasticQuotaStatus defines the observed use.",
        "type": "object",
        "properties": {
            "used": resource_list("Used is the current observed total usage of the resource in the quota."),
        },
    }
    return _crd(
        "ElasticQuota",
        "elasticquotas",
        "ElasticQuota sets elastic quota restrictions: a guaranteed min, a max, and a parent through the "
        "label quota.scheduling.koordinator.sh/parent.",
        spec,
        status,
        [],
        group="scheduling.sigs.k8s.io",
        version="v1alpha1",
        scope="Namespaced",
        # *.k8s.io groups are protected: the API server wants the approval upstream's CRD carries
        annotations={
            "api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/scheduler-plugins/pull/52"
        },
    )


def reservation_crd() -> dict[str, Any]:
    """Koordinator's Reservation CRD (scheduling.koordinator.sh/v1alpha1, cluster-scoped;
    docs/rules/scheduler-reservation.md#the-crd): the fields koord reads, with the CRD's defaults
    (``ttl`` 24h, ``allocateOnce`` true, phase Pending); the template and owner selectors free-form."""
    free: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    text = {"type": "string"}
    quantities = {"type": "object", "additionalProperties": {
        "anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": True}}  # fmt: skip
    owner = {"type": "object", "minProperties": 1, "properties": {
        "object": free, "controller": free, "labelSelector": free}}  # fmt: skip
    taint = {
        "type": "object",
        "required": ["key", "effect"],
        "properties": {
            "key": text,
            "value": text,
            "effect": text,
            "timeAdded": {"type": "string", "format": "date-time"},
        },
    }
    spec = {
        "description": "ReservationSpec: the pod template it reserves for and the owners allowed to use it.",
        "type": "object",
        "required": ["template", "owners"],
        "properties": {
            "template": free,
            "owners": {"type": "array", "minItems": 1, "items": owner},
            "ttl": {"type": "string", "default": "24h"},
            "expires": {"type": "string", "format": "date-time"},
            "preAllocation": {"type": "boolean"},
            "allocateOnce": {"type": "boolean", "default": True},
            "allocatePolicy": {"type": "string", "enum": ["", "Aligned", "Restricted"]},
            "unschedulable": {"type": "boolean"},
            "taints": {"type": "array", "items": taint},
            "preAllocationPolicy": {"type": "object", "properties": {
                "mode": {"type": "string", "enum": ["Default", "Cluster"]},
                "enableMultiple": {"type": "boolean"}}},
        },
    }  # fmt: skip
    condition = {"type": "object", "properties": {
        k: text for k in ("type", "status", "reason", "message")} | {
        "lastProbeTime": {"type": "string", "format": "date-time"},
        "lastTransitionTime": {"type": "string", "format": "date-time"}}}  # fmt: skip
    status = {
        "description": "ReservationStatus, written by koord-scheduler when it places and expires it.",
        "type": "object",
        "properties": {
            "phase": {"type": "string", "default": "Pending",
                      "enum": ["Pending", "Available", "Succeeded", "Waiting", "Failed"]},
            "conditions": {"type": "array", "items": condition},
            "currentOwners": {"type": "array", "items": free},
            "nodeName": text,
            "allocatable": quantities,
            "allocated": quantities,
        },
    }  # fmt: skip
    crd = _crd(
        "Reservation", "reservations",
        "Reservation holds resources on a node for the pods its owners select.",
        spec, status, [], group=c.SCHEDULING_DOMAIN_PREFIX, version="v1alpha1",
    )  # fmt: skip
    column = [
        {"name": name, "type": "string", "description": f"The {what} of reservation.", "jsonPath": path}
        for name, what, path in (
            ("Phase", "phase", ".status.phase"), ("Node", "node", ".status.nodeName"),
            ("TTL", "TTL", ".spec.ttl"), ("Expires", "expiry", ".spec.expires"),
        )
    ]  # fmt: skip
    # upstream's order: Phase, Age, Node, TTL, Expires
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = [column[0], AGE_COLUMN, *column[1:]]
    return crd


# Committed file name under deploy/crds/ → its generator.
CRDS: Final = {
    f"{c.SLO_GROUP}_{c.NODE_SLO_PLURAL}.yaml": node_slo_crd,
    f"{c.SLO_GROUP}_{c.NODE_METRIC_PLURAL}.yaml": node_metric_crd,
    f"{c.CONFIG_GROUP}_{c.CLUSTER_COLOCATION_PROFILE_PLURAL}.yaml": cluster_colocation_profile_crd,
    "scheduling.sigs.k8s.io_podgroups.yaml": pod_group_crd,
    "scheduling.sigs.k8s.io_elasticquotas.yaml": elastic_quota_crd,
    "scheduling.koordinator.sh_reservations.yaml": reservation_crd,
    **CRDS_TOPOLOGY,
}
