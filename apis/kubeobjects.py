"""The Kubernetes objects koord reads and writes, as ``TypedDict``s of their JSON form (camelCase keys).

One set for every daemon: the agent, the manager and the scheduler type a pod as ``Pod``, a node as
``Node`` and any other object as ``KubeObject`` (NodeSLO and NodeMetric as ``CustomResource``, their
spec and status decoded by ``apis.nodeslo`` / ``apis.nodemetric``). Names and fields are Kubernetes' own
(core/v1, meta/v1); only the fields koord reads or writes are listed. Every class is ``total=False``
because API objects omit empty fields, so readers use ``.get``. Free-form parts (resource lists, whose
quantities may be strings or numbers, affinity, volumes, unknown fields) stay ``dict[str, Any]``.

These are static types only: nothing checks them at run time. JSON becomes one of them at the
boundaries that decode it (``kube.informer`` and each daemon's gateway), with a ``cast``; the helpers in
``apis.pod`` still read defensively, as the API server's objects are not validated here.
Imports: typing only.
"""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = [
    "ConfigMap",
    "Container",
    "ContainerStatus",
    "CustomResource",
    "KubeObject",
    "Node",
    "NodeAddress",
    "NodeCondition",
    "NodeSpec",
    "NodeStatus",
    "ObjectMeta",
    "OwnerReference",
    "Pod",
    "PodCondition",
    "PodSpec",
    "PodStatus",
    "ResourceRequirements",
    "Taint",
    "Toleration",
]


# --- meta/v1 ------------------------------------------------------------------------------------------
class OwnerReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


class ObjectMeta(TypedDict, total=False):
    name: str
    generateName: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str  # RFC 3339 (apis.rfc3339)
    deletionTimestamp: str
    deletionGracePeriodSeconds: int
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]
    finalizers: list[str]
    managedFields: list[dict[str, Any]]


class KubeObject(TypedDict, total=False):
    """Any API object: what every kind has (informer keys, Events' involved objects)."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta


class CustomResource(KubeObject, total=False):
    """A custom resource (NodeSLO, NodeMetric): spec and status as the JSON the CRD schema allows."""

    spec: dict[str, Any]
    status: dict[str, Any]


# --- core/v1: Pod ---------------------------------------------------------------------------------------
class Toleration(TypedDict, total=False):
    key: str
    operator: str  # "Exists" | "Equal" (absent: Equal)
    value: str
    effect: str  # "NoSchedule" | "PreferNoSchedule" | "NoExecute" (absent: all)
    tolerationSeconds: int


class ResourceRequirements(TypedDict, total=False):
    limits: dict[str, Any]  # resource name -> quantity
    requests: dict[str, Any]
    claims: list[dict[str, Any]]


class Container(TypedDict, total=False):
    name: str
    image: str
    command: list[str]
    args: list[str]
    workingDir: str
    env: list[dict[str, Any]]
    ports: list[dict[str, Any]]
    resources: ResourceRequirements
    volumeMounts: list[dict[str, Any]]
    imagePullPolicy: str
    restartPolicy: str  # init containers only: "Always" makes a sidecar
    securityContext: dict[str, Any]


class PodSpec(TypedDict, total=False):
    nodeName: str
    schedulerName: str
    priority: int
    priorityClassName: str
    preemptionPolicy: str
    containers: list[Container]
    initContainers: list[Container]
    overhead: dict[str, Any]  # resource name -> quantity
    nodeSelector: dict[str, str]
    affinity: dict[str, Any]
    tolerations: list[Toleration]
    topologySpreadConstraints: list[dict[str, Any]]
    hostNetwork: bool
    restartPolicy: str
    terminationGracePeriodSeconds: int
    serviceAccountName: str
    runtimeClassName: str
    volumes: list[dict[str, Any]]


class PodCondition(TypedDict, total=False):
    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str
    message: str
    lastProbeTime: str
    lastTransitionTime: str


class ContainerStatus(TypedDict, total=False):
    name: str
    containerID: str  # "<runtime>://<id>"
    image: str
    imageID: str
    ready: bool
    started: bool
    restartCount: int
    state: dict[str, Any]
    lastState: dict[str, Any]


class PodStatus(TypedDict, total=False):
    phase: str
    conditions: list[PodCondition]
    message: str
    reason: str
    nominatedNodeName: str
    hostIP: str
    podIP: str
    podIPs: list[dict[str, Any]]
    startTime: str
    qosClass: str  # "Guaranteed" | "Burstable" | "BestEffort"
    containerStatuses: list[ContainerStatus]
    initContainerStatuses: list[ContainerStatus]


class Pod(KubeObject, total=False):
    spec: PodSpec
    status: PodStatus


# --- core/v1: Node --------------------------------------------------------------------------------------
class Taint(TypedDict, total=False):
    key: str
    value: str
    effect: str
    timeAdded: str


class NodeSpec(TypedDict, total=False):
    unschedulable: bool
    taints: list[Taint]
    podCIDR: str
    podCIDRs: list[str]
    providerID: str


class NodeCondition(TypedDict, total=False):
    type: str
    status: str
    reason: str
    message: str
    lastHeartbeatTime: str
    lastTransitionTime: str


class NodeAddress(TypedDict, total=False):
    type: str  # "InternalIP" | "Hostname" | ...
    address: str


class NodeStatus(TypedDict, total=False):
    capacity: dict[str, Any]  # resource name -> quantity
    allocatable: dict[str, Any]
    conditions: list[NodeCondition]
    addresses: list[NodeAddress]
    nodeInfo: dict[str, Any]
    daemonEndpoints: dict[str, Any]
    images: list[dict[str, Any]]


class Node(KubeObject, total=False):
    spec: NodeSpec
    status: NodeStatus


# --- core/v1: ConfigMap ---------------------------------------------------------------------------------
class ConfigMap(KubeObject, total=False):
    data: dict[str, str]
    binaryData: dict[str, str]  # base64
    immutable: bool
