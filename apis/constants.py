"""Names shared by every koord component: label, annotation and resource names, the CRD group.

Values are exactly upstream Koordinator's (docs/upstream.md#conventions and
docs/upstream.md#qos-and-priority-classes), so Koordinator tooling reads ours.
Imports: nothing (standard library only).
"""

from __future__ import annotations

from typing import Final

# --- prefixes (docs/upstream.md#conventions) ---------------------------------------------------------
DOMAIN_PREFIX: Final = "koordinator.sh/"
NODE_DOMAIN_PREFIX: Final = "node.koordinator.sh"
SCHEDULING_DOMAIN_PREFIX: Final = "scheduling.koordinator.sh"
POD_DOMAIN_PREFIX: Final = "pod.koordinator.sh"
KUBELET_DOMAIN_PREFIX: Final = "kubelet.koordinator.sh"
RESOURCE_DOMAIN_PREFIX: Final = "kubernetes.io/"

# --- CRDs ---------------------------------------------------------------------------------------
SLO_GROUP: Final = "slo.koordinator.sh"
SLO_VERSION: Final = "v1alpha1"
SLO_API_VERSION: Final = f"{SLO_GROUP}/{SLO_VERSION}"
NODE_METRIC_KIND: Final = "NodeMetric"
NODE_METRIC_PLURAL: Final = "nodemetrics"
NODE_SLO_KIND: Final = "NodeSLO"
NODE_SLO_PLURAL: Final = "nodeslos"
CONFIG_GROUP: Final = "config.koordinator.sh"
CONFIG_VERSION: Final = "v1alpha1"
CONFIG_API_VERSION: Final = f"{CONFIG_GROUP}/{CONFIG_VERSION}"
CLUSTER_COLOCATION_PROFILE_KIND: Final = "ClusterColocationProfile"
CLUSTER_COLOCATION_PROFILE_PLURAL: Final = "clustercolocationprofiles"

# --- the slo-controller-config ConfigMap (docs/configuration.md#the-slo-controller-config-configmap) ---
DEFAULT_CONFIG_NAMESPACE: Final = "koordinator-system"
SLO_CONTROLLER_CONFIG_NAME: Final = "slo-controller-config"
COLOCATION_CONFIG_KEY: Final = "colocation-config"
RESOURCE_THRESHOLD_CONFIG_KEY: Final = "resource-threshold-config"
RESOURCE_QOS_CONFIG_KEY: Final = "resource-qos-config"
CPU_BURST_CONFIG_KEY: Final = "cpu-burst-config"
SYSTEM_CONFIG_KEY: Final = "system-config"
HOST_APPLICATION_CONFIG_KEY: Final = "host-application-config"
CPU_NORMALIZATION_CONFIG_KEY: Final = "cpu-normalization-config"
RESOURCE_AMPLIFICATION_CONFIG_KEY: Final = "resource-amplification-config"

# --- extended resources (docs/upstream.md#qos-and-priority-classes) ----------------------------------
RESOURCE_CPU: Final = "cpu"
RESOURCE_MEMORY: Final = "memory"
BATCH_CPU: Final = "kubernetes.io/batch-cpu"
BATCH_MEMORY: Final = "kubernetes.io/batch-memory"
MID_CPU: Final = "kubernetes.io/mid-cpu"
MID_MEMORY: Final = "kubernetes.io/mid-memory"

# --- pod labels and annotations (docs/upstream.md#qos-and-priority-classes) --------------------------
LABEL_POD_QOS: Final = "koordinator.sh/qosClass"
LABEL_POD_PRIORITY_CLASS: Final = "koordinator.sh/priority-class"
LABEL_POD_PRIORITY: Final = "koordinator.sh/priority"
LABEL_POD_EVICTION_ENABLED: Final = "koordinator.sh/eviction-enabled"
ANNOTATION_EVICTION_POLICY: Final = "koordinator.sh/eviction-policy"
ANNOTATION_EVICTION_PRIORITY: Final = "koordinator.sh/eviction-priority"
ANNOTATION_POD_CPU_BURST: Final = "koordinator.sh/cpuBurst"
ANNOTATION_POD_MEMORY_QOS: Final = "koordinator.sh/memoryQOS"
ANNOTATION_POD_CPU_QOS: Final = "koordinator.sh/cpuQOS"
ANNOTATION_POD_BLKIO_QOS: Final = "koordinator.sh/blkioQOS"
ANNOTATION_EXTENDED_RESOURCE_SPEC: Final = "node.koordinator.sh/extended-resource-spec"
ANNOTATION_RESOURCE_STATUS: Final = "scheduling.koordinator.sh/resource-status"
ANNOTATION_RESERVE_POD: Final = "scheduling.koordinator.sh/reserve-pod"

# --- ClusterColocationProfile (docs/rules/colocation-profile.md#the-clustercolocationprofile-crd) -------
ANNOTATION_SKIP_UPDATE_RESOURCES: Final = "config.koordinator.sh/skip-update-resources"
LABEL_CONTROLLER_MANAGED: Final = "config.koordinator.sh/controller-managed"

# --- node labels and annotations -------------------------------------------------------------------
ANNOTATION_NODE_COLOCATION_STRATEGY: Final = "node.koordinator.sh/colocation-strategy"
LABEL_CPU_RECLAIM_RATIO: Final = "node.koordinator.sh/cpu-reclaim-ratio"
LABEL_MEMORY_RECLAIM_RATIO: Final = "node.koordinator.sh/memory-reclaim-ratio"
LABEL_MID_STATIC_CPU_RESERVED_RATIO: Final = "node.koordinator.sh/mid-static-cpu-reserved-ratio"
LABEL_MID_STATIC_MEMORY_RESERVED_RATIO: Final = "node.koordinator.sh/mid-static-memory-reserved-ratio"
ANNOTATION_NETWORK_BANDWIDTH: Final = "node.koordinator.sh/network-bandwidth"
ANNOTATION_NODE_RESERVATION: Final = "node.koordinator.sh/reservation"
ANNOTATION_NODE_SYSTEM_QOS_RESOURCE: Final = "node.koordinator.sh/system-qos-resource"
ANNOTATION_CPU_NORMALIZATION_RATIO: Final = "node.koordinator.sh/cpu-normalization-ratio"
ANNOTATION_CPU_BASIC_INFO: Final = "node.koordinator.sh/cpu-basic-info"
ANNOTATION_RESOURCE_AMPLIFICATION_RATIO: Final = "node.koordinator.sh/resource-amplification-ratio"
ANNOTATION_NODE_RAW_ALLOCATABLE: Final = "node.koordinator.sh/raw-allocatable"
ANNOTATION_ORIGIN_EXTENDED_ALLOCATABLE: Final = "node.koordinator.sh/originExtendedAllocatable"
ANNOTATION_THIRD_PARTY_ALLOCATIONS: Final = "node.koordinator.sh/thirdPartyAllocations"
ANNOTATION_KUBELET_CPU_MANAGER_POLICY: Final = "kubelet.koordinator.sh/cpu-manager-policy"

# --- load-aware scheduling (docs/rules/scheduler.md#loadawarescheduling) -----------------------------
ANNOTATION_USAGE_THRESHOLDS: Final = "scheduling.koordinator.sh/usage-thresholds"
ANNOTATION_LOAD_ESTIMATED_SCALING_FACTORS: Final = "scheduling.koordinator.sh/load-estimated-scaling-factors"
ANNOTATION_LOAD_ESTIMATED_SECONDS_AFTER_POD_SCHEDULED: Final = (
    "scheduling.koordinator.sh/load-estimated-seconds-after-pod-scheduled"
)
ANNOTATION_LOAD_ESTIMATED_SECONDS_AFTER_INITIALIZED: Final = (
    "scheduling.koordinator.sh/load-estimated-seconds-after-initialized"
)
SCHEDULER_NAME: Final = "koord-scheduler"
LOAD_AWARE_PLUGIN_NAME: Final = "LoadAwareScheduling"
