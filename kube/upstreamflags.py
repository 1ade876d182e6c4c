"""The upstream Koordinator v1.8 flags and feature gates koord accepts without implementing them, per
component (docs/flags.md, "Upstream flags"). A flag maps to True when it is a boolean (``-name`` or
``-name=true|false``; it never takes the next argument), False when it takes a value.

Flags koord implements (``-addr``, ``--metrics-addr``, ``--v``, ...) are not listed here: they are options
of the component's own parser. Pure data. Imports: nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "KLOG",
    "KOORDLET",
    "KOORDLET_GATES",
    "MANAGER",
    "MANAGER_GATES",
    "SCHEDULER",
    "SCHEDULER_ALIASES",
    "SCHEDULER_GATES",
]


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _flags(values: str = "", booleans: str = "") -> dict[str, bool]:
    return {**dict.fromkeys(values.split(), False), **dict.fromkeys(booleans.split(), True)}


# klog's flags, on every upstream component (``--v`` is implemented by koord: debug logging at 4+).
# Go spells them with underscores (log_dir); both spellings are accepted.
KLOG: Mapping[str, bool] = _flags(
    values="log-dir log-file log-file-max-size stderrthreshold vmodule log-backtrace-at",
    booleans="logtostderr alsologtostderr skip-headers skip-log-headers add-dir-header one-output "
    "legacy-stderr-threshold-behavior",
)

KOORDLET: Mapping[str, bool] = {
    **KLOG,
    **_flags(
        values="configmap-name configmap-namespace pprof-addr "
        # host paths and runtimes
        "sys-fs-root-dir var-run-root-dir var-lib-kubelet-dir run-root-dir containerd-endpoint "
        "docker-endpoint pouch-endpoint default-runtime-type hami-core-library-directory-path "
        "pod-resources-proxy-path xpu-device-infos-dir "
        # states informer
        "kubelet-preferred-address-type kubelet-sync-interval kubelet-sync-timeout kubelet-read-only-port "
        "report-interval "
        # collectors
        "collect-sys-metric-outdated-interval collect-node-cpu-info-interval "
        "collect-node-storage-info-interval cpi-collector-interval psi-collector-interval "
        "collect-cpi-timewindow coldpage-collector-interval resctrl-collector-interval "
        # metric cache (upstream's TSDB)
        "metric-gc-interval-seconds metric-expire-seconds tsdb-path tsdb-retention-duration "
        "tsdb-stripe-size tsdb-max-bytes tsdb-wal-segment-size tsdb-max-block-chunk-segment-size "
        "tsdb-min-block-duration tsdb-max-block-duration tsdb-head-chunks-write-buffer-size "
        # QoS manager
        "reconcile-interval-seconds cpu-suppress-interval-seconds cpu-evict-interval-seconds "
        "memory-evict-interval-seconds memory-evict-cool-time-seconds cpu-evict-cool-time-seconds "
        "qos-extension-plugins resource-force-update-seconds "
        # runtime hooks (koord applies batch resources from its own reconcile loop, not a hook server)
        "runtime-hooks-network runtime-hooks-addr runtime-hooks-failure-policy "
        "runtime-hooks-plugin-failure-policy runtime-hooks-config-path runtime-hooks-host-endpoint "
        "runtime-hooks-nri-connect-timeout runtime-hooks-nri-backoff-duration runtime-hooks-nri-backoff-cap "
        "runtime-hooks-nri-backoff-steps runtime-hooks-nri-backoff-factor runtime-hooks-nri-socket-path "
        "runtime-hooks-nri-plugin-name runtime-hooks-nri-plugin-index runtime-hooks-disable-stages "
        "runtime-hooks-reconcile-interval "
        # audit (koord writes one JSON-lines file: --audit-log) and prediction
        "audit-log-dir audit-verbose audit-max-disk-space-mb audit-max-concurrent-readers "
        "audit-max-events-limit prediction-checkpoint-filepath prediction-cold-start-duration "
        "prediction-safety-margin-percent prediction-memory-histogram-decay-halflife "
        "prediction-cpu-histogram-decay-halflife prediction-training-interval "
        "prediction-model-expiration-duration prediction-model-checkpoint-interval "
        "prediction-model-checkpoint-max-per-step",
        booleans="enable-pprof kubelet-insecure-tls disable-query-kubelet-config enable-pod-taskids "
        "xpu-enforce-collect-from-device-infos enable-pagecache-collector enable-resctrl-collector "
        "tsdb-enable-prometheus-metric only-evict-by-api enable-nri-runtime-hook disable-unset-cpu-quota",
    ),
}

MANAGER: Mapping[str, bool] = {
    **KLOG,
    **_flags(
        values="leader-elect-resource-lock namespace pprof-addr node-strategy-name-need-check "
        "binding-admission-user-name binding-admission-namespaces binding-admission-exclude-namespaces "
        "binding-admission-bypass-labels binding-admission-bypass-annotations "
        "pod-enhanced-validator-config-namespace pod-enhanced-validator-config-name "
        "pod-enhanced-validator-reconcile-interval quota-update-max-retries quota-update-retry-jitter "
        "quota-update-max-total-jitter colocation-profile-reconcile-interval "
        "colocation-profile-force-update-pod-duration colocation-profile-expire-pod-cache-duration "
        "colocation-profile-update-pod-qps colocation-profile-update-pod-qps-burst noderesource-plugins "
        "async-log-queue-length",
        booleans="enable-pprof binding-admission-dry-run quota-update-conflict-fresh-get "
        "colocation-profile-reconcile-by-default disable-no-deepcopy async-log",
    ),
}

# koord-scheduler upstream is kube-scheduler plus koord's frameworks; the usual kube-scheduler serving,
# authentication and leader-election tuning flags are accepted too.
SCHEDULER: Mapping[str, bool] = {
    **KLOG,
    **_flags(
        values="address bind-address secure-port cert-dir tls-cert-file tls-private-key-file "
        "authentication-kubeconfig authorization-kubeconfig authorization-always-allow-paths master "
        "leader-elect-lease-duration leader-elect-renew-deadline leader-elect-retry-period "
        "leader-elect-resource-lock kube-api-content-type sync-hard-timeout sync-barrier-pod-name "
        "sync-barrier-pod-namespace write-config-to logging-format",
        booleans="authentication-skip-lookup authentication-tolerate-lookup-failure "
        "enable-network-topology-manager profiling contention-profiling permit-address-sharing "
        "permit-port-sharing",
    ),
}
# kube-scheduler's ``--port`` served healthz and metrics: koord's --metrics-port.
SCHEDULER_ALIASES: Mapping[str, str] = {"port": "--metrics-port"}

# Upstream feature gates (pkg/features of Koordinator v1.8): a gate koord does not implement is accepted
# with a warning naming it.
KOORDLET_GATES = _names(
    "AuditEvents AuditEventsHTTPHandler BECPUSuppress BECPUManager BECPUEvict BEMemoryEvict CPUEvict "
    "MemoryEvict CPUAllocatableEvict MemoryAllocatableEvict CPUBurst SystemConfig RdtResctrl CgroupReconcile "
    "NodeTopologyReport Accelerators RDMADevices CPICollector Libpfm4 ResctrlCollector PSICollector "
    "BlkIOReconcile ColdPageCollector HugePageReport PodResourcesProxy HamiCoreVGPUMonitor PerCPUMetric "
    "NodeMetricPromMetrics"
)
_TRANSFORMER_GATES = "PriorityTransformer PreemptionPolicyTransformer ReplaceResourcesTransformer"
MANAGER_GATES = _names(
    "PodMutatingWebhook PodValidatingWebhook ElasticMutatingWebhook ElasticValidatingWebhook "
    "NodeMutatingWebhook NodeValidatingWebhook ConfigMapValidatingWebhook ReservationMutatingWebhook "
    "ColocationProfileSkipMutatingResources ColocationProfileSkipValidatingPriority WebhookFramework "
    "MultiQuotaTree ElasticQuotaIgnorePodOverhead ElasticQuotaIgnoreTerminatingPod "
    "ElasticQuotaImmediateIgnoreTerminatingPod ElasticQuotaGuaranteeUsage "
    "ElasticQuotaEnableUpdateResourceKey ElasticQuotaEvaluationTransformPod DisableDefaultQuota "
    "SupportParentQuotaSubmitPod EnableQuotaAdmission EnableQuotaAdmissionOnUpdate "
    "EnablePodEnhancedValidator EnableSyncGPUSharedResource ColocationProfileController "
    "ValidatePodDeviceResource DisableExtendedResourceSpec DisableDeviceResourceSpec "
    f"BindingAdmissionWebhook DisablePVCReservation {_TRANSFORMER_GATES}"
)
SCHEDULER_GATES = _names(
    "CompatibleCSIStorageCapacity DisableCSIStorageCapacityInformer CompatiblePodDisruptionBudget "
    "DisablePodDisruptionBudgetInformer DisableDynamicResourceAllocationInformer ResizePod "
    "MultiQuotaTree ElasticQuotaIgnorePodOverhead ElasticQuotaIgnoreTerminatingPod "
    "ElasticQuotaImmediateIgnoreTerminatingPod ElasticQuotaGuaranteeUsage DisableDefaultQuota "
    "SupportParentQuotaSubmitPod LazyReservationRestore OmitNodeLabelsForReservation "
    "SkipReservationFitsNode DevicePluginAdaption CleanExpiredReservationAllocated "
    "SkipFilterWithNominatedPods DynamicSchedulerCheck CSIStorageCapacity GenericEphemeralVolume "
    "PodDisruptionBudget SyncBarrier CrossSchedulerNomination GangPendingPodsConditionPatch "
    f"EnableInlineBatchSchedule EnableBatchScheduleNodeSnapshot {_TRANSFORMER_GATES}"
)
