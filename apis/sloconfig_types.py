"""Typed documents of the ``slo-controller-config`` ConfigMap keys, upstream JSON names.

See docs/configuration.md#the-slo-controller-config-configmap. ``ColocationStrategy`` (cluster fields
of ``colocation-config``, with the manager's validity rules of docs/configuration.md#colocation-config
as field bounds), the ``{clusterStrategy, nodeStrategies}`` documents of the NodeSLO keys, the
host-application, cpu-normalization and resource-amplification documents. ``metricAggregatePolicy``
is ``apis.nodemetric.AggregatePolicy`` (one definition, shared with the NodeMetric spec). Node entries
("profiles") carry ``name`` and ``nodeSelector`` with the strategy fields inline at the same JSON
level, as the Go structs embed them.
Imports: the standard library and ``apis`` modules. Pure, no I/O.
"""

# ruff: noqa: RUF009  -- jf()/inline() return a dataclasses.field() with a default or default_factory
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from apis.gojson import GoStruct, StructKind, inline, jf
from apis.gojson_collections import ListKind, MapKind
from apis.gojson_kinds import (
    AnyKind,
    BoolKind,
    FloatKind,
    IntKind,
    SelectorKind,
    StrKind,
)
from apis.labelselector import LabelSelector
from apis.nodemetric import AggregatePolicy
from apis.nodeslo import (
    CPUBurstStrategy,
    HostApplicationSpec,
    ResourceQOSStrategy,
    ResourceThresholdStrategy,
    SystemStrategy,
)

CALCULATE_POLICIES: Final = ("usage", "request", "maxUsageRequest")
MID_RECLAIM_MODES: Final = ("static",)
MEMORY_COLLECT_POLICIES: Final = ("usageWithoutPageCache", "usageWithHotPageCache", "usageWithPageCache")

B = BoolKind()
I64 = IntKind(64)
SP = StrKind(pointer=True)
S = StrKind(pointer=False)
F = FloatKind()


def _non_empty(value: Any) -> str | None:
    return None if value else "must not be empty"


def _ratios_at_least_one(value: Any) -> str | None:
    bad = {k: v for k, v in value.items() if v < 1}
    return f"ratios below 1 are rejected: {bad}" if bad else None


# --- colocation-config (docs/configuration.md#colocation-config) -------------------------------------
@dataclass(frozen=True)
class ColocationStrategy(GoStruct):
    enable: bool | None = jf("enable", B)
    metric_aggregate_duration_seconds: int | None = jf(
        "metricAggregateDurationSeconds", I64, exclusive_minimum=0
    )
    metric_report_interval_seconds: int | None = jf("metricReportIntervalSeconds", I64, exclusive_minimum=0)
    metric_aggregate_policy: AggregatePolicy | None = jf("metricAggregatePolicy", StructKind(AggregatePolicy))
    metric_memory_collect_policy: str | None = jf("metricMemoryCollectPolicy", SP)  # "", unknown: default
    cpu_reclaim_threshold_percent: int | None = jf("cpuReclaimThresholdPercent", I64, minimum=0)
    cpu_calculate_policy: str | None = jf("cpuCalculatePolicy", SP)  # unknown values behave as "usage"
    memory_reclaim_threshold_percent: int | None = jf("memoryReclaimThresholdPercent", I64, minimum=0)
    memory_calculate_policy: str | None = jf("memoryCalculatePolicy", SP, enum=CALCULATE_POLICIES)
    degrade_time_minutes: int | None = jf("degradeTimeMinutes", I64, exclusive_minimum=0)
    update_time_threshold_seconds: int | None = jf("updateTimeThresholdSeconds", I64, exclusive_minimum=0)
    resource_diff_threshold: float | None = jf("resourceDiffThreshold", F, exclusive_minimum=0)
    mid_reclaim_mode: str | None = jf("midReclaimMode", SP, enum=MID_RECLAIM_MODES)
    mid_cpu_threshold_percent: int | None = jf("midCPUThresholdPercent", I64, minimum=0, maximum=100)
    mid_memory_threshold_percent: int | None = jf("midMemoryThresholdPercent", I64, minimum=0, maximum=100)
    mid_unallocated_percent: int | None = jf("midUnallocatedPercent", I64, minimum=0, maximum=100)
    mid_static_cpu_reserved_percent: int | None = jf("midStaticCPUReservedPercent", I64, minimum=0)
    mid_static_memory_reserved_percent: int | None = jf("midStaticMemoryReservedPercent", I64, minimum=0)
    batch_cpu_threshold_percent: int | None = jf("batchCPUThresholdPercent", I64, minimum=0)
    batch_memory_threshold_percent: int | None = jf("batchMemoryThresholdPercent", I64, minimum=0)
    extensions: dict[str, Any] | None = jf("extensions", MapKind(AnyKind()))


@dataclass(frozen=True)
class NodeColocationCfg(GoStruct):
    name: str | None = jf("name", S)
    node_selector: LabelSelector | None = jf("nodeSelector", SelectorKind())
    strategy: ColocationStrategy = inline(ColocationStrategy, pointer=False)


@dataclass(frozen=True)
class ColocationCfg(GoStruct):
    strategy: ColocationStrategy = inline(ColocationStrategy, pointer=False)
    node_configs: list[NodeColocationCfg] | None = jf(
        "nodeConfigs", ListKind(StructKind(NodeColocationCfg, pointer=False))
    )


# --- NodeSLO keys: {clusterStrategy, nodeStrategies} (docs/configuration.md) ---------------------------
@dataclass(frozen=True)
class NodeResourceThresholdStrategy(GoStruct):
    name: str | None = jf("name", S)
    node_selector: LabelSelector | None = jf("nodeSelector", SelectorKind())
    strategy: ResourceThresholdStrategy | None = inline(ResourceThresholdStrategy)


@dataclass(frozen=True)
class ResourceThresholdCfg(GoStruct):
    cluster_strategy: ResourceThresholdStrategy | None = jf(
        "clusterStrategy", StructKind(ResourceThresholdStrategy)
    )
    node_strategies: list[NodeResourceThresholdStrategy] | None = jf(
        "nodeStrategies", ListKind(StructKind(NodeResourceThresholdStrategy, pointer=False))
    )


@dataclass(frozen=True)
class NodeResourceQOSStrategy(GoStruct):
    name: str | None = jf("name", S)
    node_selector: LabelSelector | None = jf("nodeSelector", SelectorKind())
    strategy: ResourceQOSStrategy | None = inline(ResourceQOSStrategy)


@dataclass(frozen=True)
class ResourceQOSCfg(GoStruct):
    cluster_strategy: ResourceQOSStrategy | None = jf("clusterStrategy", StructKind(ResourceQOSStrategy))
    node_strategies: list[NodeResourceQOSStrategy] | None = jf(
        "nodeStrategies", ListKind(StructKind(NodeResourceQOSStrategy, pointer=False))
    )


@dataclass(frozen=True)
class NodeCPUBurstStrategy(GoStruct):
    name: str | None = jf("name", S)
    node_selector: LabelSelector | None = jf("nodeSelector", SelectorKind())
    strategy: CPUBurstStrategy | None = inline(CPUBurstStrategy)


@dataclass(frozen=True)
class CPUBurstCfg(GoStruct):
    cluster_strategy: CPUBurstStrategy | None = jf("clusterStrategy", StructKind(CPUBurstStrategy))
    node_strategies: list[NodeCPUBurstStrategy] | None = jf(
        "nodeStrategies", ListKind(StructKind(NodeCPUBurstStrategy, pointer=False))
    )


@dataclass(frozen=True)
class NodeSystemStrategy(GoStruct):
    name: str | None = jf("name", S)
    node_selector: LabelSelector | None = jf("nodeSelector", SelectorKind())
    strategy: SystemStrategy | None = inline(SystemStrategy)


@dataclass(frozen=True)
class SystemCfg(GoStruct):
    cluster_strategy: SystemStrategy | None = jf("clusterStrategy", StructKind(SystemStrategy))
    node_strategies: list[NodeSystemStrategy] | None = jf(
        "nodeStrategies", ListKind(StructKind(NodeSystemStrategy, pointer=False))
    )


# --- host-application-config -----------------------------------------------------------------------
@dataclass(frozen=True)
class NodeHostApplicationCfg(GoStruct):
    name: str | None = jf("name", S)
    node_selector: LabelSelector | None = jf("nodeSelector", SelectorKind())
    applications: list[HostApplicationSpec] | None = jf(
        "applications", ListKind(StructKind(HostApplicationSpec, pointer=False))
    )


@dataclass(frozen=True)
class HostApplicationCfg(GoStruct):
    applications: list[HostApplicationSpec] | None = jf(
        "applications", ListKind(StructKind(HostApplicationSpec, pointer=False))
    )
    node_configs: list[NodeHostApplicationCfg] | None = jf(
        "nodeConfigs", ListKind(StructKind(NodeHostApplicationCfg, pointer=False))
    )


# --- cpu-normalization-config ------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelRatioCfg(GoStruct):
    base_ratio: float | None = jf("baseRatio", F, exclusive_minimum=0)
    hyper_thread_enabled_ratio: float | None = jf("hyperThreadEnabledRatio", F, exclusive_minimum=0)
    turbo_enabled_ratio: float | None = jf("turboEnabledRatio", F, exclusive_minimum=0)
    hyper_thread_turbo_enabled_ratio: float | None = jf(
        "hyperThreadTurboEnabledRatio", F, exclusive_minimum=0
    )


@dataclass(frozen=True)
class CPUNormalizationStrategy(GoStruct):
    enable: bool | None = jf("enable", B)
    default_ratio: float | None = jf("defaultRatio", F, exclusive_minimum=0)
    ratio_model: dict[str, ModelRatioCfg] | None = jf(
        "ratioModel", MapKind(StructKind(ModelRatioCfg, pointer=False))
    )


@dataclass(frozen=True)
class NodeCPUNormalizationCfg(GoStruct):
    name: str | None = jf("name", S)
    node_selector: LabelSelector | None = jf("nodeSelector", SelectorKind())
    strategy: CPUNormalizationStrategy = inline(CPUNormalizationStrategy, pointer=False)


@dataclass(frozen=True)
class CPUNormalizationCfg(GoStruct):
    strategy: CPUNormalizationStrategy = inline(CPUNormalizationStrategy, pointer=False)
    node_configs: list[NodeCPUNormalizationCfg] | None = jf(
        "nodeConfigs", ListKind(StructKind(NodeCPUNormalizationCfg, pointer=False))
    )


# --- resource-amplification-config -------------------------------------------------------------------
@dataclass(frozen=True)
class ResourceAmplificationStrategy(GoStruct):
    enable: bool | None = jf("enable", B)
    resource_amplification_ratio: dict[str, float] | None = jf(
        "resourceAmplificationRatio", MapKind(FloatKind(pointer=False)), check=_ratios_at_least_one
    )


@dataclass(frozen=True)
class NodeResourceAmplificationCfg(GoStruct):
    name: str | None = jf("name", S)
    node_selector: LabelSelector | None = jf("nodeSelector", SelectorKind())
    strategy: ResourceAmplificationStrategy = inline(ResourceAmplificationStrategy, pointer=False)


@dataclass(frozen=True)
class ResourceAmplificationCfg(GoStruct):
    strategy: ResourceAmplificationStrategy = inline(ResourceAmplificationStrategy, pointer=False)
    node_configs: list[NodeResourceAmplificationCfg] | None = jf(
        "nodeConfigs", ListKind(StructKind(NodeResourceAmplificationCfg, pointer=False))
    )
